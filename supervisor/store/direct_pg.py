"""Prebuilt hot-path statements run on PostgreSQL's driver connection (psycopg), past
SQLAlchemy's execution.

On PostgreSQL every statement of an audited write runs while the write holds the audit chain's
lock, so the client's own time per statement is time every other writer of the team waits.
Through ``Connection.execute`` a statement of the approval cycle costs ~50-100 us of Python on
top of the round trip (execution context, parameter dicts, the result proxy, and psycopg's
``cursor.description``: a ``Column`` object per column, ~50 for a write's first read).
:class:`PgDirectStatement` compiles the prebuilt statement once for the psycopg dialect with
positional parameters and runs it with a psycopg cursor on the transaction's own connection,
keeping what SQLAlchemy would do per execution: the bind processors (``UTCDateTime`` checks and
converts to UTC) and result processors (back to UTC). Driver errors are wrapped as SQLAlchemy
wraps them, with the parameters hidden, so :func:`~supervisor.store.errors.translate_errors`
classifies them the same way; a lost connection is invalidated by the caller
(:meth:`~supervisor.store.repository.LedgerTx._hot`).

The statements go to the server on libpq directly (``psycopg.pq``), not through psycopg
cursors: a cursor's per-statement Python (its generators, query conversion, prepared-statement
bookkeeping, a flush per statement in pipeline mode) cost the client more than the server's
work for the statement, on every step of every process of a team. What psycopg does per
statement is kept: values are adapted and rows loaded by psycopg's ``Transformer``, the
transaction begins as psycopg would begin it, errors become psycopg's exceptions, and each
statement is prepared on its connection once (:class:`_Wire`). psycopg itself prepares nothing
on a ledger's connections (``prepare_threshold=None``, ``create_ledger_engine``): its cache
would ``DEALLOCATE ALL`` at a rollback after an error, these statements with its own.
"""

from __future__ import annotations

import itertools
import re
import select
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import psycopg
import sqlalchemy as sa
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from supervisor.store.direct import DirectResult, DirectStatement, RowsNotMatched

_DIALECT = psycopg_dialect.dialect(paramstyle="format")  # type: ignore[no-untyped-call]
_IDLE = pq.TransactionStatus.IDLE
_IN_TRANSACTION = pq.TransactionStatus.INTRANS
_IN_ERROR = pq.TransactionStatus.INERROR
_PIPELINE_OFF = pq.PipelineStatus.OFF
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_FATAL_ERROR = pq.ExecStatus.FATAL_ERROR
_PIPELINE_SYNC = pq.ExecStatus.PIPELINE_SYNC
_SQLSTATE = pq.DiagnosticField.SQLSTATE
LOST_RACE = (
    "supervisor: a write lost a race (what the step read changed before it took the audit "
    "lock, or its row no longer matched); nothing was written and the step runs again"
)
"""The text of the error a guard or a one-row write raises on the server when what it checks
no longer holds: an invalid integer, so the line the server logs says what happened (a
division by zero once did, and read like a fault). It aborts the transaction, so a ``COMMIT``
sent after it in the same pipeline is not run."""


def lost_race_unless(condition: str) -> str:
    """SQL for an integer that is 1 unless ``condition`` is false, when evaluating it fails
    with :data:`LOST_RACE` (SQLSTATE 22P02). A ``NULL`` condition passes, as ``1 / NULL``
    did. The cast is of a ``CASE`` on a non-constant condition, so the server runs it per
    execution and never folds the failing branch while planning."""
    return f"(CASE WHEN ({condition}) IS NOT FALSE THEN '1' ELSE '{LOST_RACE}' END)::int"


def is_lost_race(error: BaseException) -> bool:
    """``error`` is what :func:`lost_race_unless` raises (not any other bad integer)."""
    return isinstance(error, psycopg.errors.InvalidTextRepresentation) and LOST_RACE in str(error)


_LOST_STATEMENTS = (b"26000", b"0A000")
"""No such prepared statement (the session lost it), or its cached plan no longer fits the
schema: the connection's statements are prepared again."""


class PgDirectStatement(DirectStatement):
    """One prebuilt statement compiled for psycopg (``%s`` parameters), run on the driver."""

    __slots__ = ()

    dialect = _DIALECT
    utc_processors = (None, None)

    def execute(self, driver: Any, params: Mapping[str, Any] | None) -> DirectResult:
        """Run on ``driver`` (a ``psycopg.Connection``, inside the caller's transaction).

        Raises:
            sqlalchemy.exc.DBAPIError: What the driver raised, wrapped as SQLAlchemy wraps it.
        """
        trip = RoundTrip(driver)
        try:
            trip.add(self, params)
            return trip.run()[0]
        except psycopg.Error as error:
            trip.abandon_unsent()
            raise wrapped_error(error, self.sql) from error


def wrapped_error(error: psycopg.Error, statement: str) -> sa.exc.StatementError:
    """``error`` as SQLAlchemy wraps driver errors, parameters hidden."""
    return sa.exc.DBAPIError.instance(statement, None, error, psycopg.Error, hide_parameters=True)


def _one_row_or_fail(sql: str) -> str:
    """``sql``, a write without ``RETURNING`` that must change exactly one row, as a statement
    that fails on the server (:data:`LOST_RACE`) when it changes another number of rows: the
    transaction is then aborted, so a ``COMMIT`` sent after it in the same pipeline is not
    run."""
    one_row = lost_race_unless("count(*) = 1")
    return f"WITH changed AS ({sql} RETURNING 1) SELECT {one_row} FROM changed"


class _Wire:
    """What this module keeps for one psycopg connection: the statements it prepared there
    (libpq text and parameter types -> name) and a ``Transformer`` that adapts values and
    loads rows as psycopg's cursors would."""

    __slots__ = ("prepared", "transformer")

    def __init__(self, driver: psycopg.Connection[Any]) -> None:
        self.prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        self.transformer = Transformer(driver)


_WIRE = "_supervisor_wire"
"""The attribute of a psycopg connection that holds its :class:`_Wire`: it lives and dies
with the connection (a table keyed by connection would keep every closed one alive, its
``Transformer`` referring back to it)."""
_NAMES = itertools.count()
_PLACEHOLDER = re.compile(r"%%|%s")


def _wire(driver: psycopg.Connection[Any]) -> _Wire:
    wire: _Wire | None = getattr(driver, _WIRE, None)
    if wire is None:
        wire = _Wire(driver)
        setattr(driver, _WIRE, wire)
    return wire


def forget_prepared(driver: Any) -> None:
    """Prepare ``driver``'s statements again from the next round trip on (its session lost
    them, or they no longer fit the schema)."""
    setattr(driver, _WIRE, None)


def _numbered(sql: str) -> bytes:
    """``sql`` with ``%s`` parameters (``%%``: a literal ``%``) as libpq's ``$1``, ``$2``..."""
    count = itertools.count(1)
    return _PLACEHOLDER.sub(lambda m: "%" if m.group() == "%%" else f"${next(count)}", sql).encode()


_LIBPQ_TEXT: dict[str, bytes] = {}
"""Each statement's SQL (``%s`` parameters) -> its text for libpq."""


def _begin_command(driver: psycopg.Connection[Any]) -> bytes:
    """The ``BEGIN`` psycopg sends for ``driver``'s transaction settings."""
    parts = [b"BEGIN"]
    if driver.isolation_level is not None:
        parts.append(b"ISOLATION LEVEL " + driver.isolation_level.name.replace("_", " ").encode())
    if driver.read_only is not None:
        parts.append(b"READ ONLY" if driver.read_only else b"READ WRITE")
    if driver.deferrable is not None:
        parts.append(b"DEFERRABLE" if driver.deferrable else b"NOT DEFERRABLE")
    return b" ".join(parts)


class RoundTrip:
    """Statements sent together in libpq's pipeline mode and their results read once: one
    round trip, whatever their number.

    The first statement of a transaction is preceded by its ``BEGIN`` (as psycopg would send
    it; none in autocommit), and a statement not yet prepared on the connection by its
    ``PREPARE`` (remembered once the server accepted it: a ``PREPARE`` skipped because an
    earlier statement failed is sent again next time). The server runs them in order; after
    a failed one it skips the rest up to the round trip's end, and :meth:`run` raises the
    first failure as psycopg's exception (the transaction is then aborted: roll it back).
    """

    __slots__ = (
        "_began", "_commands", "_driver", "_items", "_pending", "_pgconn", "_statements",
        "_synced", "_wire",
    )  # fmt: skip

    def __init__(self, driver: psycopg.Connection[Any]) -> None:
        self._driver = driver
        self._pgconn = driver.pgconn
        self._wire = _wire(driver)
        self._statements: list[PgDirectStatement] = []
        self._commands: list[int | bytes | None] = []
        """Per command sent: the index of the statement whose result it is, the name it
        prepares, or ``None`` (``BEGIN``, ``COMMIT``)."""
        self._pending: dict[bytes, tuple[bytes, tuple[int, ...]]] = {}
        """Names prepared in this round trip -> what they prepare."""
        self._items: list[tuple[Any, ...]] = []
        """What was added, to run it again (see :meth:`run`)."""
        self._began = False
        """This round trip begins its transaction (or runs in autocommit)."""
        self._synced = 0
        """1: its sync was sent; 2: the sync's result was read (all results are in)."""

    def _start(self) -> None:
        pgconn = self._pgconn
        driver = self._driver
        self._began = driver.autocommit or pgconn.transaction_status == _IDLE
        pgconn.enter_pipeline_mode()
        if not driver.autocommit and pgconn.transaction_status == _IDLE:
            pgconn.send_query_params(_begin_command(driver), None)
            self._commands.append(None)

    def add(self, statement: PgDirectStatement, params: Mapping[str, Any] | None,
            *, sql: str | None = None) -> None:  # fmt: skip
        """Queue ``statement`` with ``params`` (``sql``: its text, if not ``statement.sql``;
        the parameters stay the same)."""
        text = sql or statement.sql
        query = _LIBPQ_TEXT.get(text)
        if query is None:
            query = _LIBPQ_TEXT[text] = _numbered(text)
        values = statement.parameters(params)
        transformer = self._wire.transformer
        dumped = transformer.dump_sequence(values, [PyFormat.AUTO] * len(values))
        types = tuple(transformer.types or ())
        formats = transformer.formats
        key = (query, types)
        pgconn = self._pgconn
        if not self._commands:
            self._start()
        name = self._wire.prepared.get(key)
        if name is None:
            name = b"_sv_%d" % next(_NAMES)
            pgconn.send_prepare(name, query, param_types=types)
            self._commands.append(name)
            self._pending[name] = key
        pgconn.send_query_prepared(name, dumped, param_formats=formats)
        self._commands.append(len(self._statements))
        self._statements.append(statement)
        self._items.append((statement, params, sql))

    def add_command(self, command: bytes) -> None:
        """Queue a command without parameters or rows (``COMMIT``)."""
        if not self._commands:
            self._start()
        self._pgconn.send_query_params(command, None)
        self._commands.append(None)
        self._items.append((command,))

    def run(self) -> list[DirectResult]:
        """Send what was queued, wait for every result and leave pipeline mode.

        Returns:
            Each statement's result, in the order they were added.

        Raises:
            psycopg.Error: The first statement that failed (the transaction is aborted), or
                the connection failed (it is closed: the pool will not hand it out again).
        """
        if not self._commands:
            return []
        failed, results = self._drain_or_abandon()
        if failed is not None:
            if failed.error_field(_SQLSTATE) in _LOST_STATEMENTS:
                forget_prepared(self._driver)
                if self._began:  # nothing before it in its transaction: run it again
                    return self._again()
            raise psycopg.errors.error_from_result(failed, encoding=self._driver.info.encoding)
        return self._loaded(results)

    def _drain_or_abandon(self) -> tuple[pq.abc.PGresult | None, list[pq.abc.PGresult | None]]:
        try:
            return self._drain()
        except BaseException:
            self._settle(cancel=True)
            raise

    def _loaded(self, results: list[pq.abc.PGresult | None]) -> list[DirectResult]:
        """Each statement's result with its rows loaded as psycopg's cursor would."""
        transformer = self._wire.transformer
        done: list[DirectResult] = []
        for statement, result in zip(self._statements, results, strict=True):
            assert result is not None
            rowcount = result.command_tuples
            raw: list[Any] = []
            if statement.returns_rows and result.status == _TUPLES_OK:
                transformer.set_pgresult(result)
                raw = transformer.load_rows(0, result.ntuples, tuple)
            done.append(statement.result(raw, -1 if rowcount is None else rowcount))
        return done

    def _again(self) -> list[DirectResult]:
        """Run this round trip once more, its statements prepared anew: the session lost what
        was prepared (a ``DEALLOCATE ALL`` or ``DISCARD ALL`` sent by others on it, a pooler
        that swapped its server connection) or the schema changed under a statement. Only a
        round trip that began its transaction is run again, after rolling it back."""
        rollback_keeping_statements(self._driver)
        again = RoundTrip(self._driver)
        for item in self._items:
            if len(item) == 1:
                again.add_command(item[0])
            else:
                again.add(item[0], item[1], sql=item[2])
        failed, results = again._drain_or_abandon()
        if failed is not None:
            raise psycopg.errors.error_from_result(failed, encoding=self._driver.info.encoding)
        return again._loaded(results)

    def _drain(self) -> tuple[pq.abc.PGresult | None, list[pq.abc.PGresult | None]]:
        """Send a sync, read every result up to it and leave pipeline mode: the first failed
        command's result (or ``None``) and each statement's result."""
        pgconn = self._pgconn
        pgconn.pipeline_sync()
        self._synced = 1
        self._flush()
        results: list[pq.abc.PGresult | None] = [None] * len(self._statements)
        failed: pq.abc.PGresult | None = None
        commands = self._commands
        command, seen = 0, False
        while True:
            result = self._next_result()
            if result is None:
                if seen:  # the end of one command's results
                    command, seen = command + 1, False
                else:  # nothing has arrived yet
                    self._wait(read=True)
                    pgconn.consume_input()
                continue
            seen = True
            status = result.status
            if status == _PIPELINE_SYNC:
                self._synced = 2
                break
            if status == _FATAL_ERROR:
                failed = failed or result
            elif status in (_COMMAND_OK, _TUPLES_OK) and command < len(commands):
                kind = commands[command]
                if isinstance(kind, int):
                    results[kind] = result
                elif kind is not None:  # its PREPARE: later round trips execute it by name
                    self._wire.prepared[self._pending[kind]] = kind
        pgconn.exit_pipeline_mode()
        return failed, results

    def _flush(self) -> None:
        """Send what libpq holds, reading the server's results meanwhile if it sends them."""
        pgconn = self._pgconn
        while pgconn.flush():
            if self._wait(read=True, write=True):
                pgconn.consume_input()

    def _next_result(self) -> pq.abc.PGresult | None:
        """The next result (``None``: a command's results ended), waiting for the server."""
        pgconn = self._pgconn
        while pgconn.is_busy():
            self._wait(read=True)
            pgconn.consume_input()
        return pgconn.get_result()

    def _wait(self, *, read: bool, write: bool = False) -> bool:
        """Wait until the connection's socket is ready; whether it is readable."""
        sock = self._pgconn.socket
        readable, _, _ = select.select([sock] if read else [], [sock] if write else [], [])
        return bool(readable)

    def abandon_unsent(self) -> None:
        """Give up a round trip that was not run (queuing a statement failed, or the caller
        raised before running it): what was queued is sent and its results dropped
        (:meth:`_settle`); the caller rolls the transaction back and raises its own error."""
        self._settle(cancel=False)

    def _settle(self, *, cancel: bool) -> None:
        """Leave pipeline mode with nothing left to read, after an error or an interruption
        (``KeyboardInterrupt`` while waiting for the server): the sync is sent if it was not,
        what the server runs is cancelled if ``cancel`` (a step waiting for the chain lock
        must not go on waiting), and every result up to the sync is read and dropped. If that
        fails, the connection is closed (the pool then never hands it out again); either way
        nothing is raised: the caller raises its own error."""
        pgconn = self._pgconn
        if not self._commands or pgconn.pipeline_status == _PIPELINE_OFF:
            return
        try:
            if not self._synced:
                pgconn.pipeline_sync()
                self._synced = 1
            if cancel:
                self._driver.cancel()
            self._flush()
            while self._synced < 2:
                result = self._next_result()
                if result is not None and result.status == _PIPELINE_SYNC:
                    self._synced = 2
            pgconn.exit_pipeline_mode()
        except BaseException:  # a second interruption, or the connection failed
            self._abandon()

    def _abandon(self) -> None:
        """Close the connection: what it would still read cannot be told apart from the next
        statement's results (the pool then discards it)."""
        try:
            self._driver.close()
        except Exception:  # already broken: closed is all that matters
            pass


class PgPipeline:
    """Writes sent on the driver in one :class:`RoundTrip`: each is queued without waiting
    for its result, and :meth:`finish` sends them all and waits once (one round trip instead
    of one per statement, while the caller holds the chain lock), with the transaction's
    ``COMMIT`` when it is the transaction's last block.

    A write may require that it change exactly one row (a conditional UPDATE that must match
    its row): it is sent as a statement that fails on the server otherwise
    (:func:`_one_row_or_fail`), and :meth:`finish` reports the miss after rolling the
    transaction back. Only statements whose rows nobody reads are sent this way: a statement
    whose result is needed ends the pipeline first.
    """

    __slots__ = ("_driver", "_trip")

    _checked: ClassVar[dict[str, str]] = {}
    """Each one-row write's SQL -> its :func:`_one_row_or_fail` form."""

    def __init__(self, driver: psycopg.Connection[Any]) -> None:
        self._driver = driver
        self._trip = RoundTrip(driver)

    def send(
        self, statement: PgDirectStatement, params: Mapping[str, Any] | None, *, one_row: bool
    ) -> None:
        """Queue ``statement`` (its result is read in :meth:`finish`).

        Raises:
            sqlalchemy.exc.DBAPIError: The driver refused it (wrapped).
        """
        sql = statement.sql
        if one_row:
            checked = self._checked.get(sql)
            if checked is None:
                checked = self._checked[sql] = _one_row_or_fail(sql)
            sql = checked
        try:
            self._trip.add(statement, params, sql=sql)
        except psycopg.Error as error:
            self._trip.abandon_unsent()
            raise wrapped_error(error, "pipeline") from error

    def finish(self, *, commit: bool = False) -> None:
        """Send what was queued (``commit``: and ``COMMIT`` after it) and wait for every result.

        Raises:
            RowsNotMatched: A one-row write missed: nothing was committed, and the transaction
                was rolled back (a statement run after this runs in a new one, without the
                chain lock).
            sqlalchemy.exc.DBAPIError: A statement or the ``COMMIT`` failed (wrapped; the
                transaction is aborted).
        """
        _run(self._driver, self._trip, commit=commit)

    def abandon(self) -> None:
        """An error was raised in the block before :meth:`finish`: drop what was queued
        (:meth:`RoundTrip.abandon_unsent`; the caller then rolls back and raises its own
        error)."""
        self._trip.abandon_unsent()


def _run(
    driver: psycopg.Connection[Any], trip: RoundTrip, *, commit: bool = False
) -> list[DirectResult]:
    """Run ``trip`` (``commit``: with a ``COMMIT`` at its end).

    Raises:
        RowsNotMatched: A guard or a one-row write (a statement that fails with LOST_RACE when what
            it checks no longer holds) failed; the transaction is rolled back.
        sqlalchemy.exc.DBAPIError: A statement failed (wrapped; the transaction is aborted).
    """
    try:
        if commit:
            trip.add_command(b"COMMIT")
        return trip.run()
    except psycopg.Error as error:
        if not is_lost_race(error):
            raise wrapped_error(error, "pipeline") from error
        _roll_back(driver)
        raise RowsNotMatched("a guard or a conditional UPDATE matched no row") from None


def read_together(
    driver: psycopg.Connection[Any], reads: Sequence[tuple[PgDirectStatement, Mapping[str, Any]]]
) -> list[DirectResult]:
    """Run ``reads`` in order in one round trip (pipeline mode) and return their results.

    The server runs them one after the other, each statement with its own snapshot taken when
    it starts: a read sent after ``pg_advisory_xact_lock`` sees everything committed before
    the lock was granted, as it would in a round trip of its own.

    Raises:
        RowsNotMatched: A guard among ``reads`` (a statement that fails with LOST_RACE when what it
            checks no longer holds) failed; the transaction is rolled back.
        sqlalchemy.exc.DBAPIError: A statement failed (wrapped; the transaction is aborted).
    """
    trip = RoundTrip(driver)
    try:
        for statement, params in reads:
            trip.add(statement, params)
    except psycopg.Error as error:
        trip.abandon_unsent()
        raise wrapped_error(error, "pipeline") from error
    return _run(driver, trip)


def _roll_back(driver: psycopg.Connection[Any]) -> None:
    """Roll back after a statement failed on the server, keeping the session's prepared
    statements (:func:`rollback_keeping_statements`)."""
    try:
        rollback_keeping_statements(driver)
    except psycopg.Error as error:
        raise wrapped_error(error, "ROLLBACK") from error


def rollback_keeping_statements(driver: Any) -> None:
    """Roll the open (or failed) transaction back with a ``ROLLBACK`` on libpq, keeping the
    session's prepared statements.

    A ledger step that loses a race ends in a rollback: on a busy team ledger several a second
    per process. psycopg's own ``rollback()`` would also ``DEALLOCATE ALL`` if it had prepared
    anything (it prepares nothing on a ledger's connections, see the module) and runs through
    its generators; a prepared statement is not transactional, so a plain ``ROLLBACK`` leaves
    this module's statements (:class:`_Wire`) be. ``driver``: a psycopg connection, or the
    pool's proxy of one (what SQLAlchemy's ``do_rollback`` is given). Outside a transaction,
    in pipeline mode or on a broken connection psycopg's rollback does what it does.

    Raises:
        psycopg.Error: The server refused the rollback, or the connection is gone.
    """
    connection = getattr(driver, "dbapi_connection", driver)
    pgconn = connection.pgconn
    status = pgconn.transaction_status
    if status not in (_IN_TRANSACTION, _IN_ERROR) or pgconn.pipeline_status != _PIPELINE_OFF:
        connection.rollback()  # nothing open (it sends nothing), or mid-pipeline
        return
    result = pgconn.exec_(b"ROLLBACK")
    if result.status != _COMMAND_OK:
        raise psycopg.OperationalError(
            f"ROLLBACK failed: {pgconn.get_error_message() or 'the connection is gone'}"
        )
