"""Pilot tests: approving an orphan says its agent is gone and offers approve and resume.

The orphan is real: a ``supervisor run`` agent that waited on its proposal and was SIGKILLed;
each test runs on a SQLite file and on a real PostgreSQL server.
Approve and resume spawns ``supervisor resume`` through the real process control, and the side
effect is counted in an outside file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.orphans import orphan_of_a_killed_run, side_effects
from support.run_factories import crm_turn
from tui_helpers import drawn_text, main_screen, propose, record_notifications, wait_for

from screens.app import make_app
from screens.orphan_dialog import OrphanDialog
from screens.widgets.inbox.inbox_pane import ORPHAN_BADGE, InboxPane
from supervisor.ledger.models import ProcessRecord, ProposalStatus
from supervisor.services.identity import ApproverIdentity
from supervisor.services.process_control import ProcessControl
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import ScriptedModel

SIZE = (150, 45)
TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def provider(request: pytest.FixtureRequest) -> Iterator[SQLModelProvider]:
    """The TUI's ledger on each engine: a SQLite file, and a database on a real PostgreSQL."""
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")
    with SQLModelProvider(url) as opened:
        yield opened


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel(crm_turn) as running:
        yield running


@pytest.fixture
def env(model: ScriptedModel, tmp_path: Path, provider: SQLModelProvider) -> dict[str, str]:
    return {
        **model.env(),
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)]),
        "SIDE_EFFECT_FILE": str(tmp_path / "side_effects.log"),
        "SUPERVISOR_DB": provider.url,
        "SUPERVISOR_LEASE_SECONDS": "2",
    }


def orphan(provider: SQLModelProvider, env: dict[str, str]) -> str:
    return orphan_of_a_killed_run({**os.environ, **env}, provider.ledger)


@pytest.mark.parametrize("key", ["a", "R"])
async def test_approving_an_orphan_offers_to_resume_it_and_the_call_runs_once(
    provider: SQLModelProvider,
    env: dict[str, str],
    tmp_path: Path,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
    key: str,
) -> None:
    proposal_id = orphan(provider, env)
    control = ProcessControl(provider.ledger, provider.url, logs=tmp_path / "logs", env=env)
    app = make_app(settings, ledger=provider.ledger, identity=identity, process_control=control)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: ORPHAN_BADGE in drawn_text(inbox.table), limit=30)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press(key)
        if key == "a":  # plain approve on an orphan asks, naming the gone process
            await wait_for(pilot, lambda: isinstance(app.screen, OrphanDialog))
            dialog = app.screen
            assert isinstance(dialog, OrphanDialog)
            assert "agent that is gone" in dialog.question and "Approving alone" in dialog.question
            assert "R Approve and resume" in drawn_text(dialog.query_one(".dialog-keys"))
            await pilot.press("R")
        await wait_for(pilot, lambda: any(" resumes in resume-" in n for n in notes), limit=30)
        ledger = provider.ledger
        await wait_for(
            pilot, lambda: ledger.get(proposal_id).status is ProposalStatus.EXECUTED, limit=90
        )
        resumes = [p for p in ledger.list_processes() if p.process_id.startswith("resume-")]
        assert len(resumes) == 1 and resumes[0].command.startswith("supervisor resume ")
        await wait_for(
            pilot,
            lambda: (
                next(
                    p for p in ledger.list_processes() if p.process_id.startswith("resume-")
                ).status
                == "exited"
            ),
            limit=60,
        )
    assert side_effects(tmp_path) == ["create_customer Ada Lovelace ada@example.com"]


async def test_approve_only_on_an_orphan_runs_nothing(
    provider: SQLModelProvider,
    env: dict[str, str],
    tmp_path: Path,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
) -> None:
    proposal_id = orphan(provider, env)
    control = ProcessControl(provider.ledger, provider.url, logs=tmp_path / "logs", env=env)
    app = make_app(settings, ledger=provider.ledger, identity=identity, process_control=control)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: ORPHAN_BADGE in drawn_text(inbox.table), limit=30)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, OrphanDialog))
        await pilot.press("a")
        await wait_for(
            pilot, lambda: provider.ledger.get(proposal_id).status is ProposalStatus.APPROVED
        )
        await app.workers.wait_for_complete()
    assert not any(p.process_id.startswith("resume-") for p in provider.ledger.list_processes())
    assert side_effects(tmp_path) == []


async def test_approve_and_resume_of_an_agent_that_cannot_come_back_decides_nothing(
    provider: SQLModelProvider,
    env: dict[str, str],
    tmp_path: Path,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
) -> None:
    """The agent was never saved (nothing can re-create it): R says why, approves nothing."""
    ledger = provider.ledger
    proposal = propose(ledger)  # owner crm-agent, never saved
    gone = datetime.now(UTC)
    ledger.upsert_process(
        ProcessRecord(process_id="run-gone", kind="agent_run", pid=4242, host="h",
                      command="supervisor run x", status="exited", exit_code=137,
                      started_at=gone, heartbeat_at=gone)
    )  # fmt: skip
    ledger.record_waiters("run-gone", [proposal.proposal_id])
    control = ProcessControl(ledger, provider.url, logs=tmp_path / "logs", env=env)
    app = make_app(settings, ledger=ledger, identity=identity, process_control=control)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: ORPHAN_BADGE in drawn_text(inbox.table), limit=30)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("R")
        await wait_for(pilot, lambda: any("Nothing was approved" in n for n in notes))
        note = next(n for n in notes if "Nothing was approved" in n)
        assert "not saved in this ledger" in note and "supervisor run MODULE:FACTORY" in note
        await app.workers.wait_for_complete()
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    assert not any(p.process_id.startswith("resume-") for p in ledger.list_processes())
