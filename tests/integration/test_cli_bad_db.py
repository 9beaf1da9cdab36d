"""Bad ``--db`` values and refused writes: one typed line, exit 2, no traceback, nothing written.

Every case runs the real ``supervisor`` console script in a subprocess against real SQLite files
or a real PostgreSQL server, and compares what was there before and after: the files of the
folder (bytes and mtimes), the tables of a database, or the ledger's audit head.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from support.cli import assert_one_line_error, run_cli, snapshot

from supervisor.ledger.errors import LedgerError, NotALedger
from supervisor.ledger.models import ProposalStatus, TraceEvent
from supervisor.store.provider import SQLModelProvider

SCHEMA_HASH = "5" * 64
SECRET_ARGUMENT = "acct-4242-do-not-print"


def _ledger(path: Path) -> str:
    """A ledger at ``path`` with one pending proposal; returns its id."""
    with SQLModelProvider(f"sqlite:///{path}") as provider:
        proposal = provider.ledger.propose("transfer", SCHEMA_HASH, {"to": SECRET_ARGUMENT})
    return proposal.proposal_id


def _policy_file(folder: Path) -> Path:
    policy = folder.parent / f"{folder.name}-policy.toml"
    policy.write_text("[approval]\nforbid_self_approval = true\n")
    return policy


def _sqlite_tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    connection.close()
    return [name for (name,) in rows]


# 1. writers never install the ledger's schema into someone else's database -----------------


def _writers(db: str, policy: Path) -> list[list[str]]:
    return [
        ["policy", "apply", str(policy), "--db", db],
        ["traces", "prune", "--db", db],
        ["proposals", "approve", "0" * 32, "--db", db],
        ["sandbox", "exec", "--db", db, "--", "true"],
    ]


@pytest.mark.parametrize("form", ["path", "url"])
def test_writers_refuse_a_database_holding_other_tables(form: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    other = data / "crm.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE customers (name TEXT)")
        connection.execute("INSERT INTO customers VALUES ('ada')")
    connection.close()
    db = str(other) if form == "path" else f"sqlite:///{other}"
    before = snapshot(data)
    for command in _writers(db, _policy_file(tmp_path)):
        result = run_cli(*command, cwd=tmp_path)
        assert_one_line_error(result, "not_a_ledger")
        assert "customers" in result.stderr
        assert snapshot(data) == before, command
    assert _sqlite_tables(other) == ["customers"]


def test_the_sdk_refuses_a_database_holding_other_tables_and_creates_an_empty_one(
    tmp_path: Path,
) -> None:
    other = tmp_path / "crm.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE customers (name TEXT)")
    connection.close()
    before = snapshot(tmp_path)
    with (
        pytest.raises(NotALedger, match="customers"),
        SQLModelProvider(f"sqlite:///{other}") as provider,
    ):
        provider.ledger  # noqa: B018 - opening is the test
    assert snapshot(tmp_path) == before  # not even the journal mode changed
    empty = tmp_path / "empty.db"
    empty.touch()
    with SQLModelProvider(f"sqlite:///{empty}") as provider:  # an empty file is a new ledger
        assert not provider.ledger.list().items
    assert "ledger_meta" in _sqlite_tables(empty)


@pytest.mark.parametrize("command", [["policy", "apply", "POLICY"], ["traces", "prune"]])
@pytest.mark.parametrize(
    ("db", "code"),
    [
        pytest.param("missing/ledger.db", "ledger_not_found", id="missing-path"),
        pytest.param("empty.db", "not_a_ledger", id="empty-file"),
        pytest.param("sqlite:///:memory:", "ledger_not_found", id="in-memory"),
        pytest.param("sqlite://", "ledger_not_found", id="in-memory-short"),
    ],
)
def test_policy_apply_and_prune_never_create_a_ledger(
    command: list[str], db: str, code: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "empty.db").touch()
    policy = _policy_file(data)
    argv = [str(policy) if word == "POLICY" else word for word in command]
    before = snapshot(data)
    result = run_cli(*argv, "--db", db, cwd=data)
    assert_one_line_error(result, code)
    assert "Applied" not in result.stdout and "pruned" not in result.stdout
    assert snapshot(data) == before
    if "memory" in db:
        assert "in-memory URLs are refused" in result.stderr


@pytest.mark.postgres
def test_postgres_writers_refuse_a_database_holding_other_tables(
    postgres_url: str, tmp_path: Path
) -> None:
    libpq = postgres_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(libpq, autocommit=True) as connection:
        connection.execute("CREATE TABLE process (id serial PRIMARY KEY, name text)")
        connection.execute("INSERT INTO process (name) VALUES ('payroll')")
    for command in _writers(postgres_url, _policy_file(tmp_path))[:3]:
        result = run_cli(*command, cwd=tmp_path)
        assert_one_line_error(result, "not_a_ledger")
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as connection:
            assert sa.inspect(connection).get_table_names() == ["process"]
            assert connection.execute(sa.text("SELECT name FROM process")).all() == [("payroll",)]
    finally:
        engine.dispose()


# 2. --db values the filesystem or the URL parser refuse -------------------------------------


@pytest.mark.parametrize(
    ("db", "code"),
    [
        pytest.param("~nosuchuser-of-this-test/x.db", "invalid_ledger_path", id="unknown-user"),
        pytest.param("a" * 5000, "invalid_ledger_path", id="long-path"),
        pytest.param("sqlite:///" + "a" * 5000, "invalid_ledger_path", id="long-sqlite-url"),
        pytest.param("sqlite:///~nosuchuser-of-this-test/x.db", "invalid_ledger_path",
                     id="unknown-user-url"),
        pytest.param("postgresql+psycopg://u@[::1/x", "unsupported_ledger_url", id="bad-host"),
        pytest.param("", "unsupported_ledger_url", id="empty"),
    ],
)  # fmt: skip
def test_a_db_value_that_cannot_be_a_ledger_is_one_typed_line(
    db: str, code: str, tmp_path: Path
) -> None:
    policy = _policy_file(tmp_path / "data")
    data = tmp_path / "data"
    data.mkdir()
    commands = [
        ["proposals", "list"], ["audit", "verify"], ["proposals", "approve", "0" * 32],
        ["policy", "apply", str(policy)], ["traces", "prune"], ["doctor"],
        ["sandbox", "exec", "--", "true"],
    ]  # fmt: skip
    for command in commands:
        at = command.index("--") if "--" in command else len(command)
        result = run_cli(*command[:at], "--db", db, *command[at:], cwd=data)
        assert_one_line_error(result, code)
        assert len(result.stderr) < 1000, result.stderr  # a long path is clipped
    assert snapshot(data) == {}


# 3. writes the database refuses, and labels too long for their column -----------------------


@pytest.fixture
def read_only_role(postgres_url: str) -> Iterator[tuple[str, str]]:
    """A ledger with one pending proposal, and a URL of it for a role granted only SELECT."""
    with SQLModelProvider(postgres_url) as provider:
        proposal = provider.ledger.propose("transfer", SCHEMA_HASH, {"to": SECRET_ARGUMENT})
    role = f"ro_{postgres_url.rsplit('/', 1)[1]}"[:60]
    libpq = postgres_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(libpq, autocommit=True) as connection:
        connection.execute(f'CREATE ROLE "{role}" LOGIN')
        connection.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    try:
        yield postgres_url.replace("postgres@", f"{role}@", 1), proposal.proposal_id
    finally:
        with psycopg.connect(libpq, autocommit=True) as connection:
            connection.execute(f'DROP OWNED BY "{role}"')
            connection.execute(f'DROP ROLE "{role}"')


@pytest.mark.postgres
def test_a_select_only_role_gets_a_typed_error_that_shows_no_parameters(
    read_only_role: tuple[str, str], postgres_url: str, tmp_path: Path
) -> None:
    url, proposal_id = read_only_role
    with SQLModelProvider(postgres_url, read_only=True) as provider:
        head = provider.ledger.chain_head()
    policy = _policy_file(tmp_path)
    label = "label-in-the-audit-payload"
    for command in (
        ["proposals", "approve", proposal_id, "--approver", label, "--reason", SECRET_ARGUMENT],
        ["policy", "apply", str(policy), "--reason", SECRET_ARGUMENT],
    ):
        result = run_cli(*command, "--db", url, cwd=tmp_path)
        assert_one_line_error(result, "ledger_permission_denied")
        assert "permission denied for table" in result.stderr
        assert SECRET_ARGUMENT not in result.stderr and label not in result.stderr
    listed = run_cli("proposals", "list", "--db", url, cwd=tmp_path)  # reading still works
    assert listed.returncode == 0 and proposal_id in listed.stdout
    with SQLModelProvider(postgres_url, read_only=True) as provider:
        assert provider.ledger.chain_head() == head
        assert provider.ledger.get(proposal_id).status is ProposalStatus.PENDING


@pytest.mark.parametrize(
    "engine_name", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_an_approver_label_longer_than_its_column_is_refused_before_the_ledger(
    engine_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if engine_name == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    with SQLModelProvider(url) as provider:
        proposal = provider.ledger.propose("transfer", SCHEMA_HASH, {"to": SECRET_ARGUMENT})
        head = provider.ledger.chain_head()
    for verb in ("approve", "cancel"):
        result = run_cli(
            "proposals", verb, proposal.proposal_id, "--approver", "a" * 300, "--db", url,
            cwd=tmp_path,
        )  # fmt: skip
        assert_one_line_error(result, "ledger_value_rejected")
        assert "300 characters" in result.stderr and "a" * 300 not in result.stderr
    with SQLModelProvider(url, read_only=True) as provider:
        assert provider.ledger.chain_head() == head
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    exact = run_cli(
        "proposals", "approve", proposal.proposal_id, "--approver", "é" * 200, "--db", url
    )
    assert exact.returncode == 0, exact.stderr  # 200 characters (400 bytes) fit


@pytest.mark.postgres
def test_the_sdk_gets_a_typed_error_for_a_value_postgres_refuses(postgres_url: str) -> None:
    with SQLModelProvider(postgres_url) as provider:
        proposal = provider.ledger.propose("transfer", SCHEMA_HASH, {"to": SECRET_ARGUMENT})
        with pytest.raises(LedgerError, match="too long") as raised:
            provider.ledger.approve(proposal.proposal_id, "a" * 300)
        assert raised.value.code == "ledger_value_rejected"  # LedgerValueRejected
        assert "a" * 300 not in str(raised.value)
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING


# 4. numbers too large for their option ----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["traces", "tail", "-n", "99999999999999999999"], id="tail-lines"),
        pytest.param(["traces", "tail", "-n", "-5"], id="tail-negative"),
        pytest.param(["traces", "export", "--since", "9999999d"], id="export-since"),
        pytest.param(
            ["traces", "push", "http://127.0.0.1:9", "--since", "9999999d"], id="push-since"
        ),
        pytest.param(["traces", "analyze", "--since", "1" * 400 + "w"], id="analyze-since"),
        pytest.param(["proposals", "list", "--status", "nope"], id="not-a-choice"),
    ],
)
def test_an_option_out_of_range_is_one_typed_line(command: list[str], tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    _ledger(ledger)
    before = snapshot(tmp_path)
    result = run_cli(*command, "--db", str(ledger), cwd=tmp_path)
    assert_one_line_error(result, "invalid_usage")
    assert "--help" in result.stderr.splitlines()[1]
    assert snapshot(tmp_path) == before


def test_tail_zero_lines_prints_no_event(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    _ledger(ledger)
    with SQLModelProvider(f"sqlite:///{ledger}") as provider:
        now = provider.ledger.clock.now()
        provider.ledger.append_trace([TraceEvent(at=now, kind="tool_call", tool="transfer")])
    assert run_cli("traces", "tail", "-n", "0", "--db", str(ledger)).stdout == ""
    assert "transfer" in run_cli("traces", "tail", "-n", "1", "--db", str(ledger)).stdout


# 5. one rule for --db and SUPERVISOR_DB: a SQLite path or a URL -----------------------------


def test_supervisor_db_takes_a_path_like_db(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    proposal_id = _ledger(ledger)
    before = snapshot(tmp_path)
    for value in (str(ledger), "ledger.db", f"sqlite:///{ledger}"):
        listed = run_cli("proposals", "list", cwd=tmp_path, env={"SUPERVISOR_DB": value})
        assert listed.returncode == 0, (value, listed.stderr)
        assert proposal_id in listed.stdout
    with SQLModelProvider(str(ledger), read_only=True) as provider:  # the SDK takes a path too
        assert [item.proposal_id for item in provider.ledger.list().items] == [proposal_id]
    assert snapshot(tmp_path) == before


# 6. what the errors say ---------------------------------------------------------------------


def test_hints_name_the_real_commands_and_in_memory_uris_are_refused_as_such(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.db"
    _ledger(ledger)
    missing = run_cli("proposals", "show", "nosuch", "--db", str(ledger))
    assert_one_line_error(missing, "proposal_not_found")
    assert "`supervisor proposals list" in missing.stderr
    before = snapshot(tmp_path)
    memory = f"sqlite:///file:{ledger}?uri=true&mode=memory"
    for command in (["proposals", "list"], ["audit", "verify"], ["traces", "prune"]):
        result = run_cli(*command, "--db", memory, cwd=tmp_path)
        assert_one_line_error(result, "ledger_not_found")
        assert "in-memory URLs are refused" in result.stderr
        assert "holds no ledger tables" not in result.stderr
    assert snapshot(tmp_path) == before
