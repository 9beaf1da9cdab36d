"""The approval gate every browser action passes, inside the worker, at ``Tools.act``.

``GatedTools`` is browser-use's ``Tools`` with ``act`` wrapped: the agent's ``multi_act`` (and
initial actions) reach the browser only through it. For each action the gate

1. resolves it to its target (`resolve_action`) and asks the worker's policy (allowed domains,
   its own rules), then the ledger's stored policy: a ledger rule or grant about the action
   makes it a recorded decision (step 4, where the ledger allows or denies it at once);
2. ``deny``: returns an error to the agent, nothing is proposed and nothing runs;
3. ``allow``: runs it and records a trace event;
4. ``ask``: proposes it to the ledger bound to URL, tab and element, waits for the decision,
   resolves it again and refuses unless the hash equals the approved one, claims the proposal
   with that hash, runs it and records ``complete`` or ``fail``. A rejection goes back to the
   agent as ``rejected by a human reviewer: <reason>``. An edit is followed to the proposal
   that superseded it (:func:`~supervisor.ledger.chain.live_end`); an approved edit runs its
   own arguments, resolved and judged again on the page as it is now, or is refused with a
   typed code (:mod:`sandboxes.browser.edits`), and the agent is told what the human changed.

A navigation runs with the URL the gate read (`ResolvedAction.run_params`), never the model's
text. Before and after every action the gate reads back from Chromium what every tab has
loaded (`sandboxes.browser.loaded`); a load off the allowlist, agent- or page-initiated,
stops the worker with a ``denied`` outcome (`ApprovalGate.denial`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from browser_use import Tools
from browser_use.agent.views import ActionResult

from sandboxes.browser.config import BrowserDenial
from sandboxes.browser.edits import (
    EDIT_MISMATCH,
    EDIT_NOT_ALLOWED,
    EDIT_UNREADABLE,
    EditRefusal,
    edited_action_params,
    with_edit_note,
)
from sandboxes.browser.loaded import CHROMIUM_ERROR_PAGE, LoadsUnknown, loaded_urls
from sandboxes.browser.policy import BrowserPolicy, PolicyDecision
from sandboxes.browser.targets import ResolvedAction, resolve_action
from supervisor.errors import SupervisorError
from supervisor.ledger.chain import live_end
from supervisor.ledger.decide import RuleOutcome
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import ExecutorIdentity, Proposal, ProposalStatus, TraceEvent
from supervisor.ledger.retention import ExtendLimits
from supervisor.ledger.service import ApprovalLedger
from supervisor.rules.model import CallFacts

_log = logging.getLogger(__name__)

_WAIT_SLICE_S = 1.0
_NOTHING_LOADED = frozenset({"", CHROMIUM_ERROR_PAGE})
LEFT_ALLOWLIST = "navigation_left_allowlist"
"""Code of the denial that stops a worker whose browser loaded a page off the allowlist."""


def longest_approval_wait(approval_timeout: float) -> float:
    """Seconds the gate waits at most on one proposal proposed with ``approval_timeout``:
    the longest lifetime ``extend`` gives it under the default :class:`ExtendLimits`."""
    return ExtendLimits().max_lifetime(approval_timeout)


class ApprovalGate:
    """Policy, proposal, decision, re-check, claim and outcome for one browser worker.

    Args:
        ledger: The approval ledger shared with the supervisor.
        policy: Allowed domains and allow/ask/deny rules.
        worker_id: This worker's id (process id in the ledger, ``browser`` in targets).
        owner: Agent id the proposals are filed under.
        thread_id: Thread the proposals are filed under.
        approval_timeout: The proposals' TTL: how long the worker waits for a decision unless
            an operator extends the proposal (then it waits until the extended expiry, up to
            :attr:`longest_wait`).

    Attributes:
        longest_wait: The longest the gate waits on one proposal, extensions included:
            the lifetime the ledger's default ``ExtendLimits`` allow for ``approval_timeout``
            (24 times it, at most 7 days). The worker's step timeout is set past it.
        denial: Set when the gate stopped the worker (a load off the allowlist).
        on_denied: Called once when ``denial`` is set; the worker stops its agent with it.
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        policy: BrowserPolicy,
        *,
        worker_id: str,
        owner: str = "browser-agent",
        thread_id: str | None = None,
        approval_timeout: float = 600.0,
    ) -> None:
        self.ledger = ledger
        self.policy = policy
        self.worker_id = worker_id
        self.owner = owner
        self.thread_id = thread_id
        self.approval_timeout = approval_timeout
        self.longest_wait = longest_approval_wait(approval_timeout)
        self.mask_key = secrets.token_bytes(32)
        self.executor = ExecutorIdentity.current(worker_id)
        self.pending: set[str] = set()
        self.denial: BrowserDenial | None = None
        self.on_denied: Callable[[], object] | None = None

    async def run(
        self,
        action_name: str,
        params: dict[str, Any],
        *,
        param_model: Any,
        browser_session: Any,
        perform: Any,
    ) -> Any:
        """Gate one action; ``perform()`` is awaited only when it may run.

        ``perform(run_params)`` runs the action with ``run_params`` in place of the model's
        parameters (a navigation's URL replaced by the one the gate read).

        Returns:
            The action's ``ActionResult``, or an error result when it was denied, rejected,
            expired or refused because the page changed.
        """
        if self.denial is not None:  # the run is stopping; nothing more reaches the browser
            return ActionResult(error=f"denied: {self.denial.reason}")
        stopped = await self._check_loaded(f"browser.{action_name}", browser_session)
        if stopped is not None:
            return stopped
        resolved = await self._resolve(action_name, params, param_model, browser_session)
        decision = self.policy.decide(
            action_name, page_url=resolved.page_url, target_url=resolved.target_url
        )
        if decision.verdict == "deny":
            await self._trace(resolved, "denied", decision.code or decision.reason, decision.reason)
            code = f" ({decision.code})" if decision.code else ""
            return ActionResult(error=f"denied by policy{code}: {decision.reason}")
        ruled = await asyncio.to_thread(self._ledger_outcome, resolved, decision.verdict)
        if ruled.decision.rule is not None or ruled.grant is not None:
            # A rule (or grant) of the ledger's stored policy speaks: the ledger decides the
            # call when it is recorded, so nothing runs without a record of why.
            decision = PolicyDecision(verdict="ask", reason=ruled.decision.reason)
        if decision.verdict == "allow":
            result = await perform(resolved.run_params(params))
            await self._trace(resolved, "allowed", decision.reason, _error_of(result))
            return await self._check_loaded(resolved.tool_name, browser_session) or result
        result = await self._ask(
            resolved, params, decision.reason, param_model, browser_session, perform
        )
        return await self._check_loaded(resolved.tool_name, browser_session) or result

    def _ledger_outcome(self, resolved: ResolvedAction, verdict: str) -> RuleOutcome:
        """What the ledger's stored policy says about the action (read-only; nothing stored)."""
        facts = CallFacts(
            tool=resolved.tool_name, arguments=resolved.arguments, domains=("browser",),
            agent=self.owner, target=resolved.execution_target, read_only=verdict == "allow",
        )  # fmt: skip
        return self.ledger.decide_call(facts, schema_hash=resolved.schema_hash, grantable=True)

    async def _check_loaded(self, tool_name: str, browser_session: Any) -> Any | None:
        """Stop the worker when any tab has loaded a page off the allowlist.

        Returns:
            ``None`` when every load is allowed; else an error result, after the denial is
            recorded and ``on_denied`` called.
        """
        try:
            urls = await loaded_urls(browser_session)
        except LoadsUnknown as exc:
            return await self._deny_run(tool_name, exc.code, "", f"{exc}; the worker stops")
        for url in urls:
            if url not in _NOTHING_LOADED and not self.policy.page_allowed(url):
                reason = (
                    f"the browser loaded {url!r}, outside the allowed domains; the worker stops"
                )
                return await self._deny_run(tool_name, LEFT_ALLOWLIST, url, reason)
        return None

    async def _deny_run(self, tool_name: str, code: str, url: str, reason: str) -> Any:
        if self.denial is None:
            self.denial = BrowserDenial(code=code, url=url, reason=reason)
            await self._record(
                "browser.navigation", tool_name, "denied", code, {"url": url, "reason": reason},
                what="the browser worker's denial",
            )  # fmt: skip
            if self.on_denied is not None:
                self.on_denied()
        return ActionResult(error=f"denied: {self.denial.reason}")

    async def _resolve(
        self, action_name: str, params: dict[str, Any], param_model: Any, browser_session: Any
    ) -> ResolvedAction:
        return await resolve_action(
            action_name,
            params,
            param_model=param_model,
            browser_session=browser_session,
            worker_id=self.worker_id,
            mask_key=self.mask_key,
        )

    async def _ask(
        self,
        resolved: ResolvedAction,
        params: dict[str, Any],
        reason: str,
        param_model: Any,
        browser_session: Any,
        perform: Any,
    ) -> Any:
        proposal = await self._propose(resolved, reason)
        decided = await self._wait(proposal)  # if the worker stops here, it stays in `pending`
        self.pending.discard(proposal.proposal_id)
        if decided.status is not ProposalStatus.APPROVED:
            await self._trace(resolved, decided.status.value, decided.decision_reason or "")
            if decided.status is ProposalStatus.REJECTED and decided.decided_by_rule:
                why = decided.decision_reason or "no reason given"
                return ActionResult(error=f"denied by policy ({decided.decided_by}): {why}")
            if decided.status is ProposalStatus.REJECTED:
                why = decided.decision_reason or "no reason given"
                return ActionResult(error=f"rejected by a human reviewer: {why}")
            return ActionResult(error=f"not approved ({decided.status.value}); it did not run")

        if decided.supersedes_id is not None:  # a human edited it: run the edit, or nothing
            edit = await self._edited(resolved, params, decided, param_model, browser_session)
            if isinstance(edit, EditRefusal):
                return await self._refuse(
                    decided, edit.resolved or resolved, edit.reason, edit.code
                )
            current, params = edit
        else:
            if resolved.execution_target.get("element") is not None:
                # Rebuild the DOM (and the selector map the action will use) before comparing.
                await browser_session.get_browser_state_summary(include_screenshot=False)
            current = await self._resolve(
                resolved.action_name, params, param_model, browser_session
            )
        if current.args_hash != decided.args_hash:
            refusal = "the page or element changed since approval; the action did not run"
            return await self._refuse(decided, current, refusal)
        try:
            await asyncio.to_thread(
                self.ledger.claim, decided.proposal_id, current.args_hash, self.executor
            )
        except LedgerError as exc:
            await self._trace(current, "refused", str(exc))
            return ActionResult(error=f"refused: the approval could not be claimed ({exc})")
        try:
            result = await perform(current.run_params(params))
        except BaseException as exc:
            await asyncio.to_thread(
                self.ledger.fail, decided.proposal_id, "error", f"{type(exc).__name__}: {exc}"
            )
            raise
        error = _error_of(result)
        if decided.supersedes_id is not None:  # tell the agent what the human changed
            result = await asyncio.to_thread(with_edit_note, self.ledger, decided, result)
        if error is None:
            await asyncio.to_thread(self.ledger.complete, decided.proposal_id, "success")
        else:
            await asyncio.to_thread(self.ledger.fail, decided.proposal_id, "error", error[:500])
        await self._trace(current, "executed" if error is None else "failed", reason, error)
        return result

    async def _refuse(
        self, decided: Proposal, resolved: ResolvedAction, refusal: str, code: str | None = None
    ) -> Any:
        """Withdraw an approval the gate will not run, trace why, tell the agent."""
        with contextlib.suppress(LedgerError):
            await asyncio.to_thread(
                self.ledger.revoke, decided.proposal_id, self.worker_id, refusal
            )
        await self._trace(resolved, "refused", code or refusal, None if code is None else refusal)
        typed = f" ({code})" if code else ""
        return ActionResult(error=f"refused{typed}: {refusal}")

    async def _edited(
        self,
        resolved: ResolvedAction,
        params: dict[str, Any],
        decided: Proposal,
        param_model: Any,
        browser_session: Any,
    ) -> tuple[ResolvedAction, dict[str, Any]] | EditRefusal:
        """The approved edit as an action on the page as it is now, or why it cannot run.

        Returns:
            The re-resolved action and the parameters it runs with (the edited arguments), or
            an :class:`EditRefusal`: the edited parameters are not the action's, the edited
            target is off the allowlist or denied, or the edit does not resolve to exactly
            what was approved (a derived field such as ``target_url`` left stale, or the page
            or element changed).
        """
        edited_params = edited_action_params(decided.arguments, params)
        if edited_params is None:
            return EditRefusal(EDIT_UNREADABLE, "the edited arguments cannot be turned back "
                               "into the action (a masked value was changed)")  # fmt: skip
        if resolved.execution_target.get("element") is not None or "index" in edited_params:
            await browser_session.get_browser_state_summary(include_screenshot=False)
        try:
            current = await self._resolve(
                resolved.action_name, edited_params, param_model, browser_session
            )
        except ValueError as exc:  # pydantic's ValidationError: not the action's parameters
            return EditRefusal(EDIT_UNREADABLE, f"the edited arguments are not valid: {exc}"[:300])
        verdict = self.policy.decide(
            current.action_name, page_url=current.page_url, target_url=current.target_url
        )
        if verdict.verdict == "deny":
            return EditRefusal(
                EDIT_NOT_ALLOWED, f"the edited action is denied by policy: {verdict.reason}",
                current,
            )  # fmt: skip
        if current.args_hash != decided.args_hash:
            return EditRefusal(
                EDIT_MISMATCH, "the edited action does not resolve to what was approved on "
                "this page (a derived field such as target_url left as it was, or the page or "
                "element changed); the action did not run", current,
            )  # fmt: skip
        return current, edited_params

    async def _propose(self, resolved: ResolvedAction, reason: str) -> Proposal:
        """File the proposal and remember it as pending.

        The bookkeeping happens in the filing thread itself, so a worker stopped while the
        insert is in flight still knows the proposal and `withdraw_pending` cancels it
        (``asyncio.run`` waits for executor threads before returning).
        """

        def file() -> Proposal:
            proposal = self.ledger.propose(
                resolved.tool_name,
                resolved.schema_hash,
                resolved.arguments,
                execution_target=resolved.execution_target,
                policy_reason=f"browser: {reason}",
                owner=self.owner,
                thread_id=self.thread_id,
                domains=("browser",),
                ttl_seconds=self.approval_timeout,
            )
            self.pending.add(proposal.proposal_id)
            self.ledger.record_waiters(self.worker_id, [proposal.proposal_id])
            return proposal

        return await asyncio.to_thread(file)

    async def _wait(self, proposal: Proposal) -> Proposal:
        """Wait for a decision through the ledger's change feed; cancel it when time is up.

        Time is up at the proposal's expiry as the ledger has it *now*, re-read with every
        decision poll, so an operator's ``extend`` keeps the worker waiting; and in any case
        at :attr:`longest_wait` after the proposal was filed.
        """
        cursor = await asyncio.to_thread(self.ledger.head)
        latest = proposal.created_at + timedelta(seconds=self.longest_wait)
        while True:
            current = await asyncio.to_thread(live_end, self.ledger, proposal.proposal_id)
            if current.proposal_id != proposal.proposal_id:  # edited: wait on the edit now
                self.pending.discard(proposal.proposal_id)
                self.pending.add(current.proposal_id)
                proposal = current
            if current.status is not ProposalStatus.PENDING:
                return current  # approved, rejected, cancelled or expired
            ends = min(current.expires_at, latest)
            remaining = (ends - self.ledger.clock.now()).total_seconds()
            if remaining <= 0:
                break
            records = await asyncio.to_thread(
                self.ledger.wait_for_change, cursor, min(_WAIT_SLICE_S, remaining)
            )
            if records:
                cursor = records[-1].seq
        await self._withdraw(proposal.proposal_id, "no decision in time")
        return await asyncio.to_thread(self.ledger.get, proposal.proposal_id)

    def withdraw_pending(self, reason: str = "the worker stopped") -> None:
        """Cancel (or revoke, if approved meanwhile) every proposal the worker was waiting on.

        Called synchronously when the worker ends, so a stopped worker leaves no decision
        behind that nothing will ever act on.
        """
        for proposal_id in list(self.pending):
            with contextlib.suppress(LedgerError):
                status = self.ledger.get(proposal_id).status
                if status is ProposalStatus.PENDING:
                    self.ledger.cancel(proposal_id, self.worker_id, reason)
                elif status is ProposalStatus.APPROVED:
                    self.ledger.revoke(proposal_id, self.worker_id, reason)
            self.pending.discard(proposal_id)

    async def _withdraw(self, proposal_id: str, reason: str) -> None:
        try:
            await asyncio.to_thread(self.ledger.cancel, proposal_id, self.worker_id, reason)
        except SupervisorError:
            _log.debug("proposal %s was decided before it could be withdrawn", proposal_id)

    async def _trace(
        self, resolved: ResolvedAction, outcome: str, reason: str, error: str | None = None
    ) -> None:
        payload: dict[str, Any] = {
            "arguments": resolved.arguments,
            "target": resolved.execution_target,
            "error": error,
        }
        await self._record(
            "browser.action", resolved.tool_name, outcome, reason[:200], payload,
            what="browser trace event",
        )  # fmt: skip

    async def _record(
        self,
        kind: str,
        tool: str,
        outcome: str,
        reason_code: str,
        payload: dict[str, Any],
        *,
        what: str,
    ) -> None:
        """Append one trace event of this worker; a ledger error is logged, never raised."""
        event = TraceEvent(
            at=datetime.now(UTC),
            agent_id=self.owner,
            thread_id=self.thread_id,
            run_id=self.worker_id,
            kind=kind,
            tool=tool,
            outcome_status=outcome,
            reason_code=reason_code,
            payload=payload,
        )
        try:
            await asyncio.to_thread(self.ledger.append_trace, [event])
        except SupervisorError:
            _log.warning("could not record %s", what, exc_info=True)


def _error_of(result: Any) -> str | None:
    error = getattr(result, "error", None)
    return str(error) if error else None


class GatedTools(Tools[Any]):
    """browser-use ``Tools`` whose ``act`` passes every action through an `ApprovalGate`."""

    def __init__(self, gate: ApprovalGate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    async def act(self, action: Any, browser_session: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``action`` if the gate lets it (see the module docstring)."""
        for action_name, params in action.model_dump(exclude_unset=True).items():
            if params is None:
                continue
            registered = self.registry.registry.actions.get(action_name)
            param_model = registered.param_model if registered is not None else None

            async def perform(
                run_params: dict[str, Any], name: str = action_name, sent: Any = params
            ) -> Any:
                run_action = action
                if run_params != dict(sent):
                    run_action = type(action).model_validate({name: run_params})
                return await super(GatedTools, self).act(
                    run_action, browser_session, *args, **kwargs
                )

            return await self.gate.run(
                action_name,
                dict(params),
                param_model=param_model,
                browser_session=browser_session,
                perform=perform,
            )
        return ActionResult()
