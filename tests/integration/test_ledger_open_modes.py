"""Opening a ledger read-only or must-exist, and refusing files and URLs that are no ledger.

Real SQLite files and a real PostgreSQL server; "nothing written" is checked on the bytes and
mtime of every file in the ledger's folder.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import snapshot

from supervisor.ledger.errors import (
    LedgerCorrupt,
    LedgerNotFound,
    LedgerSchemaTooOld,
    LedgerUnavailable,
    NotALedger,
    UnsupportedLedgerUrl,
)
from supervisor.store.engine import check_sqlite_header, create_ledger_engine, supported_url
from supervisor.store.migrate import stored_schema_version, upgrade
from supervisor.store.provider import SQLModelProvider
from supervisor.store.tables import SCHEMA_VERSION

SCHEMA_HASH = "5" * 64


def _open(url: str, *, read_only: bool = False, must_exist: bool = False) -> None:
    with SQLModelProvider(url, read_only=read_only, must_exist=must_exist) as provider:
        provider.ledger.list()


@pytest.mark.parametrize("options", [{"read_only": True}, {"must_exist": True}])
def test_a_missing_sqlite_ledger_is_not_created(options: dict[str, bool], tmp_path: Path) -> None:
    with pytest.raises(LedgerNotFound) as caught:
        _open(f"sqlite:///{tmp_path / 'sub' / 'ledger.db'}", **options)
    assert caught.value.code == "ledger_not_found"
    assert str(tmp_path / "sub" / "ledger.db") in caught.value.message
    assert snapshot(tmp_path) == {}


@pytest.mark.parametrize("options", [{"read_only": True}, {"must_exist": True}])
def test_an_empty_database_gets_no_tables(
    options: dict[str, bool], ledger_url: str, tmp_path: Path
) -> None:
    if ledger_url.startswith("sqlite"):
        (tmp_path / "ledger.db").touch()
    with pytest.raises(NotALedger):
        _open(ledger_url, **options)
    engine = sa.create_engine(ledger_url)
    try:
        with engine.connect() as connection:
            assert sa.inspect(connection).get_table_names() == []
    finally:
        engine.dispose()


def test_a_read_only_ledger_reads_and_refuses_writes(ledger_url: str, tmp_path: Path) -> None:
    with SQLModelProvider(ledger_url) as provider:
        proposal = provider.ledger.propose("create_customer", SCHEMA_HASH, {"name": "Ada"})
    before = snapshot(tmp_path)
    with SQLModelProvider(ledger_url, read_only=True) as provider:
        assert [item.proposal_id for item in provider.ledger.list().items] == [proposal.proposal_id]
        assert provider.ledger.verify().ok
        with pytest.raises(LedgerUnavailable):
            provider.ledger.propose("create_customer", SCHEMA_HASH, {"name": "Bo"})
        with pytest.raises(LedgerUnavailable):
            provider.ledger.approve(proposal.proposal_id, "ops", None)
    assert snapshot(tmp_path) == before  # sqlite: not even a WAL sidecar is left behind
    with SQLModelProvider(ledger_url) as provider:
        assert provider.ledger.get(proposal.proposal_id).status.value == "pending"


def test_a_read_only_open_never_migrates(ledger_url: str, tmp_path: Path) -> None:
    engine = create_ledger_engine(ledger_url)
    try:
        with engine.connect() as connection, connection.begin():
            upgrade(connection, "0001")
    finally:
        engine.dispose()
    before = snapshot(tmp_path)
    with pytest.raises(LedgerSchemaTooOld) as caught:
        _open(ledger_url, read_only=True)
    assert caught.value.code == "ledger_schema_too_old"
    assert snapshot(tmp_path) == before
    _open(ledger_url)  # a writable open migrates as before
    engine = create_ledger_engine(ledger_url)
    try:
        with engine.connect() as connection:
            assert stored_schema_version(connection) == SCHEMA_VERSION
    finally:
        engine.dispose()


@pytest.mark.parametrize("value", ["", "abc", "-1", "0", "2.0", "\u0663", "1e3"])
def test_a_schema_version_that_is_not_a_positive_integer(value: str, tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _open(f"sqlite:///{path}")
    with sqlite3.connect(path) as connection:
        connection.execute(
            "UPDATE ledger_meta SET value = ? WHERE key = 'schema_version'", (value,)
        )
    connection.close()
    before = snapshot(tmp_path)
    for options in ({}, {"read_only": True}):
        with pytest.raises(LedgerCorrupt) as caught:
            _open(f"sqlite:///{path}", **options)
        assert caught.value.code == "ledger_corrupt"
        assert "schema version" in caught.value.message
    assert snapshot(tmp_path) == before


def test_sqlite_header_checks(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    _open(f"sqlite:///{ledger}")
    check_sqlite_header(ledger)
    data = ledger.read_bytes()
    cases: list[tuple[bytes, type[Exception]]] = [
        (b"PK\x03\x04 a zip file", NotALedger),
        (b"SQLite for", LedgerCorrupt),
        (data[:60], LedgerCorrupt),
        (data[:100], LedgerCorrupt),
        (data[: len(data) // 2], LedgerCorrupt),
    ]
    for content, error in cases:
        broken = tmp_path / "broken.db"
        broken.write_bytes(content)
        with pytest.raises(error):
            check_sqlite_header(broken)
        for options in ({}, {"read_only": True}, {"must_exist": True}):
            with pytest.raises(error):
                _open(f"sqlite:///{broken}", **options)
            assert broken.read_bytes() == content
        assert sorted(path.name for path in tmp_path.iterdir()) == ["broken.db", "ledger.db"]
    (tmp_path / "empty.db").touch()
    check_sqlite_header(tmp_path / "empty.db")  # an empty file is an empty database


@pytest.mark.parametrize(
    "url",
    ["mysql://u@h/db", "http://example.com/x", "://garbage", "sqlite+pysqlcipher:///x.db",
     "postgresql+asyncpg://u@h/db", "nosuch://x"],
)  # fmt: skip
def test_only_sqlite_and_psycopg_urls_are_ledgers(url: str, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedLedgerUrl) as caught:
        _open(url)
    assert caught.value.code == "unsupported_ledger_url"
    assert snapshot(tmp_path) == {}


def test_supported_urls_pass() -> None:
    for url in ("sqlite:///x.db", "sqlite+pysqlite:///x.db", "sqlite://",
                "postgresql://u@h/db", "postgresql+psycopg://u@h/db",
                "postgresql+psycopg2://u@h/db"):  # fmt: skip
        supported_url(url)
