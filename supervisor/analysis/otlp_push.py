"""Push an OTLP trace document to a collector over OTLP/HTTP (stdlib ``urllib`` only).

* The URL: ``http(s)://host[:port]`` with no path gets the OTLP/HTTP traces path
  ``/v1/traces``, as the OpenTelemetry exporters do; any other path is used as given.
  Userinfo in the URL is sent as HTTP Basic authentication; messages show the URL without
  userinfo or query (:func:`shown_url`).
* The body: protobuf (``application/x-protobuf``, :mod:`supervisor.analysis.otlp_proto`) or
  JSON (``application/json``); at most :data:`MAX_SPANS_PER_REQUEST` spans per request.
* Headers (collector credentials) are sent and never logged or put in a message.
* Retries, as the OTLP/HTTP specification says: a connection error or HTTP 429, 502, 503 or
  504 is tried again (``attempts`` in all, exponential backoff, ``Retry-After`` honoured up to
  :data:`MAX_RETRY_AFTER_SECONDS`); any other non-2xx answer is final. Redirects are not
  followed (headers would go to another origin).
* Failures raise :class:`CollectorUnreachable` or :class:`CollectorRefused`, naming the URL,
  how many spans the collector had accepted, and what to do. Nothing in the ledger changes: the
  same export can be pushed again.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from supervisor.analysis.otlp import document_spans, with_spans
from supervisor.analysis.otlp_proto import encode_trace_request, partial_success
from supervisor.errors import SupervisorError
from supervisor.services.rendering import dumps_visible
from supervisor.version import __version__

Protocol = Literal["http/protobuf", "http/json"]
TRACES_PATH = "/v1/traces"
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
MAX_SPANS_PER_REQUEST = 2000
MAX_RETRY_AFTER_SECONDS = 30.0
_MEDIA_TYPES: dict[Protocol, str] = {
    "http/protobuf": "application/x-protobuf",
    "http/json": "application/json",
}
_HINTS = {
    400: "The collector could not read the spans; check that the URL is an OTLP/HTTP traces "
    "endpoint, or try --protocol http/json.",
    401: "Check the collector credentials (--header, e.g. Authorization=Bearer ..., or "
    "OTEL_EXPORTER_OTLP_HEADERS).",
    404: f"Check the URL's path: the OTLP/HTTP traces path is {TRACES_PATH}.",
    413: "The collector refused the request size; push a shorter time span with --since.",
}
_HINTS[403] = _HINTS[401]
_AGAIN = (
    " The ledger keeps every event: push again later, or write a file with "
    "`supervisor traces export --format otlp-json -o spans.json`."
)


class InvalidCollectorUrl(SupervisorError, ValueError):
    """The collector URL is not an ``http://`` or ``https://`` URL with a host."""

    code = "invalid_otlp_endpoint"

    def __init__(self, url: str) -> None:
        super().__init__(
            f"{url} is not an OTLP/HTTP collector URL; nothing was sent.",
            hint="Give http(s)://host:port (the path defaults to /v1/traces), e.g. "
            "http://localhost:4318.",
        )


class CollectorUnreachable(SupervisorError, ConnectionError):
    """No answer from the collector (refused, timed out, name not found) after every try."""

    code = "otlp_collector_unreachable"

    def __init__(self, url: str, reason: str, attempts: int, sent: int, total: int) -> None:
        super().__init__(
            f"Could not reach the OTLP collector at {url} ({reason}) after {attempts} "
            f"attempt{'s' if attempts != 1 else ''}; {sent} of {total} spans were sent.",
            hint="Check that the collector runs and listens on that address." + _AGAIN,
            url=url, sent=sent, total=total,
        )  # fmt: skip


class CollectorRefused(SupervisorError, RuntimeError):
    """The collector answered with a status that is not a success (after retries, if any)."""

    code = "otlp_export_refused"

    def __init__(self, url: str, status: int, detail: str, sent: int, total: int) -> None:
        said = f": {detail}" if detail else ""
        super().__init__(
            f"The OTLP collector at {url} answered HTTP {status}{said}; {sent} of {total} "
            "spans were sent.",
            hint=_hint(status) + _AGAIN,
            url=url, status=status, sent=sent, total=total,
        )  # fmt: skip


def _hint(status: int) -> str:
    if status in _HINTS:
        return _HINTS[status]
    if 300 <= status < 400:
        return "Redirects are not followed (headers stay with the URL given); use the final URL."
    if status in RETRYABLE_STATUSES:
        return "The collector is overloaded or unavailable."
    return "Check the collector's log."


@dataclass(frozen=True)
class Collector:
    """Where and how to push: the request URL, headers and body protocol.

    Attributes:
        url: The URL requests go to (userinfo removed, query kept).
        shown: The URL as messages show it (no userinfo, no query).
        headers: Extra request headers (never shown).
    """

    url: str
    shown: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    protocol: Protocol = "http/protobuf"

    @classmethod
    def parse(
        cls, url: str, headers: Mapping[str, str] | None = None,
        protocol: Protocol = "http/protobuf",
    ) -> Collector:  # fmt: skip
        """Check ``url`` and add the default traces path (see the module docstring).

        Raises:
            InvalidCollectorUrl: Not ``http(s)://`` with a host.
        """
        try:
            parts = urlsplit(url.strip())
            host, port = parts.hostname, parts.port
        except ValueError:
            raise InvalidCollectorUrl(shown_url(url)) from None
        if parts.scheme.lower() not in ("http", "https") or not host:
            raise InvalidCollectorUrl(shown_url(url))
        netloc = f"[{host}]" if ":" in host else host
        netloc += f":{port}" if port is not None else ""
        path = parts.path if parts.path not in ("", "/") else TRACES_PATH
        sent = dict(headers or {})
        if parts.username is not None or parts.password is not None:
            raw = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
            sent.setdefault("Authorization", "Basic " + base64.b64encode(raw.encode()).decode())
        return cls(
            url=urlunsplit((parts.scheme, netloc, path, parts.query, "")),
            shown=urlunsplit((parts.scheme, netloc, path, "", "")),
            headers=sent, protocol=protocol,
        )  # fmt: skip


def shown_url(url: str) -> str:
    """``url`` without userinfo, query or fragment (what a message may show)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, netloc, parts.path, "", "")) or "(empty)"
    except ValueError:
        return "(not a URL)"


@dataclass(frozen=True)
class PushReport:
    """What a push did: spans sent, requests made, spans the collector said it rejected."""

    spans: int
    requests: int
    rejected: int = 0
    rejected_reason: str = ""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx answer is raised as an HTTPError, never followed


def _body(document: dict[str, Any], protocol: Protocol) -> bytes:
    if protocol == "http/protobuf":
        return encode_trace_request(document)
    return dumps_visible(document).encode("utf-8")


def _rejected(body: bytes, protocol: Protocol) -> tuple[int, str]:
    if protocol == "http/protobuf":
        return partial_success(body)
    try:
        partial = json.loads(body or b"{}").get("partialSuccess") or {}
        return int(partial.get("rejectedSpans") or 0), str(partial.get("errorMessage") or "")
    except (ValueError, AttributeError, TypeError):
        return 0, ""


def _detail(error: urllib.error.HTTPError) -> str:
    """A short, single-line excerpt of the collector's error body (shown escaped)."""
    try:
        text = error.read(300).decode("utf-8", "replace")
    except (OSError, HTTPException):
        return ""
    return " ".join(text.split())[:200]


def _retry_after(error: urllib.error.HTTPError, fallback: float) -> float:
    value = error.headers.get("Retry-After") if error.headers else None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_SECONDS) if value else fallback
    except ValueError:
        return fallback


def push_document(
    document: dict[str, Any],
    collector: Collector,
    *,
    attempts: int = 3,
    backoff_seconds: float = 0.5,
    timeout_seconds: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> PushReport:
    """POST ``document`` (an OTLP/JSON ``ExportTraceServiceRequest``) to ``collector``.

    Args:
        document: What :func:`supervisor.analysis.otlp.otlp_document` built.
        collector: URL, headers and protocol.
        attempts: Tries per request (the first and the retries).
        backoff_seconds: The wait before the first retry; it doubles for each next one.
        timeout_seconds: Per request.
        sleep: How to wait (tests pass their own).

    Returns:
        How many spans and requests were sent and what the collector reported rejecting.

    Raises:
        CollectorUnreachable: A connection error on every try.
        CollectorRefused: A non-2xx answer (a retryable one on every try).
    """
    opener = urllib.request.build_opener(_NoRedirect)
    spans = document_spans(document)
    total, sent, requests, rejected, reason = len(spans), 0, 0, 0, ""
    headers = {**collector.headers, "Content-Type": _MEDIA_TYPES[collector.protocol],
               "User-Agent": f"agent-supervisor/{__version__}"}  # fmt: skip
    for start in range(0, max(total, 1), MAX_SPANS_PER_REQUEST):
        batch = with_spans(document, spans[start : start + MAX_SPANS_PER_REQUEST])
        body = _body(batch, collector.protocol)
        for attempt in range(1, max(attempts, 1) + 1):
            wait = backoff_seconds * 2 ** (attempt - 1)
            request = urllib.request.Request(collector.url, body, headers, method="POST")
            try:
                with opener.open(request, timeout=timeout_seconds) as response:
                    answer = response.read()
            except urllib.error.HTTPError as error:
                with error:  # closes its connection
                    if error.code not in RETRYABLE_STATUSES or attempt >= attempts:
                        detail = _detail(error)
                        raise CollectorRefused(
                            collector.shown, error.code, detail, sent, total
                        ) from None
                    wait = _retry_after(error, wait)
                sleep(wait)
                continue
            except (OSError, HTTPException) as error:  # URLError, refused, timed out
                if attempt >= attempts:
                    cause = getattr(error, "reason", error)
                    raise CollectorUnreachable(
                        collector.shown, str(cause) or type(cause).__name__, attempt, sent, total
                    ) from None
                sleep(wait)
                continue
            requests += 1
            sent += len(document_spans(batch))
            count, message = _rejected(answer, collector.protocol)
            rejected, reason = rejected + count, message or reason
            break
    return PushReport(spans=sent, requests=requests, rejected=rejected, rejected_reason=reason)
