"""Text from the ledger cannot drive the operator's terminal through the CLI.

Actors, names and arguments are written with escape sequences (ESC, OSC, C1 CSI), bidi
overrides and invisible characters; the real ``supervisor`` command must print them as visible
escapes on one line each, and its JSON must escape them too while still parsing to the same
values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import assert_one_line_error, run_cli

from supervisor.ledger.models import TraceEvent
from supervisor.store.provider import SQLModelProvider

SCHEMA_HASH = "5" * 64
CLEAR_AND_TITLE = "\x1b[2J\x1b]0;pwned\x07"
APPROVER = f"bob{CLEAR_AND_TITLE}\x9b31m"
AGENT = f"agent{CLEAR_AND_TITLE}"
EXECUTOR = "exec\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\"
ARGUMENTS = {
    "name": "Ada\u00a0Lovelace\u3164\u2800",  # NBSP, Hangul filler, braille blank
    "iban": "DE89\u0338 3704\u20dd",  # overlay and enclosing marks
    "note": "pay\u202egnp.exe\u0085next",  # bidi override and C1 NEL
    "hindi": "नमस्ते",
    "vietnamese": "Tie\u0302\u0301ng Vie\u0323\u0302t",
}
#: Characters that must never reach the terminal raw.
RAW = ["\x1b", "\x07", "\x9b", "\x85", "\u202e", "\u00a0", "\u3164", "\u2800", "\u0338", "\u20dd"]


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def _executed_proposal(db: str) -> str:
    with SQLModelProvider(db) as provider:
        ledger = provider.ledger
        proposal = ledger.propose(
            "create_customer", SCHEMA_HASH, ARGUMENTS, owner=AGENT, thread_id="t\u202e1",
            domains=["crm"],
        )  # fmt: skip
        ledger.approve(proposal.proposal_id, APPROVER, "ok\nforged: line")
        ledger.claim(proposal.proposal_id, proposal.args_hash, executor=EXECUTOR)
        ledger.complete(proposal.proposal_id, "success", executor=EXECUTOR)
    return proposal.proposal_id


def _assert_no_raw(text: str) -> None:
    for char in RAW:
        assert char not in text, f"raw U+{ord(char):04X} in output"


def test_proposals_show_escapes_actors_and_prints_one_field_per_line(ledger: str) -> None:
    proposal_id = _executed_proposal(ledger)
    shown = run_cli("proposals", "show", proposal_id, "--db", ledger)
    assert shown.returncode == 0, shown.stderr
    _assert_no_raw(shown.stdout)
    lines = shown.stdout.splitlines()
    assert "owner       agent\\u001b[2J\\u001b]0;pwned\\u0007" in lines
    assert "thread      t\\u202e1" in lines
    assert "approver    bob\\u001b[2J\\u001b]0;pwned\\u0007\\u009b31m" in lines
    assert "reason      ok\\u000aforged: line" in lines
    assert not any(line.startswith("forged") for line in lines)
    assert "\\u000a" not in "\n".join(lines[: lines.index("arguments")]).replace("ok\\u000a", "")
    history = lines[lines.index("history") + 1 :]
    assert any(
        line.endswith("by bob\\u001b[2J\\u001b]0;pwned\\u0007\\u009b31m") for line in history
    )
    assert any("by exec\\u001b]8;;http://evil.example/\\u001b\\link" in line for line in history)
    body = "\n".join(lines[lines.index("arguments") : lines.index("history")])
    assert "Ada\\u00a0Lovelace\\u3164\\u2800" in body
    assert "DE89\\u0338 3704\\u20dd" in body
    assert "pay\\u202egnp.exe\\u0085next" in body
    assert "नमस्ते" in body  # ordinary letters and marks of any script stay as they are
    assert "Tie\u0302\u0301ng Vie\u0323\u0302t" in body


def test_json_output_escapes_the_same_characters_and_round_trips(ledger: str) -> None:
    proposal_id = _executed_proposal(ledger)
    shown = run_cli("proposals", "show", proposal_id, "--json", "--db", ledger)
    assert shown.returncode == 0, shown.stderr
    _assert_no_raw(shown.stdout)
    assert "\\u202e" in shown.stdout and "\\u0085" in shown.stdout and "नमस्ते" in shown.stdout
    body = json.loads(shown.stdout)
    assert body["arguments"] == ARGUMENTS
    assert body["approver_id"] == APPROVER
    assert {record["actor"] for record in body["history"]} == {AGENT, APPROVER, EXECUTOR}
    listed = run_cli("proposals", "list", "--all", "--json", "--db", ledger)
    _assert_no_raw(listed.stdout)
    assert json.loads(listed.stdout)["items"][0]["owner"] == AGENT


def test_proposals_list_escapes_every_row(ledger: str) -> None:
    _executed_proposal(ledger)
    with SQLModelProvider(ledger) as provider:
        provider.ledger.propose(
            "send\u2800mail", SCHEMA_HASH, {}, owner="ops\u3164\u00a0", domains=["m\u20dd"]
        )
    listed = run_cli("proposals", "list", "--all", "--db", ledger)
    assert listed.returncode == 0, listed.stderr
    _assert_no_raw(listed.stdout)
    executed, pending = listed.stdout.splitlines()
    assert "agent\\u001b[2J" in executed and "t\\u202e1" in executed
    assert "send\\u2800mail" in pending and "ops\\u3164\\u00a0" in pending
    assert "m\\u20dd" in pending


def _trace(db: str) -> None:
    with SQLModelProvider(db) as provider:
        provider.ledger.append_trace(
            [TraceEvent(at=provider.ledger.clock.now(), agent_id=AGENT, kind="tool_result",
                        tool="look\u202eup\u00a0\x9b", outcome_status="success",
                        reason_code="x\ny", payload={"call_id": "c\u2800"})]
        )  # fmt: skip


def test_traces_tail_analyze_and_exports_escape_names(ledger: str, tmp_path: Path) -> None:
    _trace(ledger)
    for command in (["traces", "tail"], ["traces", "analyze"], ["traces", "analyze", "--json"]):
        result = run_cli(*command, "--db", ledger)
        assert result.returncode == 0, result.stderr
        _assert_no_raw(result.stdout)
        assert "look\\u202eup\\u00a0\\u009b" in result.stdout, command
    analyzed = run_cli("traces", "analyze", "--db", ledger)
    assert not any(line.startswith("y=") for line in analyzed.stdout.splitlines())
    tailed = run_cli("traces", "tail", "--json", "--db", ledger)
    _assert_no_raw(tailed.stdout)
    assert json.loads(tailed.stdout)["tool"] == "look\u202eup\u00a0\x9b"
    for fmt in ("jsonl", "otlp-json"):
        out = tmp_path / f"trace.{fmt}"
        exported = run_cli("traces", "export", "--format", fmt, "-o", str(out), "--db", ledger)
        assert exported.returncode == 0, exported.stderr
        text = out.read_text(encoding="utf-8")
        _assert_no_raw(text)
        parsed = json.dumps(json.loads(text.splitlines()[0]), ensure_ascii=False)
        assert "look\u202eup\u00a0\x9b" in parsed
    first = json.loads((tmp_path / "trace.jsonl").read_text().splitlines()[0])
    assert TraceEvent.model_validate(first).payload == {"call_id": "c\u2800"}


def test_error_messages_escape_what_the_user_typed(tmp_path: Path) -> None:
    typo = tmp_path / f"led{CLEAR_AND_TITLE}ger.db"
    result = run_cli("proposals", "list", "--db", str(typo))
    assert_one_line_error(result, "ledger_not_found")
    _assert_no_raw(result.stderr)
    assert "led\\u001b[2J\\u001b]0;pwned\\u0007ger.db" in result.stderr
