"""Reading a navigation URL exactly as Chromium will, and refusing one that reads two ways.

Chromium parses URLs by the WHATWG URL Standard; Python's ``urllib`` does not (it keeps a
backslash inside the authority, does not decode ``%61`` or IDNA-map a host, does not read
``0x7f.1`` as ``127.0.0.1``, finds no host in ``http:host``). A gate that judged a URL by one
reading while the browser loaded another would approve one origin and load a different one.

`read_url` therefore parses with ada (a WHATWG-conformant parser, the one Node.js uses) and
refuses, with a typed `NavigationURLRefused`, any URL that

* does not parse (``url_unparsable``);
* contains characters the browser silently drops: ASCII tab or newline anywhere, a C0 control
  or space at either end (``url_ambiguous``);
* reads to a different scheme, host or port under ``urllib`` than under the WHATWG parser
  (``url_ambiguous``);
* carries credentials (``user:password@``), the classic disguise of a host (``url_credentials``).

What the gate decides on and what the worker navigates to is the serialised WHATWG URL
(`WebURL.href`), never the raw string, so the origin approved is the origin that loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ada_url import URL as WhatwgURL

from supervisor.errors import SupervisorError

DEFAULT_PORTS = {"http": 80, "https": 443}
"""The web schemes a navigation may use, with their default ports."""

_C0_OR_SPACE = "".join(chr(code) for code in range(0x21))
_DROPPED_INSIDE = frozenset("\t\n\r")
_ENCODED_PLACEHOLDER = re.compile(r"%3Csecret%3E(.*?)%3C/secret%3E")


class NavigationURLRefused(SupervisorError, ValueError):
    """A navigation target the gate will not judge, so the browser never loads it."""

    code = "url_refused"


class UnparsableURL(NavigationURLRefused):
    """The URL does not parse by the WHATWG URL Standard (the browser would not load it)."""

    code = "url_unparsable"


class AmbiguousURL(NavigationURLRefused):
    """The URL reads to different origins depending on who parses it."""

    code = "url_ambiguous"


class CredentialsInURL(NavigationURLRefused):
    """The URL carries ``user:password@`` before its host."""

    code = "url_credentials"


@dataclass(frozen=True)
class WebURL:
    """A URL as the browser reads it.

    Attributes:
        href: The serialised WHATWG URL: what the gate judges and the worker navigates to.
        scheme: Lower-case scheme without the colon (``http``, ``about``, ``javascript``, ...).
        host: The WHATWG host serialisation (IDNA-mapped, IPv4 dotted, IPv6 in brackets);
            empty for URLs without a host.
        port: The effective port of an http(s) URL (the default when none is written).
    """

    href: str
    scheme: str
    host: str
    port: int | None

    @property
    def is_web(self) -> bool:
        """True for an http(s) URL with a host."""
        return self.scheme in DEFAULT_PORTS and bool(self.host)

    @property
    def origin(self) -> str | None:
        """``scheme://host:port`` (port always written) of an http(s) URL, else ``None``."""
        if not self.is_web:
            return None
        return f"{self.scheme}://{self.host}:{self.port}"


def read_url(text: str) -> WebURL:
    """Read ``text`` as Chromium will, refusing it unless every reading agrees.

    Args:
        text: The URL as the model (or a page) wrote it.

    Returns:
        The URL as the browser will load it.

    Raises:
        UnparsableURL: It does not parse by the WHATWG URL Standard.
        AmbiguousURL: It contains characters the browser drops, or Python reads another
            scheme, host or port.
        CredentialsInURL: It has a user name or password.
    """
    if text != text.strip(_C0_OR_SPACE) or _DROPPED_INSIDE.intersection(text):
        raise AmbiguousURL(
            f"The URL {text!r} contains a tab, newline or control character the browser "
            "silently drops.",
            hint="Send the URL without them.",
        )
    try:
        parsed = WhatwgURL(text)
    except ValueError:
        raise UnparsableURL(
            f"The URL {text!r} is not a valid URL.", hint="Send an absolute http(s) URL."
        ) from None
    url = _web_url(parsed)
    if parsed.username or parsed.password:
        raise CredentialsInURL(
            f"The URL {text!r} carries credentials before its host {url.host!r}.",
            hint="Send the URL without user name and password.",
        )
    python_reading = _python_reading(text)
    browser_reading = (url.scheme, _bare_host(url.host), url.port) if url.is_web else None
    if url.is_web:
        agrees = python_reading == browser_reading
    else:
        agrees = python_reading is None or python_reading[0] == url.scheme
    if not agrees or _web_url(WhatwgURL(url.href)) != url:
        shown = url.origin or url.href
        raise AmbiguousURL(
            f"The URL {text!r} reads as {_describe(python_reading)} to one parser but loads "
            f"{shown!r} in the browser.",
            hint=f"Send it in its canonical form {url.href!r} if that is the page you mean.",
        )
    return url


def web_origin(url: str) -> WebURL | None:
    """The browser's reading of an http(s) URL, or ``None`` (another scheme, or refused)."""
    try:
        read = read_url(url)
    except NavigationURLRefused:
        return None
    return read if read.is_web else None


def with_placeholders(href: str) -> str:
    """``href`` with its percent-encoded ``<secret>name</secret>`` placeholders restored.

    browser-use substitutes sensitive data into those placeholders just before an action
    runs; serialising the URL encodes ``<`` and ``>``, which would hide them. They can only
    stand in the path, query or fragment (a host cannot hold ``%``, credentials are
    refused), so what browser-use puts there cannot move the URL to another origin.
    """
    return _ENCODED_PLACEHOLDER.sub(r"<secret>\1</secret>", href)


def _web_url(parsed: WhatwgURL) -> WebURL:
    scheme = parsed.protocol.removesuffix(":").lower()
    host = parsed.hostname.lower()
    port: int | None = None
    if scheme in DEFAULT_PORTS:
        port = int(parsed.port) if parsed.port else DEFAULT_PORTS[scheme]
    return WebURL(href=parsed.href, scheme=scheme, host=host, port=port)


def _python_reading(text: str) -> tuple[str, str | None, int | None] | None:
    """``urllib``'s (scheme, host, port), or ``None`` when it cannot read the URL at all."""
    try:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        port = parts.port
    except ValueError:
        return None
    if scheme in DEFAULT_PORTS and port is None:
        port = DEFAULT_PORTS[scheme]
    return scheme, parts.hostname, port


def _bare_host(host: str) -> str:
    """A WHATWG host as ``urllib`` writes it: IPv6 without its brackets."""
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    return host


def _describe(reading: tuple[str, str | None, int | None] | None) -> str:
    if reading is None:
        return "no valid URL"
    scheme, host, port = reading
    if not host:
        return f"an {scheme or 'unnamed'}-scheme URL without a host"
    return f"{scheme}://{host}:{port}"
