"""A model endpoint's URL split into what may be saved or logged and what may not.

A ``base_url`` can carry credentials: userinfo (``https://user:pass@host/v1``) and query
parameters (``?api-key=...``). The part without them, :attr:`Endpoint.url`, is what the ledger
saves and what the HTTP client is given, so it is also all that ``httpx`` and ``openai`` ever log.
The credentials stay in this process's memory and are added to each request by
:class:`CredentialTransport` below the client's logging, and only for requests to the endpoint's
own origin (never to a host a redirect points at).
"""

from __future__ import annotations

import base64
import importlib
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SECRET_QUERY_NAME = re.compile(
    r"(?i)(key|token|secret|sig|signature|password|passwd|auth|code|session|credential)"
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A parsed ``base_url``.

    Attributes:
        url: ``scheme://host[:port]/path`` without userinfo, query or fragment; None for the
            client's default endpoint.
        query: Query parameters of the configured URL, sent with every request to the origin.
        username: Userinfo name, sent as HTTP Basic authentication.
        password: Userinfo password.
    """

    url: str | None
    query: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, base_url: str | None) -> Endpoint:
        """Split ``base_url`` (None or empty: the client's default endpoint)."""
        if not base_url:
            return cls(url=None)
        parts = urlsplit(base_url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
        url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        return cls(
            url=url,
            query=tuple(parse_qsl(parts.query, keep_blank_values=True)),
            username=unquote(parts.username) if parts.username is not None else None,
            password=unquote(parts.password) if parts.password is not None else None,
        )

    @property
    def has_credentials(self) -> bool:
        """True when requests need userinfo or query parameters added."""
        return bool(self.query) or self.username is not None or self.password is not None

    def secret_values(self) -> tuple[str, ...]:
        """Values to keep out of traces: the password and credential-named query values."""
        values = [value for name, value in self.query if _SECRET_QUERY_NAME.search(name)]
        if self.password:
            values.append(self.password)
        return tuple(values)

    def origin(self) -> tuple[str, str, int] | None:
        """``(scheme, host, port)`` of the endpoint, the only origin credentials go to."""
        if self.url is None:
            return None
        parts = urlsplit(self.url)
        scheme = parts.scheme.lower()
        port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
        return scheme, (parts.hostname or "").lower(), port

    def basic_authorization(self) -> str | None:
        """The ``Authorization`` header value for the userinfo, if there is one."""
        if self.username is None and self.password is None:
            return None
        raw = f"{self.username or ''}:{self.password or ''}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


def saved_base_url(base_url: str | None) -> str | None:
    """``base_url`` as it may be stored or shown: userinfo, query and fragment removed."""
    return Endpoint.parse(base_url).url


def _httpx_module(client_class: type[Any]) -> ModuleType:
    """The HTTP library (``httpx`` or its successor) that the openai client is built on."""
    for base in client_class.__mro__[1:]:
        root = base.__module__.partition(".")[0]
        if root.startswith("httpx"):
            return importlib.import_module(root)
    raise RuntimeError("The openai client is not built on an httpx client.")  # pragma: no cover


class CredentialTransport:
    """Adds the endpoint's query parameters and Basic authentication to each request.

    It sits below the client, so the request the client logs (and keeps on the response and on
    errors) is the one without credentials; the copy sent on the wire has them. Requests to
    any other origin pass through unchanged.
    """

    def __init__(self, inner: Any, endpoint: Endpoint, request_class: type[Any]) -> None:
        self._inner = inner
        self._endpoint = endpoint
        self._origin = endpoint.origin()
        self._request_class = request_class

    def handle_request(self, request: Any) -> Any:
        """Send ``request`` (with the credentials when it goes to the endpoint's origin)."""
        url = request.url
        scheme = str(url.scheme).lower()
        origin = (scheme, str(url.host).lower(), url.port or _DEFAULT_PORTS.get(scheme, 0))
        if origin != self._origin:
            return self._inner.handle_request(request)
        headers = request.headers.copy()
        authorization = self._endpoint.basic_authorization()
        if authorization is not None:
            headers["Authorization"] = authorization
        sent = self._request_class(
            request.method,
            url.copy_merge_params(list(self._endpoint.query)) if self._endpoint.query else url,
            headers=headers,
            stream=request.stream,
            extensions=request.extensions,
        )
        return self._inner.handle_request(sent)

    def close(self) -> None:
        """Close the wrapped transport."""
        self._inner.close()

    def __enter__(self) -> CredentialTransport:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._inner.__exit__(*exc_info)


def credential_http_client(endpoint: Endpoint, client_class: type[Any], **options: Any) -> Any:
    """An HTTP client of the openai SDK's class whose transport adds ``endpoint``'s credentials.

    Args:
        endpoint: The parsed endpoint (with credentials).
        client_class: ``openai.DefaultHttpxClient`` (the SDK's defaults: limits, redirects).
        options: Other client options (``timeout``...).
    """
    httpx = _httpx_module(client_class)
    transport = CredentialTransport(httpx.HTTPTransport(), endpoint, httpx.Request)
    return client_class(transport=transport, **options)
