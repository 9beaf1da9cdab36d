"""Redaction of secrets from text bound for traces, logs and read-only views.

Two passes, in this order:

1. **Known values** (exact): secrets this process knows — the configured API key, credentials
   of a ``base_url``, arguments a tool marks secret, a browser task's ``sensitive_data`` — and
   the values of environment variables whose names say KEY, TOKEN, SECRET or PASSWORD. A known
   value is replaced wherever it appears, whatever its shape, and so are the usual encodings
   of it (:func:`encoded_forms`: Python ``repr``/``ascii`` bodies, JSON string bodies, URL
   percent-encodings as Python and as the WHATWG URL Standard (Chromium) write them, base64).
   The forms are computed once per set of values, not per text.
2. **Patterns** (best effort): API keys and bearer tokens by shape, private key (PEM) blocks,
   credential headers (``Authorization:``, ``Cookie:``, ``X-Api-Key:``...), ``name=value``
   assignments whose name says key/token/secret/password, credential query parameters,
   passwords in URLs, PINs and one-time codes next to their label, "the password is ...",
   IBANs (checked with their mod-97 checksum) and runs of 12 or more BIP-39 words (seed
   phrases). A secret with none of these shapes and not known to the process is not found:
   pattern redaction can never be complete.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

if TYPE_CHECKING:
    from supervisor.ledger.models import TraceEvent

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 4
"""Known values shorter than this are not replaced: too short to find without mangling text."""

_PEM_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
    re.DOTALL,
)
_PATTERNS = (
    _PEM_BLOCK,
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
)
_HEADER = re.compile(
    r"(?im)\b((?:proxy-)?authorization|(?:set-)?cookie|x-api-key|api-key|x-auth-token|"
    r"x-access-token|x-csrf-token|x-xsrf-token|x-amz-security-token|x-goog-api-key)"
    r"([ \t]*:[ \t]*)([^\r\n]+)"
)
_QUERY = re.compile(
    r"(?i)([?&](?:key|sig|signature|auth|code|session|sid|access_token|refresh_token|"
    r"api-key|apikey|password|token)=)[^&\s#\"']+"
)
_PHRASE = re.compile(
    r"(?i)\b((?:password|passphrase|passcode|passwd|pin|secret)\s+(?:is|was|will\s+be)"
    r"\s*:?\s*)(\"[^\"]*\"|'[^']*'|\S+)"
)
_ASSIGNMENT = re.compile(
    r"(?i)\b([\w.-]*(?:api[_-]?key|token|secret|password|passwd|pwd|authorization|credential)"
    r"[\w.-]*)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
)
_PIN = re.compile(r"(?i)\b(pin(?:[ _-]?(?:code|number))?)(\s*(?:[:=#]|is|was)?\s*)(\d{4,8})\b")
_OTP = re.compile(
    r"(?i)\b(otp|totp|one[ -]time[ -](?:password|passcode|code)|(?:verification|security|"
    r"confirmation|2fa|mfa|auth(?:entication)?|login|sms)[ -]code)"
    r"(\s*(?:[:=#]|is|was)?\s*)(\d{4,8})\b"
)
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_WORD_RUN = re.compile(r"\b[a-z]{3,8}(?:[ \t\r\n]+[a-z]{3,8}){11,}\b")
_WORD = re.compile(r"[a-z]+")
SEED_PHRASE_WORDS = 12
"""A run of at least this many BIP-39 words is taken for a seed phrase."""
_SECRET_ENV_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")


def _secret_env_values(environ: Mapping[str, str]) -> list[str]:
    values = [
        value
        for name, value in environ.items()
        if _SECRET_ENV_NAME.search(name) and len(value) >= 8
    ]
    return sorted(values, key=len, reverse=True)


@lru_cache(maxsize=1)
def _bip39_words() -> frozenset[str]:
    """The BIP-39 English word list (shipped by the ``mnemonic`` package)."""
    text = resources.files("mnemonic").joinpath("wordlist", "english.txt").read_text("utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def _iban_valid(compact: str) -> bool:
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    digits = "".join(str(int(char, 36)) for char in rearranged)
    return int(digits) % 97 == 1


def _redact_iban(match: re.Match[str]) -> str:
    text = match.group()
    # The longest prefix that is a valid IBAN wins (a trailing word may have been swallowed).
    for end in range(len(text), 14, -1):
        if end < len(text) and text[end] != " ":
            continue
        if _iban_valid(text[:end].replace(" ", "")):
            return REDACTED + text[end:]
    return text


def _redact_seed_phrase(match: re.Match[str]) -> str:
    words = _bip39_words()
    text = match.group()
    spans = [(found.start(), found.end(), found.group()) for found in _WORD.finditer(text)]
    pieces: list[str] = []
    cursor = 0
    index = 0
    while index < len(spans):
        end = index
        while end < len(spans) and spans[end][2] in words:
            end += 1
        if end - index >= SEED_PHRASE_WORDS:
            pieces.append(text[cursor : spans[index][0]] + REDACTED)
            cursor = spans[end - 1][1]
            index = end
        else:
            index = max(end, index + 1)
    pieces.append(text[cursor:])
    return "".join(pieces)


def _keep_label(match: re.Match[str]) -> str:
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


def redact_patterns(text: str) -> str:
    """Replace secrets that have a recognisable shape (best effort, see the module doc)."""
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    text = _HEADER.sub(_keep_label, text)
    text = _QUERY.sub(lambda match: f"{match.group(1)}{REDACTED}", text)
    text = _PHRASE.sub(lambda match: f"{match.group(1)}{REDACTED}", text)
    text = _ASSIGNMENT.sub(_keep_label, text)
    text = _PIN.sub(_keep_label, text)
    text = _OTP.sub(_keep_label, text)
    text = _IBAN.sub(_redact_iban, text)
    return _WORD_RUN.sub(_redact_seed_phrase, text)


def _usable(values: Iterable[str | None]) -> list[str]:
    return [value for value in values if value and len(value) >= MIN_SECRET_CHARS]


# Printable ASCII each WHATWG percent-encode set encodes (C0 controls, DEL and non-ASCII always).
_WHATWG_QUERY = ' "#<>'
_WHATWG_SETS = {
    "fragment": ' "<>`',
    "query": _WHATWG_QUERY,
    "special-query": _WHATWG_QUERY + "'",
    "path": _WHATWG_QUERY + "?^`{}",
    "userinfo": _WHATWG_QUERY + "?^`{}/:;=@[\\]|",
    "component": _WHATWG_QUERY + "?^`{}/:;=@[\\]|$%&+,",
}
_FORM_URLENCODED = _WHATWG_SETS["component"] + "!'()~"


def _percent_encoded(value: str, encoded: str, *, space_as_plus: bool = False) -> str:
    """``value`` percent-encoded (UTF-8, upper-case hex) as a WHATWG encode set does it."""
    pieces: list[str] = []
    for char in value:
        if char == " " and space_as_plus:
            pieces.append("+")
        elif " " <= char <= "~" and char not in encoded:
            pieces.append(char)
        else:
            pieces.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
    return "".join(pieces)


def _python_escaped(value: str, *, escape_single_quote: bool, ascii_only: bool) -> str:
    """The body of ``repr(value)`` (or ``ascii(value)``) between its quotes.

    ``repr`` escapes ``'`` only when it chose single quotes, which depends on the text around
    a value when the value is part of a larger string: both bodies are forms of it.
    """
    escape = ascii if ascii_only else repr
    pieces: list[str] = []
    for char in value:
        if char == "'":
            pieces.append("\\'" if escape_single_quote else "'")
        elif char == '"':
            pieces.append('"')
        else:
            pieces.append(escape(char)[1:-1])
    return "".join(pieces)


def _base64_forms(raw: bytes) -> list[str]:
    """Base64 (standard and URL-safe) of ``raw``: the whole padded encoding, and the
    characters that depend on ``raw`` alone when it starts at each of the three byte offsets
    of a larger encoded buffer."""
    forms: list[str] = []
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.append(encode(raw).decode("ascii"))
        for shift in range(3):
            text = encode(bytes(shift) + raw).decode("ascii")
            first_bit, end_bit = 8 * shift, 8 * (shift + len(raw))
            forms.append(text[-(-first_bit // 6) : end_bit // 6])
    return forms


def encoded_forms(value: str) -> frozenset[str]:
    """``value`` and the usual encodings of it, as they would appear inside other text.

    The raw value; the bodies of its Python ``repr`` and ``ascii`` (either quote style); its
    JSON string body (``ensure_ascii`` on and off); its percent-encodings by
    ``urllib.parse.quote`` (``safe=''`` and the default ``'/'``) and ``quote_plus``, and by
    the WHATWG URL Standard's path (``\\`` read as ``/``, as in an http(s) URL), query,
    special-query, fragment, userinfo and component sets and
    ``application/x-www-form-urlencoded`` (how Chromium writes a value into a URL it loads, or
    a form it submits); its UTF-8 bytes in base64, standard and URL-safe, at every
    alignment. Forms shorter than :data:`MIN_SECRET_CHARS` are left out.
    """
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    for escape_single_quote in (True, False):
        for ascii_only in (True, False):
            forms.add(
                _python_escaped(
                    value, escape_single_quote=escape_single_quote, ascii_only=ascii_only
                )
            )
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no URL or base64 form exists
        raw = None
    if raw is not None:
        forms.update((quote(value, safe=""), quote(value), quote_plus(value)))
        forms.update(_percent_encoded(value, encoded) for encoded in _WHATWG_SETS.values())
        if "\\" in value:  # the path of an http(s) URL reads a backslash as a slash
            forms.add(_percent_encoded(value.replace("\\", "/"), _WHATWG_SETS["path"]))
        forms.add(_percent_encoded(value, _FORM_URLENCODED, space_as_plus=True))
        forms.update(_base64_forms(raw))
    return frozenset(form for form in forms if len(form) >= MIN_SECRET_CHARS)


@lru_cache(maxsize=64)
def _forms_of(values: frozenset[str]) -> tuple[str, ...]:
    """Every encoded form of ``values``, longest first (so no shorter form splits a longer)."""
    forms: set[str] = set()
    for value in values:
        forms |= encoded_forms(value)
    return tuple(sorted(forms, key=lambda form: (-len(form), form)))


def _replace_forms(text: str, forms: tuple[str, ...]) -> str:
    # A substring scan per form (C speed) beats one regex alternation of the same forms on
    # trace-sized text; see docs/tools.md for the measured cost.
    for form in forms:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def replace_values(text: str, values: Iterable[str]) -> str:
    """``text`` with every occurrence of each value, and of each of its encoded forms
    (:func:`encoded_forms`), replaced (longest form first)."""
    return _replace_forms(text, _forms_of(frozenset(_usable(values))))


def text_redactor(
    *, environ: Mapping[str, str] | None = None, known: Iterable[str] = ()
) -> Callable[[str], str]:
    """The function :func:`redact` applies, with its known values gathered once.

    Args:
        environ: Environment to take secret values from (default: ``os.environ``, read now).
        known: Secret values the caller knows (replaced with their encodings).

    Returns:
        A function from text to redacted text: known values first, then patterns.
    """
    values = [*known, *_secret_env_values(os.environ if environ is None else environ)]
    forms = _forms_of(frozenset(_usable(values)))

    def redact_text(text: str) -> str:
        return redact_patterns(_replace_forms(text, forms))

    return redact_text


def redact(
    text: str, *, environ: Mapping[str, str] | None = None, known: Iterable[str] = ()
) -> str:
    """Replace likely secrets in ``text`` with ``[REDACTED]``.

    Args:
        text: Text about to reach a trace, a log or a read-only view.
        environ: Environment to take secret values from (default: ``os.environ``).
        known: Secret values this caller knows (replaced exactly, whatever their shape, and in
            their usual encodings).

    Returns:
        The text with every known value and every pattern match replaced.
    """
    return text_redactor(environ=environ, known=known)(text)


def redact_json(value: Any, redact_text: Callable[[str], str]) -> Any:
    """JSON data with ``redact_text`` applied to every string at every depth, object keys
    included (a key can hold a secret as well as a value can)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            redact_text(str(key)): redact_json(item, redact_text) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_json(item, redact_text) for item in value]
    return value


SECRET_KEY = re.compile(
    r"(?i)(pass(word|wd|phrase|code)?|pwd|secret|token|api[_-]?key|apikey|auth|credential|"
    r"cookie|session|private[_-]?key|signature|ssn|card[_-]?number|cvv|mnemonic|"
    r"(?:^|[^a-z])(pin|otp|totp|iban|seed|recovery)(?:[^a-z]|$))"
)
"""Object keys whose values are taken as secret whatever they look like (``api_key``,
``password``, ``pin``...)."""


def redact_value(value: Any, redact_text: Callable[[str], str] | None = None) -> Any:
    """JSON data for a view that shows values: every string passed through ``redact_text``
    (default :func:`redact`), and the value of every key :data:`SECRET_KEY` matches replaced by
    ``[REDACTED]`` outright, at every depth (an API key has no shape to find by itself)."""
    text = redact_text or redact
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {
            str(key): REDACTED if SECRET_KEY.search(str(key)) else redact_value(item, text)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_value(item, text) for item in value]
    return value


def redact_data(value: Any, *, environ: Mapping[str, str] | None = None) -> Any:
    """JSON data with :func:`redact` applied to every string, keys included, at every depth."""
    return redact_json(value, text_redactor(environ=environ))


def redact_event(event: TraceEvent, redact_text: Callable[[str], str]) -> TraceEvent:
    """``event`` with ``redact_text`` applied to every string it holds: each string field
    (agent, thread and run ids, kind, tool, outcome status, reason code, blob reference) and
    the payload's keys and values at every depth.

    The one walk of a trace event: the ledger applies it with its known secrets when an event
    is written, the exports and ``traces tail`` with the pattern pass when one is read.
    """
    update: dict[str, Any] = {}
    for name in type(event).model_fields:
        value = getattr(event, name)
        if isinstance(value, str | dict | list):
            redacted = redact_json(value, redact_text)
            if redacted != value:
                update[name] = redacted
    return event.model_copy(update=update) if update else event


class KnownSecrets:
    """Secret values known to one process, replaced (with their encodings) wherever they appear.

    The ledger keeps one (``ApprovalLedger.trace_secrets``): every trace event it writes passes
    through it, whoever wrote the event. Values only accumulate; adding is thread-safe. The
    encoded forms (:func:`encoded_forms`) are computed when values are added, once.
    """

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._lock = threading.Lock()
        self._state: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self.add(*values)

    def add(self, *values: str | None) -> None:
        """Remember ``values`` (``None``, empty and very short values are ignored)."""
        fresh = [value for value in _usable(values) if value not in self._state[0]]
        if fresh:
            with self._lock:
                merged = frozenset(self._state[0]) | frozenset(fresh)
                known = tuple(sorted(merged, key=len, reverse=True))
                self._state = (known, _forms_of(merged))

    @property
    def values(self) -> tuple[str, ...]:
        """The known values, longest first."""
        return self._state[0]

    def __bool__(self) -> bool:
        return bool(self._state[0])

    def redact_text(self, text: str) -> str:
        """``text`` with every known value and encoded form replaced (longest first)."""
        return _replace_forms(text, self._state[1])

    def redact_data(self, value: Any) -> Any:
        """JSON data with every known value replaced in its strings (keys included)."""
        if not self._state[0]:
            return value
        return redact_json(value, self.redact_text)

    def redact_event(self, event: TraceEvent) -> TraceEvent:
        """``event`` with every known value replaced in every string it holds
        (:func:`redact_event`)."""
        if not self._state[0]:
            return event
        return redact_event(event, self.redact_text)
