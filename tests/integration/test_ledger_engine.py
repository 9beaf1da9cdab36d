"""Engine factory, file modes, URL resolution, migrations on open and the too-new error."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import platformdirs
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

from supervisor.ledger import LedgerBusy, LedgerSchemaTooNew, LedgerUnavailable
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.convert import proposal_to_values
from supervisor.store.engine import create_ledger_engine, default_ledger_path, resolve_url
from supervisor.store.migrate import ensure_schema
from supervisor.store.provider import SQLModelProvider
from supervisor.store.repository import Repository
from supervisor.store.tables import SCHEMA_VERSION

REPO = Path(__file__).resolve().parents[2]
LEDGER_TABLES = {
    "proposal", "proposal_open", "proposal_domain", "execution", "checkpoint", "audit",
    "trace_event", "blob",
    "tool_registry", "agent", "process", "ledger_meta", "semantic_cache", "result_pointer",
    "policy_grant",
    "lease", "proposal_waiter",
    "policy_version", "operator",
    "webhook", "webhook_delivery",
}  # fmt: skip


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("SUPERVISOR_DB", raising=False)
    monkeypatch.delenv("SUPERVISOR_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_ledger_files_are_private_whatever_the_umask(
    tmp_path: Path, permissive_umask: None
) -> None:
    db = tmp_path / "fresh" / "ledger.db"
    engine = create_ledger_engine(f"sqlite:///{db}")
    try:
        ledger = ApprovalLedger(engine)
        ledger.propose("t", "h", {"a": 1})
        with engine.connect() as conn:  # keep a connection open so -wal/-shm exist
            conn.exec_driver_sql("SELECT 1")
            sidecars = [db.with_name(db.name + s) for s in ("-wal", "-shm")]
            assert all(p.exists() for p in sidecars)
            assert [_mode(p) for p in [db, *sidecars]] == [0o600, 0o600, 0o600]
        assert _mode(db.parent) == 0o700
    finally:
        engine.dispose()


def test_sqlite_pragmas(sqlite_url: str) -> None:
    for level, expected in (("NORMAL", 1), ("FULL", 2)):
        engine = create_ledger_engine(sqlite_url, synchronous=level)  # type: ignore[arg-type]
        try:
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == expected
                assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        finally:
            engine.dispose()
    with pytest.raises(ValueError):
        create_ledger_engine(sqlite_url, synchronous="OFF")  # type: ignore[arg-type]


def test_url_resolution_order(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = Path(platformdirs.user_data_dir("agent-supervisor")) / "ledger.db"
    assert str(clean_env) in str(default)
    assert resolve_url() == f"sqlite:///{default}"
    monkeypatch.setenv("SUPERVISOR_HOME", str(clean_env / "sup"))
    assert default_ledger_path() == clean_env / "sup" / "ledger.db"
    assert resolve_url() == f"sqlite:///{clean_env / 'sup' / 'ledger.db'}"
    monkeypatch.setenv("SUPERVISOR_DB", "postgresql+psycopg://u@h/db")
    assert resolve_url() == "postgresql+psycopg://u@h/db"
    assert resolve_url("sqlite:///explicit.db") == "sqlite:///explicit.db"


def test_provider_default_is_lazy_and_embedded(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERVISOR_HOME", str(clean_env / "sup"))
    provider = SQLModelProvider()
    db = clean_env / "sup" / "ledger.db"
    assert not db.exists()
    try:
        proposal = provider.ledger.propose("t", "h", {"a": 1})
        assert db.exists()
        assert provider.url == f"sqlite:///{db}"
    finally:
        provider.close()
    with SQLModelProvider() as reopened:
        assert reopened.ledger.get(proposal.proposal_id) == proposal


def test_migrations_are_idempotent_and_match_the_tables(ledger_url: str) -> None:
    engine = create_ledger_engine(ledger_url)
    try:
        assert ensure_schema(engine) == SCHEMA_VERSION
        assert ensure_schema(engine) == SCHEMA_VERSION
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [
                ("0011",)
            ]
            assert LEDGER_TABLES <= set(sa.inspect(conn).get_table_names())
            diffs = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": False}), SQLModel.metadata
            )
        ours = [
            d for d in diffs
            if any(getattr(part, "name", None) in LEDGER_TABLES or
                   getattr(getattr(part, "table", None), "name", None) in LEDGER_TABLES
                   for part in (d if isinstance(d, tuple) else d[0])[1:])
        ]  # fmt: skip
        assert ours == []
    finally:
        engine.dispose()


_OPENER = textwrap.dedent(
    """
    import sys, time
    from supervisor.store.engine import create_ledger_engine
    from supervisor.ledger.service import ApprovalLedger
    url, start = sys.argv[1], float(sys.argv[2])
    while time.time() < start:
        time.sleep(0.001)
    engine = create_ledger_engine(url)
    ApprovalLedger(engine).propose("t", "h", {"opener": sys.argv[3]})
    engine.dispose()
    """
)


def test_processes_opening_a_fresh_ledger_at_once(ledger_url: str) -> None:
    import time

    start = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, ledger_url, str(start), str(i)],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], "\n".join(errors)
    engine = create_ledger_engine(ledger_url)
    try:
        ledger = ApprovalLedger(engine)
        assert len(ledger.list(limit=100).items) == 4
        assert ledger.verify().ok
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar() == 1
    finally:
        engine.dispose()


def test_a_migration_committed_while_another_opener_looks_is_not_someone_elses_db(
    ledger_url: str,
) -> None:
    """The opener's look at the catalog can straddle another process's migration commit.

    Deterministic form of the race the four-opener test hits now and then on PostgreSQL: the
    other migration commits right after the opener's first catalog statement.
    """
    looking = create_ledger_engine(ledger_url)
    other = create_ledger_engine(ledger_url)
    migrated: list[int] = []

    def migrate_elsewhere(*_: object) -> None:
        if not migrated:
            migrated.append(ensure_schema(other))

    sa.event.listen(looking, "after_cursor_execute", migrate_elsewhere)
    try:
        assert ensure_schema(looking) == SCHEMA_VERSION
        assert migrated == [SCHEMA_VERSION]
        ApprovalLedger(looking).propose("t", "h", {"n": 1})
    finally:
        sa.event.remove(looking, "after_cursor_execute", migrate_elsewhere)
        looking.dispose()
        other.dispose()


def test_newer_ledger_is_a_clear_error(ledger_url: str) -> None:
    engine = create_ledger_engine(ledger_url)
    try:
        ensure_schema(engine)
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE ledger_meta SET value = '99' WHERE key = 'schema_version'")
            )
        with pytest.raises(LedgerSchemaTooNew) as caught:
            ensure_schema(engine)
        assert caught.value.code == "ledger_schema_too_new"
        assert "99" in str(caught.value) and str(SCHEMA_VERSION) in str(caught.value)
        assert "Upgrade" in str(caught.value)
        with pytest.raises(LedgerSchemaTooNew):
            SQLModelProvider(ledger_url).ledger  # noqa: B018
    finally:
        engine.dispose()


def test_locked_sqlite_raises_busy_and_stays_consistent(sqlite_url: str) -> None:
    engine = create_ledger_engine(sqlite_url, busy_timeout_s=0.2)
    holder = create_ledger_engine(sqlite_url)
    try:
        ledger = ApprovalLedger(engine)
        kept = ledger.propose("t", "h", {"a": 1})
        with holder.connect() as conn:
            conn = conn.execution_options(ledger_write=True)  # BEGIN IMMEDIATE: holds the lock
            transaction = conn.begin()
            with pytest.raises(LedgerBusy) as caught:
                ledger.approve(kept.proposal_id, "alice")
            assert caught.value.code == "ledger_busy"
            transaction.rollback()
        assert ledger.get(kept.proposal_id).status == "pending"
        assert ledger.verify().ok and ledger.verify().checked == 1
        assert ledger.approve(kept.proposal_id, "alice").status == "approved"
    finally:
        engine.dispose()
        holder.dispose()


def test_unreachable_server_is_unavailable() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = SQLModelProvider(f"postgresql+psycopg://nobody@127.0.0.1:{port}/ledger")
    with pytest.raises(LedgerUnavailable) as caught:
        provider.ledger  # noqa: B018
    assert caught.value.code == "ledger_unavailable"
    assert "SUPERVISOR_DB" in str(caught.value)


def test_an_older_ledger_is_migrated_on_open_and_keeps_its_data(ledger_url: str) -> None:
    from supervisor.store.migrate import stored_schema_version, upgrade

    engine = create_ledger_engine(ledger_url)
    try:
        with engine.begin() as connection:
            upgrade(connection, "0001")
            assert stored_schema_version(connection) == 1
        # A proposal as a release of schema 1 wrote it (only the columns schema 1 has).
        current = create_ledger_engine("sqlite://")
        proposal = ApprovalLedger(current).propose(
            "send_email", "f" * 64, {"to": "a@b.c"}, owner="agent-1"
        )
        current.dispose()
        with engine.begin() as connection:
            columns = {column["name"] for column in sa.inspect(connection).get_columns("proposal")}
            values = {k: v for k, v in proposal_to_values(proposal).items() if k in columns}
            connection.execute(sa.table("proposal", *map(sa.column, values)).insert(), values)
        assert ensure_schema(engine) == SCHEMA_VERSION == 11
        with engine.connect() as connection:
            tables = sa.inspect(connection).get_table_names()
            assert {"semantic_cache", "result_pointer", "policy_version"} <= set(tables)
        assert ApprovalLedger(Repository(engine)).get(proposal.proposal_id) == proposal
    finally:
        engine.dispose()


def test_migration_0010_reads_every_older_call_as_our_own_agents(ledger_url: str) -> None:
    """Calls recorded before runtimes existed were all this SDK's agents' (MCP tool calls
    included: the target says where a call runs, the runtime who asked): ``sdk``, listable by
    runtime."""
    from supervisor.store.migrate import upgrade

    engine = create_ledger_engine(ledger_url)
    try:
        with engine.begin() as connection:
            upgrade(connection, "0009")
        current = create_ledger_engine("sqlite://")
        made = ApprovalLedger(current)
        mcp_call = made.propose("add", "a" * 64, {"n": 1}, execution_target={"mcp_server": "files"})
        own_call = made.propose("send_email", "f" * 64, {"to": "a@b.c"})
        current.dispose()
        with engine.begin() as connection:
            columns = {column["name"] for column in sa.inspect(connection).get_columns("proposal")}
            assert "runtime" not in columns
            for proposal in (mcp_call, own_call):
                values = {k: v for k, v in proposal_to_values(proposal).items() if k in columns}
                connection.execute(sa.table("proposal", *map(sa.column, values)).insert(), values)
        assert ensure_schema(engine) == SCHEMA_VERSION
        ledger = ApprovalLedger(Repository(engine))
        assert ledger.get(mcp_call.proposal_id).runtime == "sdk"
        assert ledger.get(own_call.proposal_id).runtime == "sdk"
        gateway = ledger.propose("add", "a" * 64, {"n": 2}, runtime="mcp:files")
        assert [p.proposal_id for p in ledger.list(runtime="mcp:files").items] == [
            gateway.proposal_id
        ]
        assert len(ledger.list(runtime="sdk").items) == 2
    finally:
        engine.dispose()
