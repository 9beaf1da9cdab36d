"""What every response and every state-changing request of ``supervisor serve`` must satisfy.

* Host: only the names the server was started for (loopback, or ``--public-url``'s host), so
  a DNS-rebinding page cannot talk to it under another name.
* Origin: a POST must come from this server's own origin (its ``Origin`` header, or its
  ``Referer`` when a browser sent no Origin); a request naming neither is refused.
* Headers: a strict Content-Security-Policy (no script at all on the decision pages, the
  textual-serve script only on ``/tui``), no framing, no sniffing, no caching.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

PAGE_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""Decision pages run no script at all."""
TUI_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
"""The TUI page: textual-serve's script from this server; xterm.js sets inline styles."""

SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    "Cache-Control": "no-store",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address, brackets allowed) is this machine only."""
    bare = host.strip("[]").lower()
    return bare in LOOPBACK_HOSTS or bare.startswith("127.")


@dataclass(frozen=True)
class Origins:
    """The hosts and origins this server answers to.

    Attributes:
        hosts: ``Host`` header values accepted (``name:port``, lower-case).
        origins: ``scheme://name[:port]`` values a POST's Origin may have.
    """

    hosts: frozenset[str]
    origins: frozenset[str]

    @classmethod
    def for_server(cls, host: str, port: int, public_url: str | None) -> Origins:
        """The loopback names on ``port`` (when bound there), ``host`` itself, and the public
        URL's host and origin."""
        names = set(LOOPBACK_HOSTS) if is_loopback(host) else {host.lower()}
        hosts = {f"[{name}]:{port}" if ":" in name else f"{name}:{port}" for name in names}
        origins = {f"http://{value}" for value in hosts}
        if public_url:
            parts = urlsplit(public_url)
            netloc = parts.netloc.lower()
            hosts.add(netloc)
            origins.add(f"{parts.scheme.lower()}://{netloc}")
            default_port = {"https": 443, "http": 80}.get(parts.scheme.lower())
            if parts.port is None and default_port is not None:
                hosts.add(f"{netloc}:{default_port}")
        return cls(frozenset(hosts), frozenset(origins))

    def host_ok(self, host: str | None) -> bool:
        return host is not None and host.lower() in self.hosts

    def origin_ok(self, origin: str | None, referer: str | None) -> bool:
        """Whether a POST comes from this server (Origin, else Referer)."""
        if origin is not None:
            return origin.lower() in self.origins
        if referer:
            parts = urlsplit(referer)
            return f"{parts.scheme}://{parts.netloc}".lower() in self.origins
        return False
