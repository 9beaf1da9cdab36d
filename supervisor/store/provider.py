"""``SQLModelProvider``: the memory provider that agents, toolboxes and the supervisor share."""

from __future__ import annotations

import threading

from sqlalchemy.engine import Engine

from supervisor.ledger.clock import Clock
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.ledger.service import ApprovalLedger
from supervisor.redact import KnownSecrets
from supervisor.store.engine import Synchronous, create_ledger_engine, resolve_url
from supervisor.store.migrate import check_schema, ensure_schema
from supervisor.store.repository import Repository


class SQLModelProvider:
    """A durable ledger behind one SQLAlchemy URL (SQLite file or PostgreSQL).

    Nothing is opened until first use; then the engine is created, migrations are applied
    (under a cross-process lock) and ``policy`` is checked against the stored one.

    Args:
        url: SQLAlchemy URL; ``None`` means ``SUPERVISOR_DB``, else the embedded SQLite file in
            ``SUPERVISOR_HOME`` or the user data directory.
        clock: Time source for the ledger (tests pass a ``ManualClock``).
        policy: The approval policy this process expects. The ledger stores its policy and
            every process that opens it enforces the stored one: on a ledger with none this
            one is stored (audited); a different stored one makes opening fail with
            ``PolicyMismatch`` (change it with ``supervisor policy apply``); ``None`` uses the
            stored policy.
        synchronous: SQLite durability level (``NORMAL`` or ``FULL``).
        read_only: Open without writing anything (SQLite ``query_only``, ``mode=ro`` on
            read-only storage; PostgreSQL read-only transactions; no migrations): for commands
            that only read, and ledgers on read-only storage. Implies ``must_exist``; writes
            fail with ``LedgerUnavailable``.
        must_exist: Refuse (``LedgerNotFound`` / ``NotALedger``) a ledger that does not exist
            yet instead of creating it.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        policy: ApprovalPolicy | None = None,
        synchronous: Synchronous | None = None,
        read_only: bool = False,
        must_exist: bool = False,
    ) -> None:
        self.url = resolve_url(url)
        self._clock = clock
        self._policy = policy
        self._synchronous = synchronous
        self.read_only = read_only
        self.must_exist = must_exist or read_only
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self._repository: Repository | None = None
        self._ledger: ApprovalLedger | None = None
        self.trace_secrets = KnownSecrets()
        """Secret values (API keys, endpoint credentials...) replaced in every trace event
        written through this provider's ledger; agents add theirs when they are built."""

    def _open(self) -> ApprovalLedger:
        with self._lock:
            if self._ledger is None:
                engine = create_ledger_engine(
                    self.url, synchronous=self._synchronous, read_only=self.read_only,
                    must_exist=self.must_exist,
                )  # fmt: skip
                try:
                    if self.read_only:
                        check_schema(engine)
                    else:
                        ensure_schema(engine, create=not self.must_exist)
                    repository = Repository(engine)
                    ledger = ApprovalLedger(repository, self._clock, policy=self._policy)
                except BaseException:
                    engine.dispose()
                    raise
                self._engine = engine
                self._repository = repository
                self._ledger = ledger
                self._ledger.trace_secrets = self.trace_secrets
            return self._ledger

    @property
    def ledger(self) -> ApprovalLedger:
        """The approval ledger (opens the database on first use)."""
        return self._ledger or self._open()

    @property
    def repository(self) -> Repository:
        """The repository over the ledger's engine (opens the database on first use)."""
        self.ledger  # noqa: B018 - opens on first use
        assert self._repository is not None
        return self._repository

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (opens the database on first use)."""
        return self.repository.engine

    def close(self) -> None:
        """Close the change feed and dispose of the engine; the provider can be reopened."""
        with self._lock:
            if self._ledger is not None:
                self._ledger.close()
            if self._engine is not None:
                self._engine.dispose()
            self._engine = None
            self._repository = None
            self._ledger = None

    def __enter__(self) -> SQLModelProvider:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        from sqlalchemy import make_url

        return f"SQLModelProvider({make_url(self.url).render_as_string(hide_password=True)!r})"
