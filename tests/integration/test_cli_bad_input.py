"""Bad input to the ``supervisor`` command: a typed error in one line, exit 2, nothing written.

Every case runs the real console script in a subprocess and compares the folder holding the
ledger (bytes and mtimes of every file) before and after.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from support.cli import assert_one_line_error, run_cli, snapshot

from supervisor.store.provider import SQLModelProvider

SCHEMA_HASH = "5" * 64


def _ledger(folder: Path) -> tuple[Path, str]:
    """A ledger with one pending proposal; returns its path and the proposal id."""
    path = folder / "ledger.db"
    with SQLModelProvider(f"sqlite:///{path}") as provider:
        proposal = provider.ledger.propose("create_customer", SCHEMA_HASH, {"name": "Ada"})
    return path, proposal.proposal_id


def _commands(ledger: Path, proposal_id: str = "0" * 32) -> list[list[str]]:
    db = ["--db", str(ledger)]
    return [
        ["proposals", "list", *db],
        ["audit", "verify", *db],
        ["proposals", "approve", proposal_id, "--approver", "ops", *db],
    ]


def _check_each_refused(folder: Path, commands: list[list[str]], code: str) -> None:
    before = snapshot(folder)
    for command in commands:
        result = run_cli(*command, cwd=folder)
        assert_one_line_error(result, code)
        assert snapshot(folder) == before, command


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    ledger = tmp_path / "notes.db"
    ledger.write_text("these are my notes, not a database\n" * 100)
    _check_each_refused(tmp_path, _commands(ledger), "not_a_ledger")


@pytest.mark.parametrize("size", [100, 50_000])
def test_a_truncated_ledger_is_refused(size: int, tmp_path: Path) -> None:
    ledger, proposal_id = _ledger(tmp_path)
    with SQLModelProvider(f"sqlite:///{ledger}") as provider:
        for number in range(40):
            provider.ledger.propose(
                "create_customer", SCHEMA_HASH, {"name": "x" * 2000 + str(number)}
            )
    assert ledger.stat().st_size > size
    with ledger.open("r+b") as handle:
        handle.truncate(size)
    _check_each_refused(tmp_path, _commands(ledger, proposal_id), "ledger_corrupt")


@pytest.mark.parametrize(
    "url", ["mysql://user@localhost/ledger", "http://example.com/ledger", "nosuchdb://x"]
)
def test_an_unknown_url_scheme_is_refused(url: str, tmp_path: Path) -> None:
    for command in (["proposals", "list"], ["proposals", "approve", "0" * 32]):
        result = run_cli(*command, "--db", url, cwd=tmp_path)
        assert_one_line_error(result, "unsupported_ledger_url")
        assert url.partition(":")[0] in result.stderr
    assert snapshot(tmp_path) == {}


@pytest.mark.parametrize("version", ["abc", "2.0"])
def test_a_non_numeric_schema_version_is_refused(version: str, tmp_path: Path) -> None:
    ledger, proposal_id = _ledger(tmp_path)
    with sqlite3.connect(ledger) as connection:
        connection.execute(
            "UPDATE ledger_meta SET value = ? WHERE key = 'schema_version'", (version,)
        )
    connection.close()
    _check_each_refused(tmp_path, _commands(ledger, proposal_id), "ledger_corrupt")


def test_a_proposal_id_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    ledger, _ = _ledger(tmp_path)
    before = snapshot(tmp_path)
    for verb in ("show", "approve"):
        result = run_cli("proposals", verb, b"\xff\xfe-id", "--db", str(ledger))
        assert_one_line_error(result, "argument_not_utf8")
        assert "b'\\xff\\xfe-id'" in result.stderr
    assert snapshot(tmp_path) == before


def test_tools_show_of_a_module_that_does_not_exist(tmp_path: Path) -> None:
    result = run_cli("tools", "show", "nosuch:x", cwd=tmp_path)
    assert_one_line_error(result, "reference_not_importable")
    assert "nosuch" in result.stderr
    assert snapshot(tmp_path) == {}


def test_run_with_a_factory_that_needs_arguments(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    ledger, _ = _ledger(folder)
    (tmp_path / "factories_needing_args.py").write_text(
        "def make_agent(name, model='m'):\n    raise AssertionError('must not be called')\n"
    )
    before = snapshot(folder)
    result = run_cli(
        "run", "factories_needing_args:make_agent", "--input", "hi", "--db", str(ledger),
        cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"},
    )  # fmt: skip
    assert_one_line_error(result, "invalid_factory_reference")
    assert "needs arguments (name)" in result.stderr
    assert snapshot(folder) == before  # no process row was recorded


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        pytest.param("trace.jsonl", '{not json\n', "line 1", id="jsonl-not-json"),
        pytest.param("trace.jsonl", '{"kind": "tool_result", "at": "2025-01-01T00:00:00Z"}\n'
                     '{"kind": [1]}\n', "line 2", id="jsonl-not-an-event"),
        pytest.param("trace.json", json.dumps({"resourceSpans": []}, indent=2), "line 1",
                     id="json-document"),
        pytest.param("trace.ndjson", "[/]\n", "line 1", id="markup-like"),
    ],
)  # fmt: skip
def test_traces_review_of_a_malformed_trace_file(
    name: str, content: str, where: str, tmp_path: Path
) -> None:
    trace = tmp_path / name
    trace.write_text(content)
    before = snapshot(tmp_path)
    result = run_cli("traces", "review", str(trace), cwd=tmp_path, timeout=60)
    assert_one_line_error(result, "invalid_trace_file")
    assert f"{where} of {trace}" in result.stderr
    assert result.stdout == ""  # the TUI never started
    assert snapshot(tmp_path) == before


def test_traces_review_of_a_missing_file_or_ledger(tmp_path: Path) -> None:
    missing = run_cli("traces", "review", str(tmp_path / "gone.jsonl"), cwd=tmp_path, timeout=60)
    assert_one_line_error(missing, "trace_file_not_found")
    no_ledger = run_cli("traces", "review", str(tmp_path / "gone.db"), cwd=tmp_path, timeout=60)
    assert_one_line_error(no_ledger, "ledger_not_found")
    (tmp_path / "notes.db").write_text("not a database\n" * 50)
    before = snapshot(tmp_path)
    bad = run_cli("traces", "review", str(tmp_path / "notes.db"), cwd=tmp_path, timeout=60)
    assert_one_line_error(bad, "not_a_ledger")
    assert snapshot(tmp_path) == before
