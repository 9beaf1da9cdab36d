"""The PostgreSQL test fixtures give real, isolated, working databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from support.postgres import PostgresCluster, unique_database_name


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    """An engine on the test's own database, disposed so the database can be dropped."""
    eng = sa.create_engine(postgres_url)
    try:
        yield eng
    finally:
        eng.dispose()


def test_url_uses_psycopg_on_loopback(postgres_url: str, pg_cluster: PostgresCluster) -> None:
    url = make_url(postgres_url)
    assert url.drivername == "postgresql+psycopg"
    if not pg_cluster.external:
        assert (url.host, url.username) == ("127.0.0.1", "postgres")
        assert url.port is not None and url.port != 5432


def test_select_one(engine: Engine) -> None:
    with engine.connect() as conn:
        assert conn.execute(sa.text("select 1")).scalar_one() == 1
        assert conn.execute(sa.text("show server_encoding")).scalar_one() == "UTF8"


def test_create_table_and_roundtrip(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("create table proposal (id serial primary key, args jsonb)"))
        conn.execute(
            sa.text("insert into proposal (args) values (cast(:a as jsonb))"), {"a": '{"x": 1}'}
        )
    with engine.connect() as conn:
        assert conn.execute(sa.text("select args->>'x' from proposal")).scalar_one() == "1"


def test_each_test_gets_a_fresh_database(engine: Engine) -> None:
    """A table created by another test is not visible here."""
    with engine.connect() as conn:
        tables = sa.inspect(conn).get_table_names()
    assert tables == []


def test_two_databases_are_distinct(
    postgres_url: str, pg_cluster: PostgresCluster, request: pytest.FixtureRequest
) -> None:
    other = pg_cluster.create_database(f"{make_url(postgres_url).database}_b")
    request.addfinalizer(lambda: pg_cluster.drop_database(make_url(other).database or ""))
    assert make_url(other).database != make_url(postgres_url).database
    first, second = sa.create_engine(postgres_url), sa.create_engine(other)
    try:
        with first.begin() as conn:
            conn.execute(sa.text("create table only_in_first (id int)"))
        with second.connect() as conn:
            assert "only_in_first" not in sa.inspect(conn).get_table_names()
            assert conn.execute(sa.text("select current_database()")).scalar_one() == (
                make_url(other).database
            )
    finally:
        first.dispose()
        second.dispose()


def test_drop_database_with_open_connections(pg_cluster: PostgresCluster) -> None:
    """Teardown must succeed even if a test leaked a pooled connection."""
    name = unique_database_name("leaky connection")
    eng = sa.create_engine(pg_cluster.create_database(name))
    with eng.connect() as conn:
        conn.execute(sa.text("select 1"))  # returned to the pool, still open
    pg_cluster.drop_database(name)
    with pg_cluster.connect() as conn:
        row = conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone()
    assert row is None
    eng.dispose()


def test_ledger_url_gives_working_engine(ledger_url: str, request: pytest.FixtureRequest) -> None:
    param = request.node.callspec.params["ledger_url"]
    backend = make_url(ledger_url).get_backend_name()
    assert backend == {"sqlite": "sqlite", "postgres": "postgresql"}[param]
    eng = sa.create_engine(ledger_url)
    try:
        with eng.begin() as conn:
            conn.execute(sa.text("create table t (id integer primary key, v text)"))
            conn.execute(sa.text("insert into t (id, v) values (1, 'ok')"))
        with eng.connect() as conn:
            assert conn.execute(sa.text("select v from t where id = 1")).scalar_one() == "ok"
    finally:
        eng.dispose()


def test_sqlite_url_points_into_tmp_path(sqlite_url: str, tmp_path: Path) -> None:
    assert sqlite_url == f"sqlite:///{tmp_path}/ledger.db"


def test_context_manager_cleans_up(pg_cluster: PostgresCluster) -> None:
    """A second, independent cluster starts, serves, and leaves nothing behind."""
    if pg_cluster.external:
        pytest.skip("SUPERVISOR_TEST_PG_URL is set: this run starts no local clusters")
    with PostgresCluster() as cluster:
        data_dir = cluster.data_dir
        assert data_dir is not None
        pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
        assert cluster.url() != pg_cluster.url()
        with cluster.connect() as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    assert not data_dir.parent.exists()
    assert not _pid_alive(pid)


def _pid_alive(pid: int) -> bool:
    """True if ``pid`` runs; a zombie (dead, not yet reaped by init) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
