"""Browser policy: allow, ask or deny each action by its type and the domain it touches.

Pure data and functions (no browser-use import), so the policy can be built, serialised to the
worker and tested on its own. Navigation outside the allowed domains is denied before any rule
is consulted, so no rule can turn it into a question for a human.

Domain patterns (``allowed_domains`` and rule ``domain``):

* ``127.0.0.1:8000`` - that host on that port only (http or https);
* ``example.com`` - that host on any port (http or https);
* ``*.example.com`` - the apex and every subdomain;
* ``https://example.com:8443`` - that exact scheme, host and port.

Hosts compare exactly after WHATWG host canonicalisation (case, IDNA, IPv4 forms):
``localhost`` does not match ``127.0.0.1``. URLs are read as the browser reads them
(`sandboxes.browser.urls`); a URL that reads two ways matches nothing and a navigation to it
is refused with its own code.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal
from urllib.parse import urlsplit

from ada_url import URL as WhatwgURL
from pydantic import BaseModel, ConfigDict, Field

from sandboxes.browser.urls import NavigationURLRefused, read_url, web_origin

Verdict = Literal["allow", "ask", "deny"]

NAVIGATION_ACTIONS = frozenset({"navigate", "go_to_url", "search", "search_google"})
"""Actions whose target is a URL the browser will load."""

READ_ONLY_ACTIONS = frozenset(
    {
        "scroll",
        "extract",
        "search_page",
        "find_elements",
        "find_text",
        "scroll_to_text",
        "screenshot",
        "dropdown_options",
        "get_dropdown_options",
        "wait",
        "switch",
        "switch_tab",
        "done",
    }
)
"""Actions that read the page or end the run; allowed by default."""

DENIED_ACTIONS = frozenset({"evaluate", "upload_file"})
"""Actions denied by default: arbitrary page JavaScript and uploading local files."""

INTERNAL_URLS = frozenset({"about:blank"})
"""The one page outside every domain the browser may be sent to."""

START_PAGES = frozenset(
    {
        "about:blank",
        "chrome://new-tab-page/",
        "chrome://newtab/",
        "chrome://new-tab-page-third-party/",
    }
)
"""Pages a fresh tab shows; actions on them are not \"outside the allowed domains\"."""

OUTSIDE_ALLOWED_DOMAINS = "outside_allowed_domains"
"""Code of a denial because a URL's origin is not allowed."""


class DomainPattern(BaseModel):
    """One parsed domain pattern (see the module docstring for the accepted forms)."""

    model_config = ConfigDict(frozen=True)

    scheme: str | None = None
    host: str
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> DomainPattern:
        """Parse ``host``, ``host:port``, ``*.host`` or ``scheme://host[:port]``.

        Raises:
            ValueError: The pattern has no host, a path, or an invalid port.
        """
        raw = text.strip()
        parts = urlsplit(raw if "://" in raw else f"//{raw}")
        if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(
                f"{text!r} is not a domain pattern; use host, host:port, *.host or scheme://host."
            )
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"{text!r} has an invalid port.") from exc
        scheme = parts.scheme.lower() or None
        return cls(scheme=scheme, host=_canonical_host(text, parts.hostname), port=port)

    def matches(self, url: str) -> bool:
        """True when ``url`` (http or https) falls inside this pattern."""
        origin = url_origin_parts(url)
        if origin is None:
            return False
        scheme, host, port = origin
        if self.scheme is not None and scheme != self.scheme:
            return False
        if self.port is not None and port != self.port:
            return False
        if self.host.startswith("*."):
            apex = self.host[2:]
            return host == apex or host.endswith("." + apex)
        if "*" in self.host:
            return fnmatchcase(host, self.host)
        return host == self.host

    def browser_use_pattern(self) -> str:
        """The host-level pattern browser-use's own domain check understands (ports dropped)."""
        return self.host


def _canonical_host(pattern: str, host: str) -> str:
    """The WHATWG serialisation of a pattern's host (``*.`` and globs kept as written)."""
    host = host.lower()
    prefix, rest = ("*.", host[2:]) if host.startswith("*.") else ("", host)
    if "*" in rest:
        return host
    literal = f"[{rest}]" if ":" in rest else rest
    try:
        canonical = WhatwgURL(f"http://{literal}/").hostname
    except ValueError:
        raise ValueError(f"{pattern!r} does not name a valid host.") from None
    return prefix + canonical


def url_origin_parts(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) URL as the browser reads it, else ``None``.

    ``None`` too for a URL that reads two ways (see `sandboxes.browser.urls.read_url`).
    """
    read = web_origin(url)
    if read is None or read.port is None:
        return None
    return read.scheme, read.host, read.port


def url_origin(url: str) -> str | None:
    """The origin of an http(s) URL as the browser reads it, ``scheme://host:port``, or ``None``."""
    read = web_origin(url)
    return read.origin if read is not None else None


class BrowserRule(BaseModel):
    """One policy rule; the first rule matching the action and the domain decides.

    Attributes:
        action: Action name or glob (``click``, ``input``, ``*``).
        domain: Domain pattern of the page (or of the navigation target); ``None`` matches all.
        verdict: ``allow`` runs without asking, ``ask`` needs a human decision, ``deny`` refuses.
    """

    model_config = ConfigDict(frozen=True)

    action: str = "*"
    domain: str | None = None
    verdict: Verdict

    def applies(self, action_name: str, url: str) -> bool:
        """True when this rule covers ``action_name`` on ``url``."""
        if not fnmatchcase(action_name, self.action):
            return False
        return self.domain is None or DomainPattern.parse(self.domain).matches(url)


class PolicyDecision(BaseModel):
    """What the policy says about one resolved action, and why."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    reason: str
    code: str | None = None


class BrowserPolicy(BaseModel):
    """Allowed domains plus allow/ask/deny rules for browser actions.

    Attributes:
        allowed_domains: Where the browser may go; empty means nowhere but ``about:blank``.
        rules: Evaluated in order before the defaults.
        default: Verdict for actions no rule or built-in default covers.
        allow_read_only: Allow read-only actions (scroll, extract, ...) without asking.
    """

    model_config = ConfigDict(frozen=True)

    allowed_domains: tuple[str, ...] = ()
    rules: tuple[BrowserRule, ...] = ()
    default: Verdict = "ask"
    allow_read_only: bool = True
    deny_actions: tuple[str, ...] = Field(default=tuple(sorted(DENIED_ACTIONS)))

    def patterns(self) -> list[DomainPattern]:
        """The parsed allowed domains."""
        return [DomainPattern.parse(text) for text in self.allowed_domains]

    def url_allowed(self, url: str) -> bool:
        """True when the browser may load ``url``."""
        if url in INTERNAL_URLS:
            return True
        return any(pattern.matches(url) for pattern in self.patterns())

    def page_allowed(self, url: str) -> bool:
        """True when a tab may show ``url``: an allowed URL or a fresh tab's start page."""
        return url in START_PAGES or self.url_allowed(url)

    def decide(self, action_name: str, *, page_url: str, target_url: str | None) -> PolicyDecision:
        """Decide one action.

        Args:
            action_name: The browser-use action (``navigate``, ``click``, ``input``, ...).
            page_url: The URL of the tab the action runs in.
            target_url: For navigations, the URL the browser would load; it is read as the
                browser reads it and refused (``url_ambiguous``, ``url_credentials``,
                ``url_unparsable``) when that reading is in doubt.

        Returns:
            The verdict, a reason a reviewer can read and, for denials, a stable code.
        """
        if action_name in NAVIGATION_ACTIONS:
            if target_url is None:
                return PolicyDecision(
                    verdict="deny", reason="no navigation target", code="url_unparsable"
                )
            try:
                target_url = read_url(target_url).href
            except NavigationURLRefused as refused:
                return PolicyDecision(verdict="deny", reason=str(refused), code=refused.code)
            if not self.url_allowed(target_url):
                return PolicyDecision(
                    verdict="deny",
                    reason=f"navigation to {target_url!r} is outside the allowed domains "
                    f"{list(self.allowed_domains)}",
                    code=OUTSIDE_ALLOWED_DOMAINS,
                )
        elif not self.page_allowed(page_url):
            return PolicyDecision(
                verdict="deny",
                reason=f"the page {page_url!r} is outside the allowed domains",
                code=OUTSIDE_ALLOWED_DOMAINS,
            )
        domain_url = target_url if target_url is not None else page_url
        for rule in self.rules:
            if rule.applies(action_name, domain_url):
                return PolicyDecision(
                    verdict=rule.verdict,
                    reason=f"rule {rule.action}@{rule.domain or '*'} -> {rule.verdict}",
                )
        if action_name in self.deny_actions:
            return PolicyDecision(verdict="deny", reason=f"{action_name} is denied by default")
        if self.allow_read_only and action_name in READ_ONLY_ACTIONS:
            return PolicyDecision(verdict="allow", reason=f"{action_name} is read-only")
        return PolicyDecision(
            verdict=self.default, reason=f"{action_name} needs approval by default"
        )

    def browser_use_domains(self) -> list[str]:
        """Host-level patterns for browser-use's own check (a second, coarser fence)."""
        hosts = sorted({pattern.browser_use_pattern() for pattern in self.patterns()})
        return [*hosts, *sorted(url for url in START_PAGES if url.startswith("chrome://"))]
