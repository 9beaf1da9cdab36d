"""Fixtures shared by the whole test suite.

Ledger URLs:
- ``sqlite_url``: a fresh SQLite file per test.
- ``postgres_url``: a fresh database per test on a real PostgreSQL server (``pg_cluster``).
- ``ledger_url``: parametrised over both engines; PostgreSQL starts only if a test needs it.

Ledgers on those URLs (a module overrides any of them when it needs something else):
- ``clock``: a ``ManualClock`` the test advances.
- ``engine`` and ``ledger``: an engine on ``ledger_url`` and an ``ApprovalLedger`` on it and
  ``clock``, so a ledger test runs on both engines.
- ``provider``: a ``SQLModelProvider`` on ``sqlite_url``.

PostgreSQL is a throwaway cluster started once per session (see tests/support/postgres.py), or
the server named by ``$SUPERVISOR_TEST_PG_URL``. Tests that use it carry the ``postgres`` mark,
so ``-m "not postgres"`` runs without it. Missing server binaries skip those tests locally but
fail them under ``CI=true``, so CI cannot pass by silently skipping.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from support.postgres import PostgresCluster, PostgresNotInstalled, unique_database_name
from support.required import unavailable

from supervisor.ledger import ManualClock
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.engine import create_ledger_engine
from supervisor.store.provider import SQLModelProvider

_POSTGRES_FIXTURES = {"pg_cluster", "postgres_url"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses PostgreSQL fixtures with ``postgres``."""
    for item in items:
        if _POSTGRES_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(autouse=True)
def resume_allowlist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Each test's own resume allowlist file (``SUPERVISOR_ALLOWLIST``), so ``supervisor run``
    adding its factory never writes the user's config folder, and tests start from none."""
    path = tmp_path_factory.mktemp("allowlist") / "allowlist"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SUPERVISOR_ALLOWLIST", str(path))
        yield path


@pytest.fixture(scope="session", autouse=True)
def table_validators_never_built() -> Iterator[None]:
    """After the whole session, no ledger table class has had its pydantic validator built.

    ``LedgerTable`` defers building it (a console starts faster), which is safe only while
    nothing validates or serializes a table row through pydantic: a deferred build that two
    threads start together is not thread-safe in pydantic. Every test's code path is checked.
    """
    yield
    from supervisor.store.tables import LedgerTable

    def subclasses(cls: type[LedgerTable]) -> Iterator[type[LedgerTable]]:
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    built = sorted(cls.__name__ for cls in subclasses(LedgerTable) if cls.__pydantic_complete__)
    assert not built, f"a table class's pydantic validator was built: {built}"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """One PostgreSQL server for the session, stopped and deleted at the end."""
    cluster = PostgresCluster.from_env()
    try:
        cluster.start()
    except PostgresNotInstalled as exc:
        # the message says to run `bash .ci/system-deps.sh`
        unavailable(f"PostgreSQL unavailable: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(pg_cluster: PostgresCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """SQLAlchemy URL (postgresql+psycopg://...) of a new, empty database, dropped afterwards."""
    name = unique_database_name(request.node.name)
    url = pg_cluster.create_database(name)
    try:
        yield url
    finally:
        with contextlib.suppress(Exception):
            pg_cluster.drop_database(name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """SQLAlchemy URL of a new SQLite file: sqlite:///<tmp_path>/ledger.db."""
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def ledger_url(request: pytest.FixtureRequest) -> str:
    """A fresh ledger URL on each engine; PostgreSQL is requested lazily, only for its param."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engine(ledger_url: str) -> Iterator[Engine]:
    """A ledger engine on ``ledger_url``, disposed afterwards."""
    eng = create_ledger_engine(ledger_url)
    try:
        yield eng
    finally:
        eng.dispose()


@pytest.fixture
def ledger(engine: Engine, clock: ManualClock) -> Iterator[ApprovalLedger]:
    """An ``ApprovalLedger`` on ``engine`` and ``clock``; its change feed is closed afterwards."""
    service = ApprovalLedger(engine, clock)
    try:
        yield service
    finally:
        service.close()


@pytest.fixture
def provider(sqlite_url: str) -> Iterator[SQLModelProvider]:
    """A ``SQLModelProvider`` on a fresh SQLite file, closed afterwards."""
    with SQLModelProvider(sqlite_url) as opened:
        yield opened
