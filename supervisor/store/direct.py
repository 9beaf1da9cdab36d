"""Prebuilt hot-path statements run on SQLite's driver connection, past SQLAlchemy's execution.

A statement of the approval cycle (propose, approve, claim, complete and their audit records)
costs ~40-50 us through ``Connection.execute`` (execution context, parameter dicts, events,
result proxy) against ~10 us in ``sqlite3`` itself. :class:`DirectStatement` compiles a
prebuilt Core statement once for the SQLite dialect and keeps what SQLAlchemy would do per
execution: the SQL text, the order of its positional parameters, the columns' bind processors
(``UTCDateTime`` to UTC text, booleans) and result processors (text back to tz-aware
datetimes). Executing it is one ``sqlite3`` call on the transaction's own connection, inside the
transaction the repository began, with driver errors wrapped as SQLAlchemy wraps them (so
:func:`~supervisor.store.errors.translate_errors` classifies them the same way).

Only statements whose compiled form needs nothing computed per execution qualify (no Python
column defaults, no expanding ``IN``, no literal rendering); anything else, and every other
engine, runs through Core as before (:meth:`DirectStatement.compiled_for` returns ``None``).
"""

from __future__ import annotations

import operator
import sqlite3
from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite as sqlite_dialect

from supervisor.store.tables import UTCDateTime


class RowsNotMatched(Exception):
    """A conditional UPDATE in a :meth:`~supervisor.store.repository.LedgerTx.pipelined` block
    matched no row: the transaction must not commit."""


_DIALECT = sqlite_dialect.dialect(paramstyle="qmark")


def _no_values(_params: Mapping[str, Any]) -> tuple[Any, ...]:
    return (None,)


def _utc_text(value: datetime) -> str:
    """What Core binds for a :class:`UTCDateTime` on SQLite, in one call: its
    ``process_bind_param`` (UTC, naive) then ``DATETIME``'s storage format
    (``YYYY-MM-DD HH:MM:SS.ffffff``)."""
    if value.tzinfo is None:
        raise ValueError("The ledger stores only timezone-aware datetimes.")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _utc_datetime(text: str) -> datetime:
    """What Core reads for a :class:`UTCDateTime` on SQLite, in one call: ``DATETIME``'s
    ``fromisoformat`` then ``process_result_value`` (tz-aware UTC)."""
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class DirectResult:
    """The part of a ``CursorResult`` the repository uses: rows (already processed) and
    rowcount."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def first(self) -> Any:
        """The first row or ``None``."""
        return self._rows[0] if self._rows else None

    def one(self) -> Any:
        """The only row.

        Raises:
            sqlalchemy.exc.NoResultFound, sqlalchemy.exc.MultipleResultsFound: Not exactly one.
        """
        if not self._rows:
            raise sa.exc.NoResultFound("No row was found when one was required")
        if len(self._rows) > 1:
            raise sa.exc.MultipleResultsFound("Multiple rows were found when one was required")
        return self._rows[0]

    def all(self) -> list[Any]:
        """Every row."""
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


def _row_class(keys: Sequence[str]) -> type:
    """A tuple class with the columns as attributes and ``_mapping``, like a Core row."""
    base: Any = namedtuple("DirectRow", keys)  # type: ignore[misc]

    class DirectRow(base):
        __slots__ = ()

        @property
        def _mapping(self) -> Mapping[str, Any]:
            return dict(zip(keys, self, strict=True))

    return DirectRow


class DirectStatement:
    """One prebuilt statement compiled for SQLite, run with ``sqlite3`` directly.

    Args:
        statement: A Core statement whose parameters are all named ``bindparam``s (or, for an
            INSERT, column keys given in ``column_keys``).
        column_keys: For an INSERT: the columns given on every execution (in any order).
    """

    __slots__ = ("_binds", "_defaults", "_pick", "_results", "_row", "returns_rows", "sql")

    dialect: Any = _DIALECT
    """The dialect statements are compiled for (positional parameters)."""
    utc_processors: tuple[Callable[[datetime], Any] | None, Callable[[Any], datetime] | None] = (
        _utc_text,
        _utc_datetime,
    )
    """How a :class:`UTCDateTime` is bound and read in one call each (``None``: the type's
    own processors)."""

    def __init__(self, statement: Any, column_keys: Sequence[str] | None = None) -> None:
        dialect = self.dialect
        compiled: Any = statement.compile(
            dialect=dialect, column_keys=list(column_keys) if column_keys is not None else None
        )
        if (
            compiled.insert_prefetch
            or compiled.update_prefetch
            or compiled.literal_execute_params
            or compiled.post_compile_params
            or compiled.has_out_parameters
        ):
            raise ValueError("statement needs per-execution work; run it through Core")
        self.sql: str = compiled.string
        names = list(compiled.positiontup or ())
        processors = compiled._bind_processors
        # The positional values picked from the parameters in one C call (a 1-tuple always),
        # then only the positions with a bind processor are processed.
        self._pick: Callable[[Mapping[str, Any]], tuple[Any, ...]] = (
            operator.itemgetter(*names, *names[:1]) if names else _no_values
        )
        utc_bind, utc_result = self.utc_processors
        self._binds: tuple[tuple[int, Callable[[Any], Any]], ...] = tuple(
            (index, utc_bind if utc_bind is not None
             and isinstance(compiled.binds[name].type, UTCDateTime) else processors[name])
            for index, name in enumerate(names)
            if name in processors
        )  # fmt: skip
        # Binds the statement carries its own value for (literals, LIMIT): used when absent.
        self._defaults: dict[str, Any] = {}
        for name in names:
            bind = compiled.binds[name]
            if bind.callable is not None:
                raise ValueError("statement has a callable bind; run it through Core")
            if not bind.required:
                self._defaults[name] = bind.value
        columns = compiled._result_columns
        self.returns_rows = bool(columns)
        self._row: type | None = _row_class([c[0] for c in columns]) if columns else None
        results = [
            utc_result if utc_result is not None and isinstance(column[3], UTCDateTime)
            else column[3]._cached_result_processor(dialect, None)
            for column in columns
        ]  # fmt: skip
        self._results: tuple[tuple[int, Callable[[Any], Any]], ...] = tuple(
            (index, process) for index, process in enumerate(results) if process is not None
        )

    def parameters(self, params: Mapping[str, Any] | None) -> list[Any]:
        """The positional parameters for ``params`` (by bind name), processed as Core would."""
        given: Mapping[str, Any] = params or {}
        if self._defaults:
            given = {**self._defaults, **given}
        values = list(self._pick(given))
        values.pop()  # the extra first value that keeps itemgetter's result a tuple
        for index, bind in self._binds:
            value = values[index]
            if value is not None:
                values[index] = bind(value)
        return values

    def execute(self, driver: sqlite3.Connection, params: Mapping[str, Any] | None) -> DirectResult:
        """Run on ``driver`` (inside the caller's transaction).

        Raises:
            sqlalchemy.exc.DBAPIError: What the driver raised, wrapped as SQLAlchemy wraps it.
        """
        values = self.parameters(params)
        try:
            cursor = driver.execute(self.sql, values)
            raw = cursor.fetchall() if self.returns_rows else []
        except sqlite3.Error as error:
            raise sa.exc.DBAPIError.instance(
                self.sql, values, error, sqlite3.Error, hide_parameters=True
            ) from error
        # RETURNING: sqlite3 reports -1 until the statement is exhausted; count what came back.
        return self.result(raw, cursor.rowcount)

    def result(self, raw: list[Any], rowcount: int) -> DirectResult:
        """The driver's rows (``raw``) processed as Core would, and the rowcount (``-1``:
        the number of rows)."""
        if not self.returns_rows:
            return DirectResult([], rowcount)
        row, results = self._row, self._results
        assert row is not None
        rows: list[Any] = []
        for raw_row in raw:
            values = list(raw_row)
            for index, process in results:
                value = values[index]
                if value is not None:
                    values[index] = process(value)
            rows.append(tuple.__new__(row, values))
        return DirectResult(rows, len(rows) if rowcount < 0 else rowcount)


JOINED_OPTION = "ledger_joined"
"""Execution option of a Connection opened inside a :class:`DriverTransaction`: its ``begin``
is bookkeeping only (the driver connection is already in the transaction)."""


def _wrapped(call: Callable[[], Any], statement: str) -> None:
    """Run a transaction-control call on the driver, raising its errors as SQLAlchemy would."""
    try:
        call()
    except sqlite3.Error as error:
        raise sa.exc.DBAPIError.instance(
            statement, None, error, sqlite3.Error, hide_parameters=True
        ) from error


class DriverTransaction:
    """One SQLite transaction on a pooled connection, begun, committed and rolled back with
    ``sqlite3`` directly instead of through a SQLAlchemy ``Connection`` (about 20 us of a
    ~30 us empty write).

    Statements that need Core or the ORM get :meth:`connection`: a ``Connection`` on the same
    driver connection, inside this transaction (its own ``begin`` issues nothing).

    Args:
        engine: A SQLite ledger engine.
        begin: ``BEGIN IMMEDIATE`` for a write, ``BEGIN`` for a read.

    Raises:
        sqlalchemy.exc.DBAPIError: The connection or the ``BEGIN`` failed (wrapped as
            SQLAlchemy wraps driver errors, for ``translate_errors``).
    """

    __slots__ = ("_connection", "_engine", "_fairy", "driver")

    def __init__(self, engine: sa.Engine, begin: str) -> None:
        fairy = engine.raw_connection()
        driver: sqlite3.Connection = fairy.driver_connection  # type: ignore[assignment]
        try:
            _wrapped(lambda: driver.execute(begin), begin)
        except BaseException:
            fairy.close()
            raise
        self._engine = engine
        self._fairy = fairy
        self._connection: sa.Connection | None = None
        self.driver = driver

    def connection(self) -> sa.Connection:
        """A ``Connection`` inside this transaction on the same driver connection (opened
        once, on first use)."""
        connection = self._connection
        if connection is None:
            connection = sa.Connection(self._engine, self._fairy)
            connection.execution_options(**{JOINED_OPTION: True})
            connection.begin()  # so an ORM session joins this transaction instead of beginning
            self._connection = connection
        return connection

    def commit(self) -> None:
        """Commit; on failure roll back and raise (wrapped)."""
        try:
            _wrapped(self.driver.commit, "COMMIT")
        except BaseException:
            self.rollback()
            raise

    def rollback(self) -> None:
        """Roll back; a connection that cannot roll back is discarded, never reused, and the
        error that led here is the one raised."""
        try:
            self.driver.rollback()
        except BaseException:
            self._fairy.invalidate()

    def close(self) -> None:
        """Return the connection to the pool (after :meth:`commit` or :meth:`rollback`)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()  # ends its bookkeeping transaction and checks the connection in
        else:
            self._fairy.close()
