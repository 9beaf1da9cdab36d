"""What a rule is: a match, a verdict, a reason, and the examples that pin it down."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from supervisor.canonical import canonical_json

if TYPE_CHECKING:
    from sandboxes.browser.policy import DomainPattern

Verdict = Literal["allow", "ask", "deny"]
VERDICTS: tuple[Verdict, ...] = ("allow", "ask", "deny")
#: Precedence: the strongest matching verdict wins (deny beats ask beats allow).
STRENGTH: dict[Verdict, int] = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class CallFacts:
    """One call as rules see it (all of it validated before any rule runs).

    Attributes:
        tool: The tool's name (``browser.click``, ``mcp:server.tool`` ...).
        arguments: The validated, canonical arguments.
        domains: The tool's policy domains.
        agent: The proposing agent's id (the proposal's owner).
        user: On whose behalf the agent acts, if known.
        target: The execution target (MCP server, browser origin, sandbox backend ...).
        read_only: The tool is deterministic, without side effects and not marked as needing
            approval: with no rule matching it is allowed; otherwise it is asked.
    """

    tool: str
    arguments: dict[str, Any]
    domains: tuple[str, ...] = ()
    agent: str = ""
    user: str | None = None
    target: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False

    def activation(self) -> dict[str, Any]:
        """The variables a CEL condition sees."""
        return {
            "args": self.arguments, "tool": self.tool, "domains": list(self.domains),
            "agent": self.agent, "user": self.user or "", "target": self.target,
        }  # fmt: skip


@functools.lru_cache(maxsize=8192)
def _matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """One test for a set of globs: exact names by set membership, the rest by one regex."""
    exact = frozenset(pattern for pattern in patterns if not set("*?[") & set(pattern))
    globs = [pattern for pattern in patterns if pattern not in exact]
    if not globs:
        return exact.__contains__
    regex = re.compile("|".join(f"(?:{fnmatch.translate(pattern)})" for pattern in globs))
    return lambda value: value in exact or regex.match(value) is not None


def value_key(value: Any) -> str | tuple[str, str]:
    """What an argument value is compared by in a rule's ``args`` sets: a string itself, any
    other value its canonical JSON (so ``5`` and ``5.0`` are one value, ``1`` and ``true``
    two, and a string is never equal to a number that prints like it)."""
    return value if type(value) is str else ("json", canonical_json(value))


def value_set(values: list[Any]) -> frozenset[str | tuple[str, str]]:
    """The keys of a rule's ``args`` list (see :func:`value_key`)."""
    return frozenset(value_key(value) for value in values)


_ABSENT = object()


@dataclass(frozen=True)
class Match:
    """Which calls a rule is about; every field given must hold (an empty field matches all).

    ``tools``, ``agents`` and ``users`` are globs (``fnmatch``, case-sensitive); ``domains``
    matches when the tool has any of them; ``target`` when every key given equals the call's;
    ``sites`` (browser domain patterns: ``host``, ``*.host``, ``host:port``,
    ``scheme://host``) when the URL the action is about (:func:`site_url`) is inside one;
    ``args`` when each argument named is present and equal to one of its listed values (a set
    lookup, so a rule naming fifty approved commands costs what naming one does).
    """

    tools: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    target: dict[str, Any] = field(default_factory=dict)
    sites: tuple[str, ...] = ()
    args: tuple[tuple[str, frozenset[str | tuple[str, str]]], ...] = ()

    def holds(self, call: CallFacts) -> bool:
        # Each field is tested only when given: this runs for every candidate rule of a call.
        if self.tools and not _matcher(self.tools)(call.tool):
            return False
        if self.agents and not _matcher(self.agents)(call.agent):
            return False
        if self.users and (call.user is None or not _matcher(self.users)(call.user)):
            return False
        if self.domains and not any(domain in call.domains for domain in self.domains):
            return False
        if self.args:
            arguments = call.arguments
            for key, allowed in self.args:
                value = arguments.get(key, _ABSENT)
                if value is _ABSENT or value_key(value) not in allowed:
                    return False
        if self.target:
            target = call.target
            for key, value in self.target.items():
                if target.get(key) != value:
                    return False
        return not self.sites or _on_site(self.sites, call)


def site_url(call: CallFacts) -> str | None:
    """The URL a browser action is about: a navigation's target, else the tab's page."""
    for url in (call.arguments.get("target_url"), call.target.get("url")):
        if isinstance(url, str) and url:
            return url
    return None


def _on_site(sites: tuple[str, ...], call: CallFacts) -> bool:
    """The call's site URL is inside one of ``sites`` (the worker's own domain patterns,
    read by the parser the browser uses, so a rule and the browser see one origin)."""
    url = site_url(call)
    return url is not None and any(_site_pattern(site).matches(url) for site in sites)


@functools.lru_cache(maxsize=1024)
def _site_pattern(site: str) -> DomainPattern:
    from sandboxes.browser.policy import DomainPattern

    return DomainPattern.parse(site)


@dataclass(frozen=True)
class Example:
    """A call and the verdict the whole rule set must give it (``supervisor policy test``)."""

    call: CallFacts
    expect: Verdict
    where: str


@dataclass(frozen=True)
class Rule:
    """``verdict`` for the calls ``match`` selects and ``when`` (a CEL condition) accepts.

    ``reason`` is shown to the operator, and to the model for a ``deny``. An ``ask`` rule with
    ``approvals`` N > 1 (a quorum) needs N distinct approvers before the call may run.
    """

    name: str
    verdict: Verdict
    reason: str
    match: Match = Match()
    when: str | None = None
    examples: tuple[Example, ...] = ()
    approvals: int = 1

    @property
    def strength(self) -> tuple[int, int]:
        """Precedence: deny > ask > allow, and among asks the one needing more approvers."""
        return STRENGTH[self.verdict], self.approvals
