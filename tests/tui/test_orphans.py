"""Pilot tests: a proposal whose waiting process is gone is marked orphaned in the inbox and
the detail pane, and the processes pane says the process is lost since when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from textual.widgets import Static
from tui_helpers import drawn_text, main_screen, propose, wait_for

from screens.app import make_app
from screens.widgets.inbox.inbox_pane import ORPHAN_BADGE, InboxPane
from screens.widgets.processes.processes_pane import ProcessesPane
from supervisor.ledger.models import ProcessRecord
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (150, 45)


def register(ledger: ApprovalLedger, process_id: str, heartbeat_at: datetime) -> None:
    ledger.upsert_process(
        ProcessRecord(process_id=process_id, kind="agent_run", pid=4242, host="h",
                      command=f"supervisor run {process_id}", status="waiting_for_approval",
                      started_at=heartbeat_at, heartbeat_at=heartbeat_at)
    )  # fmt: skip


async def test_an_exited_waiter_marks_its_proposal_orphaned_while_the_tui_runs(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    proposal = propose(ledger)
    register(ledger, "run-live", datetime.now(UTC))
    ledger.record_waiters("run-live", [proposal.proposal_id])
    app = make_app(settings, ledger=ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        fields = screen.query_one("#detail-fields", Static)
        await wait_for(pilot, lambda: "process run-live" in drawn_text(fields))
        assert "alive" in drawn_text(fields) and "ORPHANED" not in drawn_text(fields)
        assert ORPHAN_BADGE not in drawn_text(inbox.table)
        ledger.heartbeat("run-live", status="exited", exit_code=1)  # a clean exit
        await wait_for(pilot, lambda: ORPHAN_BADGE + "create_cust" in drawn_text(inbox.table))
        await wait_for(pilot, lambda: "ORPHANED" in drawn_text(fields))
        assert "gone (exited)" in drawn_text(fields)


async def test_a_lost_process_shows_since_when_and_its_proposal_orphaned(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    proposal = propose(ledger)
    long_ago = datetime.now(UTC) - timedelta(seconds=ledger.lease_seconds + 30)
    register(ledger, "run-dead", long_ago)  # its lease ran out 30 s ago (SIGKILL)
    ledger.record_waiters("run-dead", [proposal.proposal_id])
    app = make_app(settings, ledger=ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        processes = screen.query_one(ProcessesPane)
        await wait_for(
            pilot, lambda: any(r.state.startswith("lost since ") for r in processes.process_rows)
        )
        await wait_for(pilot, lambda: "lost since" in drawn_text(processes))
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: ORPHAN_BADGE in drawn_text(inbox.table))
        fields = screen.query_one("#detail-fields", Static)
        await wait_for(pilot, lambda: "ORPHANED" in drawn_text(fields))
        assert "gone (lost)" in " ".join(drawn_text(fields).split())
