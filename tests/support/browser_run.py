"""Running a gated browser worker in a test: Chromium lookup, a reviewer, one scripted run.

A scripted OpenAI-compatible model drives browser-use's agent; a `Reviewer` thread decides
each proposal through the ledger, as a human in the TUI would.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence

from sandboxes.browser import BrowserPolicy, BrowserRunResult, BrowserTask
from sandboxes.browser.config import ChromiumNotFound, find_chromium
from supervisor.ledger.models import Proposal
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import ScriptedModel
from support.browser_site import BrowserPlan, BrowserSite
from support.required import unavailable

#: ("approve" | "reject" | "wait-approve" | "extend-approve", reason), or ("edit", JSON object of
#: the arguments to change): the edit supersedes the proposal and is decided on the next pass.
Verdict = tuple[str, str]
EXTEND_BY_S = 60.0
"""How far an "extend-approve" reviewer extends a proposal before deciding it."""
RUN_TIMEOUT_S = 90.0


def chromium_or_skip() -> str:
    """Chromium's path; skip without it locally, fail without it under CI=true."""
    try:
        return find_chromium()
    except ChromiumNotFound as exc:
        unavailable(str(exc))


class Reviewer:
    """Decides every pending proposal through the ledger from a background thread."""

    def __init__(self, ledger: ApprovalLedger, decide: Callable[[Proposal], Verdict]) -> None:
        self.ledger = ledger
        self.decide = decide
        self.seen: list[Proposal] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Reviewer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        cursor = 0
        while not self._stop.is_set():
            records = self.ledger.wait_for_change(cursor, timeout=0.5)
            if records:
                cursor = records[-1].seq
            for proposal in self.ledger.list(status="pending").items:
                self.seen.append(proposal)
                verdict, reason = self.decide(proposal)
                if verdict == "wait-approve":
                    self._stop.wait(4.5)
                if verdict == "extend-approve":  # extend, then decide after the first expiry
                    self.ledger.extend(proposal.proposal_id, EXTEND_BY_S, "reviewer@example.com")
                    left = (proposal.expires_at - self.ledger.clock.now()).total_seconds()
                    self._stop.wait(left + 1.5)
                if verdict == "edit":  # the reason is a JSON object of changed arguments
                    changes = json.loads(reason)
                    arguments = {**proposal.arguments, **changes}
                    self.ledger.edit(proposal.proposal_id, arguments, "reviewer@example.com")
                    continue  # the edit is pending: decided on the next pass
                if verdict == "reject":
                    self.ledger.reject(proposal.proposal_id, "reviewer@example.com", reason)
                else:
                    self.ledger.approve(proposal.proposal_id, "reviewer@example.com", reason)

    def by_tool(self, tool_name: str) -> list[Proposal]:
        """Final state of every proposal of one tool the reviewer decided."""
        return [self.ledger.get(p.proposal_id) for p in self.seen if p.tool_name == tool_name]


def approve_all(proposal: Proposal) -> Verdict:
    """A reviewer who approves everything."""
    return ("approve", "looks right")


def run_task(
    site: BrowserSite,
    provider: SQLModelProvider,
    chromium: str,
    plan: BrowserPlan,
    decide: Callable[[Proposal], Verdict],
    *,
    path: str = "/",
    allowed_domains: Sequence[str] | None = None,
    policy: BrowserPolicy | None = None,
    max_steps: int = 8,
    sensitive_data: Mapping[str, str] | None = None,
    approval_timeout: float = 30.0,
) -> tuple[BrowserRunResult, Reviewer, ScriptedModel]:
    """Run one worker to its end against ``site`` (allowed: its host and port by default)."""
    with ScriptedModel(plan) as model, Reviewer(provider.ledger, decide) as reviewer:
        task = BrowserTask(
            f"Sign up as alice on {site.url(path)}",
            allowed_domains=(
                [f"127.0.0.1:{site.port}"] if allowed_domains is None else list(allowed_domains)
            ),
            policy=policy,
            model=model.model_name,
            base_url=model.base_url,
            api_key="sk-test",
            ledger_url=provider.url,
            chromium_path=chromium,
            max_steps=max_steps,
            approval_timeout=approval_timeout,
            owner="browser-test",
            sensitive_data=sensitive_data,
        )
        result = task.run(timeout=RUN_TIMEOUT_S)
    return result, reviewer, model
