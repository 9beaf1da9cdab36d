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

from collections.abc import Mapping
from typing import Any, ClassVar, NoReturn

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from supervisor.store.direct import DirectResult, DirectStatement, RowsNotMatched

_DIALECT = psycopg_dialect.dialect(paramstyle="format")  # type: ignore[no-untyped-call]
_IN_TRANSACTION = psycopg.pq.TransactionStatus.INTRANS
_PIPELINE_OFF = psycopg.pq.PipelineStatus.OFF
_COMMAND_OK = psycopg.pq.ExecStatus.COMMAND_OK


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
    """Writes sent on the driver in psycopg's pipeline mode: each is sent without waiting for
    its result, and :meth:`finish` waits once for all of them (one round trip instead of one
    per statement, while the caller holds the chain lock), with the transaction's ``COMMIT``
    when it is the transaction's last block.

    A write may require that it change exactly one row (a conditional UPDATE that must match
    its row): it is sent as a statement that fails on the server otherwise
    (:func:`_one_row_or_fail`), and :meth:`finish` reports the miss after rolling the
    transaction back. Only statements whose rows nobody reads are sent this way: a statement
    whose result is needed ends the pipeline first.

    Raises:
        sqlalchemy.exc.DBAPIError: Entering pipeline mode failed (wrapped).
    """

    __slots__ = ("_cursor", "_driver", "_open", "_pipeline")

    _checked: ClassVar[dict[str, str]] = {}
    """Each one-row write's SQL -> its :func:`_one_row_or_fail` form."""

    def __init__(self, driver: psycopg.Connection[Any]) -> None:
        self._driver = driver
        try:
            self._pipeline = driver.pipeline()
            self._pipeline.__enter__()
        except psycopg.Error as error:
            raise wrapped_error(error, "pipeline") from error
        self._open = True
        self._cursor: psycopg.Cursor[Any] | None = None
        """One cursor sends every statement: nobody reads their rows, and a cursor per
        statement cost more Python than the statement's send."""

    def send(
        self, statement: PgDirectStatement, params: Mapping[str, Any] | None, *, one_row: bool
    ) -> None:
        """Send ``statement`` (its result is read in :meth:`finish`).

        Raises:
            RowsNotMatched: An earlier one-row write missed, and the server said so already
                (psycopg reads what has arrived while it sends); the transaction is rolled
                back.
            sqlalchemy.exc.DBAPIError: The driver refused it (wrapped).
        """
        values = statement.parameters(params)
        sql = statement.sql
        if one_row:
            checked = self._checked.get(sql)
            if checked is None:
                checked = self._checked[sql] = _one_row_or_fail(sql)
            sql = checked
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = self._driver.cursor()
        try:
            cursor.execute(sql, values)
        except psycopg.errors.DivisionByZero:  # a one-row write missed (only they divide)
            self._missed()
        except psycopg.Error as error:
            raise wrapped_error(error, "pipeline") from error

    def finish(self, *, commit: bool = False) -> None:
        """Wait for every result (``commit``: after sending ``COMMIT``, in the same round trip).

        Raises:
            RowsNotMatched: A one-row write missed: nothing was committed, and the transaction
                was rolled back (a statement run after this runs in a new one, without the
                chain lock).
            sqlalchemy.exc.DBAPIError: A statement or the ``COMMIT`` failed (wrapped; the
                transaction is aborted).
        """
        try:
            if commit:
                cursor = self._cursor
                if cursor is None:
                    cursor = self._cursor = self._driver.cursor()
                cursor.execute("COMMIT")
            self._open = False
            self._pipeline.__exit__(None, None, None)
        except psycopg.errors.DivisionByZero:
            self._missed()
        except psycopg.Error as error:
            self.abandon()  # the error came while sending the COMMIT: still in pipeline mode
            raise wrapped_error(error, "pipeline") from error
        self._close_cursors()

    def abandon(self) -> None:
        """Leave pipeline mode after an error was raised in the block (whatever the pipeline
        then reports is dropped: that error is what the caller raises)."""
        self._close_cursors()
        if self._open:
            self._open = False
            _leave_quietly(self._pipeline)

    def _missed(self) -> NoReturn:
        """A one-row write missed: leave pipeline mode, roll back, raise RowsNotMatched."""
        self.abandon()
        _roll_back(self._driver)
        raise RowsNotMatched("a conditional UPDATE or a guard matched no row")

    def _close_cursors(self) -> None:
        cursor, self._cursor = self._cursor, None
        if cursor is not None:
            cursor.close()


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
    """Roll back after a statement failed on the server (psycopg's rollback: it must forget
    what the aborted pipeline meant to prepare, see :func:`rollback_keeping_statements`)."""
    try:
        driver.rollback()
    except psycopg.Error as error:
        raise wrapped_error(error, "ROLLBACK") from error


def rollback_keeping_statements(driver: Any) -> None:
    """Roll the open (or failed) transaction back, keeping the session's prepared statements.

    psycopg's ``rollback()`` forgets every statement it prepared and deallocates them on the
    server, in case the transaction changed the schema (its own ``DROP``/``ALTER`` results
    still clear them: psycopg reads those as they run). A ledger step that loses a race ends
    in a rollback: on a busy team ledger several a second per process, so a process's hot
    statements never stayed prepared (psycopg prepares one at its fifth run by default) and
    the server parsed and planned nearly each one again (bench_team.py ``--statements``). A prepared
    statement is not transactional; sent as a plain ``ROLLBACK`` on the driver's own
    connection, the rollback leaves them be. Only a transaction without an error is rolled
    back so: after a failed statement, a pipeline's later statements were skipped, a
    statement psycopg meant to prepare among them too, and psycopg's rollback is what makes
    it forget that one. ``driver``: a psycopg connection, or the pool's proxy of one (what
    SQLAlchemy's ``do_rollback`` is given).

    Raises:
        psycopg.Error: The server refused the rollback, or the connection is gone.
    """
    connection = getattr(driver, "dbapi_connection", driver)
    pgconn = connection.pgconn
    if pgconn.transaction_status != _IN_TRANSACTION or pgconn.pipeline_status != _PIPELINE_OFF:
        connection.rollback()  # nothing open (it sends nothing), an error, or mid-pipeline
        return
    result = pgconn.exec_(b"ROLLBACK")
    if result.status != _COMMAND_OK:
        raise psycopg.OperationalError(
            f"ROLLBACK failed: {pgconn.get_error_message() or 'the connection is gone'}"
        )
