"""Blocked-on-you notices: once per proposal, one reminder before expiry (never for a proposal
that lives shorter than the window), channels chosen by name, hostile text escaped on every
channel, ``notify-send`` run without a shell (a real stub program on disk)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.services.notify import (
    BlockedNotices,
    InvalidNotifyChannels,
    Notice,
    Notifier,
    coalesced,
    osc_sequences,
    parse_channels,
)

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _proposal(pid: str, *, lifetime: float = 3600, tool: str = "write_file",
              status: ProposalStatus = ProposalStatus.PENDING) -> Proposal:  # fmt: skip
    return Proposal(
        proposal_id=pid, tool_name=tool, tool_schema_hash="0" * 64, arguments={},
        args_hash="1" * 64, status=status, created_at=NOW, updated_at=NOW,
        expires_at=NOW + timedelta(seconds=lifetime), owner="ops-agent",
    )  # fmt: skip


def test_channels_by_name() -> None:
    assert parse_channels(None) == {"bell", "osc", "desktop"}
    assert parse_channels(" osc , Bell ") == {"osc", "bell"}
    assert parse_channels("none") == frozenset()
    with pytest.raises(InvalidNotifyChannels, match="'email'") as caught:
        parse_channels("osc,email")
    assert caught.value.code == "invalid_notify_channels"


def test_each_blocked_proposal_is_announced_once() -> None:
    notices = BlockedNotices(remind_before_seconds=300)
    notices.seen([_proposal("p-old")])
    first = notices.blocked([_proposal("p-old"), _proposal("p-1"), _proposal("p-2")], NOW)
    assert [n.proposal_id for n in first] == ["p-1", "p-2"]
    assert first[0].title == "Approval needed: write_file"
    assert first[0].body == "ops-agent is waiting for you (expires in 60 min). Proposal p-1."
    assert notices.blocked([_proposal("p-1"), _proposal("p-2")], NOW) == []
    decided = _proposal("p-3", status=ProposalStatus.APPROVED)
    assert notices.blocked([decided], NOW) == []


def test_one_reminder_before_expiry_and_none_for_short_lived_proposals() -> None:
    notices = BlockedNotices(remind_before_seconds=300)
    long, short = _proposal("p-long", lifetime=3600), _proposal("p-short", lifetime=120)
    assert len(notices.blocked([long, short], NOW)) == 2
    assert notices.expiring([long, short], NOW + timedelta(seconds=60)) == []
    soon = NOW + timedelta(seconds=3600 - 290)
    (reminder,) = notices.expiring([long, short], soon)
    assert reminder.proposal_id == "p-long" and reminder.kind == "expiring"
    assert reminder.title == "Expires in 5 min: write_file"
    assert notices.expiring([long], soon + timedelta(seconds=60)) == []
    assert notices.expiring([long], NOW + timedelta(seconds=3601)) == []


def test_escape_sequences_carry_hostile_text_inert() -> None:
    notice = Notice("p", "Approval needed: a\x1b]0;x\x07\u202eb;c", "body\nline")
    written = osc_sequences(notice)
    assert written.count("\x1b]") == 2 and written.count("\x07") == 2, "two sequences, no more"
    assert written.startswith("\x1b]9;Agent Supervisor: Approval needed: a\\u001b]0\\u003bx")
    assert "\x1b]777;notify;Approval needed: a\\u001b]0\\u003bx\\u0007\\u202eb\\u003bc;" in written
    assert "body\\u000aline" in written


def test_channels_choose_what_is_written(tmp_path: Path) -> None:
    written: list[str] = []
    Notifier({"bell"}, written.append, notify_send=str(tmp_path / "absent")).send(
        Notice("p", "t", "b")
    )
    assert written == ["\x07"]
    written.clear()
    Notifier(set(), written.append).send(Notice("p", "t", "b"))
    assert written == []


def test_notify_send_gets_escaped_arguments_without_a_shell(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    stub = tmp_path / "notify-send"
    stub.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{calls}'\n")
    stub.chmod(0o755)
    marker = tmp_path / "pwned"
    notice = Notice("p", f"$(touch {marker})\u202e", f"<b>x</b> & `touch {marker}`")
    Notifier({"desktop"}, None, notify_send=str(stub)).send(notice)
    deadline = time.monotonic() + 10
    while len(calls.read_text().splitlines() if calls.exists() else ()) < 5:
        assert time.monotonic() < deadline, "notify-send was not run"
        time.sleep(0.05)
    assert calls.read_text().splitlines() == [
        "--app-name=Agent Supervisor",
        "--urgency=normal",
        "--",
        f"$(touch {marker})\\u202e",
        f"&lt;b&gt;x&lt;/b&gt; &amp; `touch {marker}`",
    ]
    assert not marker.exists()


def test_inside_tmux_the_sequences_are_wrapped_for_passthrough() -> None:
    plain = osc_sequences(Notice("p", "t", "b"))
    wrapped = osc_sequences(Notice("p", "t", "b"), tmux=True)
    assert wrapped == "".join(
        "\x1bPtmux;" + part.replace("\x1b", "\x1b\x1b") + "\x1b\\"
        for part in ("\x1b]9;Agent Supervisor: t: b\x07", "\x1b]777;notify;t;b\x07")
    )
    assert plain == "\x1b]9;Agent Supervisor: t: b\x07\x1b]777;notify;t;b\x07"


def test_a_burst_of_notices_is_sent_as_one_naming_the_first() -> None:
    notices = BlockedNotices(remind_before_seconds=300)
    few = notices.blocked([_proposal(f"p-{n}", tool=f"t{n}") for n in range(3)], NOW)
    assert coalesced(few) == few  # up to three: each its own
    many = few + notices.blocked([_proposal("p-3", tool="t3")], NOW)
    [one] = coalesced(many)
    assert one.kind == "blocked" and one.proposal_id == "p-0"
    assert one.title == "4 proposals need approval"
    assert one.body == (
        "Approval needed: t0. ops-agent is waiting for you (expires in 60 min). Proposal p-0. "
        "(+3 more)"
    )
    soon = NOW + timedelta(seconds=3600 - 60)
    expiring = notices.expiring([_proposal(f"p-{n}") for n in range(4)], soon)
    [reminder] = coalesced(expiring)
    assert reminder.title == "4 proposals expire soon" and reminder.kind == "expiring"
    assert coalesced([]) == []
