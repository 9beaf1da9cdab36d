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
"""

from __future__ import annotations

import contextlib
import itertools
import re
import select
import weakref
from collections.abc import Mapping
from typing import Any, ClassVar, cast

import psycopg
import sqlalchemy as sa
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from supervisor.store.direct import DirectResult, DirectStatement, RowsNotMatched

_DIALECT = psycopg_dialect.dialect(paramstyle="format")  # type: ignore[no-untyped-call]


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
        values = self.parameters(params)
        try:
            with driver.cursor() as cursor:
                cursor.execute(self.sql, values)
                raw = cursor.fetchall() if self.returns_rows else []
                rowcount = cursor.rowcount
        except psycopg.Error as error:
            raise sa.exc.DBAPIError.instance(
                self.sql, values, error, psycopg.Error, hide_parameters=True
            ) from error
        return self.result(raw, rowcount)


def wrapped_error(error: psycopg.Error, statement: str) -> sa.exc.StatementError:
    """``error`` as SQLAlchemy wraps driver errors, parameters hidden."""
    return sa.exc.DBAPIError.instance(statement, None, error, psycopg.Error, hide_parameters=True)


def _one_row_or_fail(sql: str) -> str:
    """``sql``, a write without ``RETURNING`` that must change exactly one row, as a statement
    that fails on the server (``division_by_zero``) when it changes another number of rows:
    the transaction is then aborted, so a ``COMMIT`` sent after it in the same pipeline is not
    run. A ``CASE`` would not do: the server may fold a constant ``1 / 0`` when planning."""
    return f"WITH changed AS ({sql} RETURNING 1) SELECT 1 / (count(*) = 1)::int FROM changed"


class PgPipeline:
    """Writes sent on the driver in libpq's pipeline mode: each is queued without waiting for
    its result, and :meth:`finish` sends them all at once and reads their results once (one
    round trip instead of one per statement, while the caller holds the chain lock), with the
    transaction's ``COMMIT`` when it is the transaction's last block.

    The pipeline runs on the driver's libpq connection (``psycopg.pq``), not through psycopg
    cursors: nobody reads these statements' rows, and a cursor's per-statement Python (its
    creation, query conversion, prepared-statement bookkeeping, a flush per statement) cost
    more than the server's work for the statement. What psycopg does per statement is kept:
    parameters are adapted by psycopg's ``Transformer``, each statement is prepared on the
    connection once (unless the connection disables preparing) and then executed by name,
    the transaction begins as psycopg would begin it, and errors become psycopg's exceptions.

    A write may require that it change exactly one row (a conditional UPDATE that must match
    its row): it is sent as a statement that fails on the server otherwise
    (:func:`_one_row_or_fail`), and :meth:`finish` reports the miss after rolling the
    transaction back. Only statements whose rows nobody reads are sent this way: a statement
    whose result is needed ends the pipeline first.

    Raises:
        sqlalchemy.exc.DBAPIError: Entering pipeline mode failed (wrapped).
    """

    __slots__ = ("_driver", "_kinds", "_open", "_pending", "_pgconn", "_transformer")

    _checked: ClassVar[dict[str, str]] = {}
    """Each one-row write's SQL -> its :func:`_one_row_or_fail` form."""
    _wire: ClassVar[dict[str, bytes]] = {}
    """Each statement's SQL (``%s`` parameters) -> its text for libpq (``$n`` parameters)."""

    def __init__(self, driver: psycopg.Connection[Any]) -> None:
        self._driver = driver
        self._pgconn = pgconn = driver.pgconn
        self._kinds: list[bytes | None] = []
        """Per command sent: the name it prepares, or None (a statement or a command)."""
        self._pending: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        try:
            begin = _begin_command(driver) if _needs_begin(driver) else None
            pgconn.enter_pipeline_mode()
        except psycopg.Error as error:
            raise wrapped_error(error, "pipeline") from error
        self._open = True
        self._transformer = Transformer(driver)
        if begin is not None:
            pgconn.send_query_params(begin, None)
            self._kinds.append(None)

    def send(
        self, statement: PgDirectStatement, params: Mapping[str, Any] | None, *, one_row: bool
    ) -> None:
        """Queue ``statement`` (its result is read in :meth:`finish`).

        Raises:
            sqlalchemy.exc.DBAPIError: The driver refused it (wrapped).
        """
        values = statement.parameters(params)
        sql = statement.sql
        if one_row:
            checked = self._checked.get(sql)
            if checked is None:
                checked = self._checked[sql] = _one_row_or_fail(sql)
            sql = checked
        query = self._wire.get(sql)
        if query is None:
            query = self._wire[sql] = _numbered(sql).encode()
        transformer = self._transformer
        pgconn = self._pgconn
        try:
            dumped = transformer.dump_sequence(values, [PyFormat.AUTO] * len(values))
            types, formats = transformer.types, transformer.formats
            name = self._prepared_name(query, tuple(types or ()))
            if name is None:
                pgconn.send_query_params(query, dumped, param_types=types, param_formats=formats)
            else:
                pgconn.send_query_prepared(name, dumped, param_formats=formats)
            self._kinds.append(None)
            if len(self._kinds) % 32 == 0:  # a long block: let the server's results in
                self._flush()
        except psycopg.Error as error:
            raise wrapped_error(error, "pipeline") from error

    def _prepared_name(self, query: bytes, types: tuple[int, ...]) -> bytes | None:
        """The name ``query`` with these parameter types is prepared under on this connection,
        queueing its ``PREPARE`` if it is not yet; ``None`` if the connection prepares nothing
        (``prepare_threshold=None``, e.g. behind a pooler that cannot keep them)."""
        if self._driver.prepare_threshold is None:
            return None
        key = (query, types)
        prepared = _PREPARED.setdefault(self._driver, {})
        name = prepared.get(key) or self._pending.get(key)
        if name is None:
            name = self._pending[key] = b"_sv_%d" % next(_PREPARED_NAMES)
            self._pgconn.send_prepare(name, query, param_types=types)
            self._kinds.append(name)
        return name

    def finish(self, *, commit: bool = False) -> None:
        """Send what was queued (``commit``: and ``COMMIT`` after it) and wait for every result.

        Raises:
            RowsNotMatched: A one-row write missed: nothing was committed, and the transaction
                was rolled back (a statement run after this runs in a new one, without the
                chain lock).
            sqlalchemy.exc.DBAPIError: A statement or the ``COMMIT`` failed (wrapped; the
                transaction is aborted).
        """
        try:
            if commit:
                self._pgconn.send_query_params(b"COMMIT", None)
                self._kinds.append(None)
            failed = self._drain()
        except psycopg.Error as error:
            self._open = False
            raise wrapped_error(error, "pipeline") from error
        if failed is None:
            return
        sqlstate = failed.error_field(pq.DiagnosticField.SQLSTATE)
        if sqlstate == _DIVISION_BY_ZERO:  # a one-row write or a guard missed (only they divide)
            _roll_back(self._driver)
            raise RowsNotMatched("a conditional UPDATE or a guard matched no row")
        if sqlstate == _NO_SUCH_STATEMENT:  # the session lost them (a DISCARD ALL): prepare anew
            _PREPARED.pop(self._driver, None)
        refused = psycopg.errors.error_from_result(failed, encoding=self._driver.info.encoding)
        raise wrapped_error(refused, "pipeline") from refused

    def abandon(self) -> None:
        """Leave pipeline mode after an error was raised in the block (whatever the pipeline
        then reports is dropped: that error is what the caller raises)."""
        if self._open:
            try:
                self._drain()
            except psycopg.Error:  # the caller raises the block's own error
                self._open = False

    def _drain(self) -> pq.abc.PGresult | None:
        """Send a sync, read every result up to it and leave pipeline mode.

        Returns:
            The first failed command's result, or ``None`` if every command succeeded.

        Raises:
            psycopg.Error: The connection failed.
        """
        pgconn = self._pgconn
        pgconn.pipeline_sync()
        self._flush()
        failed: pq.abc.PGresult | None = None
        command = 0
        while True:
            result = self._next_result()
            if result is None:  # the end of one command's results
                command += 1
                continue
            status = result.status
            if status == pq.ExecStatus.PIPELINE_SYNC:
                break
            if status == pq.ExecStatus.FATAL_ERROR and failed is None:
                failed = result
            elif status == pq.ExecStatus.COMMAND_OK and command < len(self._kinds):
                name = self._kinds[command]
                if name is not None:  # prepared: later blocks execute it by name
                    for key, pending in self._pending.items():
                        if pending == name:
                            _PREPARED.setdefault(self._driver, {})[key] = name
                            break
        self._open = False
        pgconn.exit_pipeline_mode()
        return failed

    def _flush(self) -> None:
        """Send what libpq holds, reading the server's results meanwhile if it sends them."""
        pgconn = self._pgconn
        while pgconn.flush():
            readable, _, _ = select.select([pgconn.socket], [pgconn.socket], [])
            if readable:
                pgconn.consume_input()

    def _next_result(self) -> pq.abc.PGresult | None:
        """The next result (``None`` ends a command's results), waiting for the server."""
        pgconn = self._pgconn
        while pgconn.is_busy():
            select.select([pgconn.socket], [], [])
            pgconn.consume_input()
        return pgconn.get_result()


_PREPARED: weakref.WeakKeyDictionary[Any, dict[tuple[bytes, tuple[int, ...]], bytes]] = (
    weakref.WeakKeyDictionary()
)
"""Per driver connection: (query, parameter types) -> the name it is prepared under."""
_PREPARED_NAMES = itertools.count()
_DIVISION_BY_ZERO = b"22012"
_NO_SUCH_STATEMENT = b"26000"
_PLACEHOLDER = re.compile(r"%%|%s")


def _numbered(sql: str) -> str:
    """``sql`` with ``%s`` parameters (``%%`` a literal ``%``) as libpq's ``$1``, ``$2``..."""
    count = itertools.count(1)
    return _PLACEHOLDER.sub(lambda m: "%" if m.group() == "%%" else f"${next(count)}", sql)


def _needs_begin(driver: psycopg.Connection[Any]) -> bool:
    """The next statement begins the transaction (psycopg would send ``BEGIN`` first)."""
    return not driver.autocommit and driver.pgconn.transaction_status == pq.TransactionStatus.IDLE


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


def _leave_quietly(pipeline: Any) -> None:
    """Leave pipeline mode, dropping what the pipeline reports.

    For a block that already failed: its own error is the one to raise. Leaving as if the
    block had succeeded makes psycopg raise what it found (here dropped) instead of logging
    it as a warning, which would reach a CLI's stderr."""
    try:
        pipeline.__exit__(None, None, None)
    except Exception:  # the caller raises the block's own error
        pass


def read_together(
    driver: psycopg.Connection[Any], reads: list[tuple[PgDirectStatement, Mapping[str, Any]]]
) -> list[DirectResult]:
    """Run ``reads`` in order in one round trip (pipeline mode) and return their results.

    The server runs them one after the other, each statement with its own snapshot taken when
    it starts: a read sent after ``pg_advisory_xact_lock`` sees everything committed before
    the lock was granted, as it would in a round trip of its own.

    Raises:
        RowsNotMatched: A guard among ``reads`` (a statement that divides by zero when what it
            checks no longer holds) failed; the transaction is rolled back.
        sqlalchemy.exc.DBAPIError: A statement failed (wrapped; the transaction is aborted).
    """
    cursors: list[psycopg.Cursor[Any]] = []
    try:
        pipeline = driver.pipeline()
        pipeline.__enter__()
        try:
            for statement, params in reads:
                cursor = driver.cursor()
                cursors.append(cursor)
                cursor.execute(statement.sql, statement.parameters(params))
        except BaseException:
            _leave_quietly(pipeline)
            raise
        pipeline.__exit__(None, None, None)
        return [
            statement.result(cursor.fetchall() if statement.returns_rows else [], cursor.rowcount)
            for (statement, _), cursor in zip(reads, cursors, strict=True)
        ]
    except psycopg.errors.DivisionByZero:  # only a guard divides
        _roll_back(driver)
        raise RowsNotMatched("what the write read before the chain lock changed") from None
    except psycopg.Error as error:
        raise wrapped_error(error, "pipeline") from error
    finally:
        for cursor in cursors:
            cursor.close()


def _roll_back(driver: psycopg.Connection[Any]) -> None:
    try:
        roll_back_keeping_prepared(driver)
        driver.rollback()  # nothing left to roll back: resets psycopg's own state only
    except psycopg.Error as error:
        raise wrapped_error(error, "ROLLBACK") from error


def roll_back_keeping_prepared(driver: psycopg.Connection[Any]) -> None:
    """Roll back ``driver``'s open transaction with a ``ROLLBACK`` sent on libpq directly.

    psycopg's own rollback also drops every prepared statement of the session (``DEALLOCATE
    ALL``, its guard against DDL rolled back under a cached statement; the ledger's
    transactions run none), including those :class:`PgPipeline` prepared, which it does not
    know of. PostgreSQL keeps prepared statements across a rollback, so rolled back this way
    both psycopg's and the pipeline's stay valid. Does nothing outside a transaction, in
    pipeline mode or on a closed connection (psycopg's rollback then does what it does).

    Raises:
        psycopg.Error: The server refused the ROLLBACK, or the connection failed.
    """
    pgconn = driver.pgconn
    if (
        driver.closed
        or pgconn.pipeline_status != pq.PipelineStatus.OFF
        or pgconn.transaction_status
        not in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)
    ):
        return
    result = pgconn.exec_(b"ROLLBACK")
    if result.status != pq.ExecStatus.COMMAND_OK:
        raise psycopg.errors.error_from_result(result, encoding=driver.info.encoding)


def keep_prepared_statements(engine: sa.Engine) -> None:
    """Make every rollback of ``engine``'s connections (a failed transaction, a connection
    returned to the pool mid-transaction) keep the session's prepared statements: roll back
    with :func:`roll_back_keeping_prepared` first, so psycopg finds nothing to roll back and
    deallocates nothing. Idempotent."""
    if sa.event.contains(engine, "rollback", _rollback_keeping_prepared):
        return
    sa.event.listen(engine, "rollback", _rollback_keeping_prepared)
    sa.event.listen(engine.pool, "reset", _reset_keeping_prepared)


def _rollback_keeping_prepared(connection: sa.Connection) -> None:
    with contextlib.suppress(Exception):  # then psycopg's rollback runs and reports it
        roll_back_keeping_prepared(cast(Any, connection.connection.driver_connection))


def _reset_keeping_prepared(dbapi_connection: Any, _record: Any, _state: Any) -> None:
    with contextlib.suppress(Exception):  # then psycopg's rollback runs and reports it
        roll_back_keeping_prepared(dbapi_connection)
