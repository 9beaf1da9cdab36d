"""One open ledger transaction and how it runs statements: the base of
:class:`supervisor.store.repository.LedgerTx`.

The approval cycle's hot statements run on the driver connection directly (``sqlite3`` in
:mod:`supervisor.store.direct`, psycopg in :mod:`supervisor.store.direct_pg`); anything else
through Core or the ORM, on the same transaction. On PostgreSQL an audited write takes the
chain's lock (``pg_advisory_xact_lock``) with its first statement, in the same round trip when
that statement is a hot read, and :meth:`TransactionBase.pipelined` sends a step's writes in one
pipeline.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlmodel import Session

from supervisor.ledger.models import AuditRecord
from supervisor.store.direct import DirectResult, DirectStatement, RowsNotMatched

if TYPE_CHECKING:
    from supervisor.store.direct_pg import PgDirectStatement, PgPipeline

AUDIT_LOCK_KEY = 0x5355_5056_4155_4431  # "SUPVAUD1"
_ADVISORY_LOCK = sa.text("SELECT pg_advisory_xact_lock(:key)")


@dataclass(frozen=True)
class GuardCondition:
    """A condition a late-locking write's read depends on, beyond audit subjects: SQL that is
    true while what was read still holds, with the types of its bound parameters."""

    sql: str
    types: tuple[tuple[str, Any], ...] = ()


_GUARDS: dict[tuple[int, tuple[GuardCondition, ...]], Any] = {}
"""The guard statement for n subjects and those conditions (:func:`_guard_statement`)."""


def _guard_statement(count: int, conditions: tuple[GuardCondition, ...] = ()) -> Any:
    """One statement that fails on the server (``LOST_RACE``) unless each of ``count``
    subjects' newest audit seq is still the one read (``g_subject_<i>``, ``g_seq_<i>``; 0: no
    record) and every condition holds: sent right after the chain lock by a write whose first
    reads ran before it (one statement, not one per kind of guard: each costs the server a
    parse, a plan and an execution while the lock is held)."""
    key = (count, conditions)
    statement = _GUARDS.get(key)
    if statement is None:
        from supervisor.store.direct_pg import lost_race_unless  # psycopg only on PostgreSQL

        unchanged = [
            f"(SELECT coalesce(max(seq), 0) FROM audit WHERE subject = :g_subject_{i}) = :g_seq_{i}"
            for i in range(count)
        ]
        holds = " AND ".join([*unchanged, *(f"({condition.sql})" for condition in conditions)])
        binds = [sa.bindparam(name, type_=type_) for c in conditions for name, type_ in c.types]
        statement = _GUARDS[key] = sa.text(f"SELECT {lost_race_unless(holds)}").bindparams(*binds)
    return statement


# Hot statements compiled once for the driver (None: this shape runs through Core), keyed by
# the dialect, the prebuilt statement's identity (they live as long as their module) and, for
# an INSERT, the columns given.
_DIRECT: dict[tuple[str, int, tuple[str, ...] | None], DirectStatement | None] = {}
_DIRECT_DIALECTS = ("sqlite", "postgresql")


def _direct(
    dialect: str, statement: Any, params: dict[str, Any] | None, insert: bool
) -> DirectStatement | None:
    """``statement`` compiled for the driver (once), or ``None``: it runs through Core."""
    if dialect not in _DIRECT_DIALECTS:
        return None
    keys = tuple(params) if insert and params is not None else None
    key = (dialect, id(statement), keys)
    try:
        return _DIRECT[key]
    except KeyError:
        pass
    if dialect == "sqlite":
        compile_for: type[DirectStatement] = DirectStatement
    else:
        from supervisor.store.direct_pg import PgDirectStatement  # psycopg only on PostgreSQL

        compile_for = PgDirectStatement
    try:
        direct: DirectStatement | None = compile_for(statement, keys)
    except ValueError:
        direct = None
    _DIRECT[key] = direct
    return direct


def _compiled(statement: Any) -> DirectStatement:
    """A prebuilt PostgreSQL statement compiled for the driver (the lock and guards are)."""
    direct = _direct("postgresql", statement, None, False)
    assert direct is not None
    return direct


class TransactionBase:
    """One open transaction on the ledger: its connections and how statements run on it."""

    def __init__(
        self,
        connection: sa.Connection | None,
        dialect: str,
        *,
        driver: sqlite3.Connection | None = None,
        join: Callable[[], sa.Connection] | None = None,
        lock: bool = False,
        late: bool = False,
    ) -> None:
        """Wrap one open transaction.

        Args:
            connection: The transaction's Core connection; or ``None`` on SQLite, where the
                transaction runs on ``driver`` and ``join`` opens a Core connection inside
                it when a statement needs one.
            lock: PostgreSQL: take the audit chain's lock (``pg_advisory_xact_lock``) before
                the transaction's first statement; when that statement is a hot read, in the
                same round trip (:func:`~supervisor.store.direct_pg.read_together`).
            late: With ``lock``: the write's first reads (:meth:`_hot_before_lock`) run before
                the lock, each naming the audit subjects its answer depends on
                (:meth:`_guard`); the lock is taken with the first other statement, usually the
                write pipeline, followed by a guard that aborts the transaction
                (:class:`RowsNotMatched`) if any of those subjects gained an audit record
                since. The lock is then held only while the server runs the writes, not across
                the client's round trips. The caller reruns the step with the lock taken
                first when the guard misses.
        """
        self._connection = connection
        self._join = join
        self.dialect = dialect
        self.last_audit_seq: int | None = None
        self.traced = False
        """Trace events were inserted: on PostgreSQL the commit notifies the trace channel."""
        self._session: Session | None = None
        self._tip: tuple[int, str] | None = None
        self._driver: Any = driver
        self._pipelining = False
        self._pipeline: PgPipeline | None = None
        self._lock_pending = lock
        self.late = late and lock
        """The chain lock waits for the write's first statement that is not a guarded read."""
        self._guards: dict[str, int] = {}
        self._conditions: dict[GuardCondition, dict[str, Any]] = {}
        self._trail: tuple[str, list[AuditRecord]] | None = None
        self._committed = False
        """Committed with its last :meth:`pipelined` block: no statement may follow."""

    @property
    def connection(self) -> sa.Connection:
        """The Core connection this transaction runs on (on SQLite opened on first use)."""
        if self._pipeline is not None:
            self._end_pipeline()
        connection = self._core_connection()
        if self._lock_pending:
            if self.late:  # the lock and its guard, on the driver under this connection
                self.lock_now()
            else:
                self._lock_pending = False
                connection.execute(_ADVISORY_LOCK, {"key": AUDIT_LOCK_KEY})
        return connection

    def _core_connection(self) -> sa.Connection:
        self._check_open()
        connection = self._connection
        if connection is None:
            assert self._join is not None
            connection = self._connection = self._join()
        return connection

    @property
    def session(self) -> Session:
        """An ORM session on this transaction, opened on first use (hot paths use Core)."""
        if self._pipeline is not None:
            self._end_pipeline()
        if self._session is None:
            self._session = Session(bind=self.connection)
        return self._session

    @contextmanager
    def pipelined(self, *, commit: bool = False) -> Iterator[None]:
        """Run the writes of this block without waiting for each, where the engine allows it.

        On PostgreSQL the block's hot writes (proposal and execution INSERTs and conditional
        UPDATEs, audit records) are sent in psycopg's pipeline mode and their results read
        once, at the block's end or before the first statement whose result is needed: one
        round trip for the block instead of one per statement, while the chain lock is held.
        SQLite runs them as they come.

        In the block, a conditional proposal or execution UPDATE must match its one row (it
        returns 1); the block raises :class:`RowsNotMatched` otherwise (on SQLite at once),
        and the caller must not commit: let the error leave the write, or raise another. On
        PostgreSQL the transaction is then already rolled back: a read to explain the miss
        runs in a new one.

        Args:
            commit: The block is the transaction's last work: on PostgreSQL, when its writes
                are still in the pipeline and nothing is left for the commit to do (no ORM
                session, no trace appended), the ``COMMIT`` is sent after them, in the same
                round trip, and the transaction takes no statement after the block. A miss
                makes the server refuse the write, so nothing is committed.

        Raises:
            RowsNotMatched: A conditional UPDATE matched no row.
        """
        if self._pipelining:
            yield
            return
        self._pipelining = True
        try:
            yield
            if self._pipeline is not None:
                self._end_pipeline(
                    commit=commit and self._session is None and not self.traced
                )  # fmt: skip
        except BaseException:
            pipeline, self._pipeline = self._pipeline, None
            if pipeline is not None:
                pipeline.abandon()
            raise
        finally:
            self._pipelining = False

    def _end_pipeline(self, *, commit: bool = False) -> None:
        """Wait for what the pipeline sent and leave pipeline mode (``commit``: with the
        transaction's ``COMMIT``, after which it takes no statement).

        Raises:
            RowsNotMatched: A conditional UPDATE sent in it matched no row.
        """
        pipeline, self._pipeline = self._pipeline, None
        assert pipeline is not None
        try:
            pipeline.finish(commit=commit)
        except sa.exc.DBAPIError as error:
            self._invalidate_if_lost(error)
            raise
        self._committed = commit

    def _close(self, *, flush: bool) -> None:
        session, self._session = self._session, None
        if session is not None:
            try:
                if flush:
                    session.flush()
            finally:
                session.close()

    def _settled_driver(self) -> Any:
        """The driver's connection, for a caller that runs its own statements on it (the trace
        ``COPY``): what was pipelined is read first and the chain lock, if still to take, is
        taken. This module's statement runners use :meth:`_driver_connection`, which does
        neither, and do both themselves."""
        if self._pipeline is not None:
            self._end_pipeline()
        connection = self._session.connection() if self._session is not None else self.connection
        return connection.connection.driver_connection

    def _hot(
        self,
        statement: Any,
        params: dict[str, Any] | None = None,
        *,
        insert: bool = False,
        send: bool = False,
        expect: int | None = None,
    ) -> DirectResult | sa.CursorResult[Any]:
        """Run one of this module's prebuilt hot statements on the driver directly: ``sqlite3``
        (:mod:`supervisor.store.direct`) or psycopg (:mod:`supervisor.store.direct_pg`); a
        statement that needs per-execution work runs through Core. ``insert``: the statement is
        an INSERT compiled for the keys of ``params``.

        In a :meth:`pipelined` block: ``send``, a write whose rows are not read, goes into the
        pipeline on PostgreSQL (its result is empty, its rowcount ``expect`` or -1); ``expect``
        is the rowcount the write must have, checked as :meth:`pipelined` says. Any other
        statement ends the pipeline first."""
        if self._pipelining:
            return self._hot_in_block(statement, params, insert, send, expect)
        dialect = self.dialect
        direct = _direct(dialect, statement, params, insert)
        if direct is None:
            return self._execute(statement, params)
        driver = self._driver_connection()
        if dialect == "sqlite":
            return direct.execute(driver, params)
        try:
            if self._lock_pending:
                return self._locked_read(driver, direct, params)
            return direct.execute(driver, params)
        except sa.exc.DBAPIError as error:
            self._invalidate_if_lost(error)
            raise

    def _locked_read(
        self, driver: Any, direct: DirectStatement, params: dict[str, Any] | None
    ) -> DirectResult:
        """The chain lock and the transaction's first statement, in one round trip."""
        return self._read_together(driver, [(direct, params or {})])[0]

    def _read_together(
        self,
        driver: Any,
        reads: list[tuple[DirectStatement, dict[str, Any]]],
        *,
        before_lock: bool = False,
    ) -> list[DirectResult]:
        """PostgreSQL: ``reads`` in one round trip, after the chain lock if still to take
        (``before_lock``: guarded reads of a late-locking write, without it).

        Raises:
            RowsNotMatched: The lock's guard missed (the transaction is rolled back).
        """
        from supervisor.store.direct_pg import read_together

        lock = [] if before_lock else self._take_lock()
        together = read_together(driver, cast("list[tuple[PgDirectStatement, Any]]", lock + reads))
        return together[len(lock) :]

    def _take_lock(self) -> list[tuple[DirectStatement, dict[str, Any]]]:
        """PostgreSQL: the chain lock's statement and parameters (and, for a late lock, its
        guard), to send before the next statement, if the lock is still to take (it is then
        counted as taken); else nothing."""
        if not self._lock_pending:
            return []
        self._lock_pending = False
        taken: list[tuple[Any, dict[str, Any]]] = [(_ADVISORY_LOCK, {"key": AUDIT_LOCK_KEY})]
        if self.late:
            self._forget_unguarded()
            if self._guards or self._conditions:
                params: dict[str, Any] = {}
                for i, (subject, seq) in enumerate(self._guards.items()):
                    params[f"g_subject_{i}"] = subject
                    params[f"g_seq_{i}"] = seq
                for values in self._conditions.values():
                    params |= values
                statement = _guard_statement(len(self._guards), tuple(self._conditions))
                taken.append((statement, params))
        return [(_compiled(statement), params) for statement, params in taken]

    @property
    def reads_before_lock(self) -> bool:
        """A late-locking write whose lock is still to take: its guarded reads run now."""
        return self.late and self._lock_pending

    def _guard(self, subject: str, seq: int) -> None:
        """What was just read before the lock depends on ``subject``, whose newest audit seq
        was ``seq``: the write commits only if it still is when the lock is taken. (A read
        that had to take the lock itself needs no guard.)"""
        if self.reads_before_lock:
            self._guards.setdefault(subject, seq)

    def _guard_with(self, condition: GuardCondition, params: dict[str, Any]) -> None:
        """What was just read before the lock holds only while ``condition`` does (with
        ``params``; their names must not clash with another guard's): it is checked with the
        subjects' guard, after the lock. (A read that had to take the lock itself needs no
        guard.)"""
        if self.reads_before_lock and self._conditions.setdefault(condition, params) != params:
            raise ValueError("one guard condition with two sets of parameters")

    def lock_now(self) -> None:
        """Take the chain lock now if it is still to take (a late lock with its guard), before
        work that must not be repeated: a guard that misses raises :class:`RowsNotMatched`
        here, and after this the write cannot miss because of what it read before."""
        if self._lock_pending:
            self._read_together(self._driver_connection(), [])

    def _forget_unguarded(self) -> None:
        """The late lock is being taken: drop what was read before it that no guard covers,
        so it is read again under the lock if needed (see ``LedgerTx``)."""

    def _hot_before_lock(
        self, statement: Any, params: dict[str, Any] | None = None
    ) -> DirectResult | sa.CursorResult[Any]:
        """A hot read that a late-locking write runs before the lock (the caller guards what
        it depends on); any other transaction runs it as :meth:`_hot`."""
        if not self.reads_before_lock or self._pipelining:
            return self._hot(statement, params)
        direct = _direct(self.dialect, statement, params, False)
        if direct is None:
            return self._hot(statement, params)
        driver = self._driver_connection()
        try:
            if self.dialect == "postgresql":  # with the transaction's BEGIN: one round trip
                return self._read_together(driver, [(direct, params or {})], before_lock=True)[0]
            return direct.execute(driver, params)
        except sa.exc.DBAPIError as error:
            self._invalidate_if_lost(error)
            raise

    def _hot_together(
        self, reads: list[tuple[Any, dict[str, Any]]], *, before_lock: bool = False
    ) -> list[DirectResult | sa.CursorResult[Any]]:
        """Several hot reads; on PostgreSQL in one round trip (with the chain lock if this is
        the write's first statement, unless ``before_lock``: guarded reads of a late-locking
        write), elsewhere one after the other."""
        compiled = [_direct(self.dialect, statement, params, False) for statement, params in reads]
        if self.dialect != "postgresql" or self._pipelining or None in compiled:
            return [self._hot(statement, params) for statement, params in reads]
        driver = self._driver_connection()
        try:
            return list(
                self._read_together(
                    driver,
                    [(cast(DirectStatement, direct), params)
                     for direct, (_, params) in zip(compiled, reads, strict=True)],
                    before_lock=before_lock and self.reads_before_lock,
                )
            )  # fmt: skip
        except sa.exc.DBAPIError as error:
            self._invalidate_if_lost(error)
            raise

    def _hot_in_block(
        self,
        statement: Any,
        params: dict[str, Any] | None,
        insert: bool,
        send: bool,
        expect: int | None,
    ) -> DirectResult | sa.CursorResult[Any]:
        """:meth:`_hot` in a :meth:`pipelined` block."""
        if send and self.dialect == "postgresql":
            direct = _direct("postgresql", statement, params, insert)
            if direct is not None:
                pipeline = self._pipeline
                if pipeline is None:
                    from supervisor.store.direct_pg import PgPipeline

                    pipeline = self._pipeline = PgPipeline(self._driver_connection())
                    for lock, key in self._take_lock():
                        pipeline.send(cast("PgDirectStatement", lock), key, one_row=False)
                assert expect in (None, 1), "a pipelined write requires one row or none"
                pipeline.send(cast("PgDirectStatement", direct), params, one_row=expect == 1)
                return DirectResult([], -1 if expect is None else expect)
        if self._pipeline is not None:
            self._end_pipeline()
        self._pipelining = False
        try:
            result = self._hot(statement, params, insert=insert)
        finally:
            self._pipelining = True
        if expect is not None and result.rowcount != expect:
            raise RowsNotMatched("a conditional UPDATE matched no row")
        return result

    def _driver_connection(self) -> Any:
        """The driver's connection under this transaction (``sqlite3`` or psycopg), as it is:
        a pipeline may be open and the chain lock still to take (see :meth:`_settled_driver`)."""
        self._check_open()
        driver = self._driver
        if driver is None:
            connection = (
                self._session.connection() if self._session is not None
                else self._core_connection()
            )  # fmt: skip
            driver = self._driver = connection.connection.driver_connection
        return driver

    def _check_open(self) -> None:
        if self._committed:
            raise RuntimeError(
                "this transaction was committed with its last pipelined block "
                "(pipelined(commit=True)): run every statement before that block"
            )

    def _invalidate_if_lost(self, error: sa.exc.DBAPIError) -> None:
        """What Core does for a lost connection: never hand it back to the pool."""
        connection = self._core_connection()
        if connection.dialect.is_disconnect(cast(Any, error.orig), self._driver, None):
            error.connection_invalidated = True
            connection.invalidate(error.orig)

    def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]:
        if self._pipeline is not None:
            self._end_pipeline()
        if self._session is not None:
            return cast(sa.CursorResult[Any], self._session.connection().execute(statement, params))
        return self.connection.execute(statement, params)
