"""Agents and supervised processes with their state and heartbeat age.

The selection is a row key (``process:ID`` or ``agent:ID``), not a row number: the rows are
re-read every second and may appear, vanish or change order, and once the operator has moved the
cursor it stays on the process they chose through all of it, so a stop key reaches that run.
Until then the cursor stays on the top row. The pid and the
state come first and are never cut; the command is shortened to the width left over, and
:func:`detail_line` gives the selected row's full text for the line under the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.text import Text
from textual import events
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey

from screens.literal import literal
from supervisor.ledger.models import LIVE_PROCESS_STATUSES
from supervisor.services.processes import ProcessRow
from supervisor.services.rendering import visible_escapes

#: Columns in order; ``name`` (the command) takes whatever width the others leave.
COLUMNS = ("pid", "state", "kind", "heartbeat", "host", "doing", "name")
#: The widest "doing" cell (a long tool name or URL is cut; the detail line has it whole).
DOING_WIDTH = 48
#: The narrowest a cut "doing" cell gets before the command gives way instead.
DOING_MIN = 16
#: The command keeps this many cells before the "doing" cell is cut below its full width.
NAME_MIN = 24
_ELLIPSIS = "…"


def format_age(seconds: float | None) -> str:
    """``3s``, ``2m``, ``1h`` ago, or ``-``."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds // 3600)}h"


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells with a trailing ellipsis when it does not fit."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + _ELLIPSIS


def process_id_of(key: str | None) -> str | None:
    """The process id of a ``process:ID`` row key (``None`` for agent rows)."""
    if key is None or not key.startswith("process:"):
        return None
    return key.removeprefix("process:")


def detail_line(row: ProcessRow | None) -> str:
    """The full, unshortened description of one row (shown under the table)."""
    if row is None:
        return "no process selected"
    process_id = process_id_of(row.key)
    if process_id is None:
        return f"agent {row.name}  [{row.state}]"
    where = f"pid {row.pid}" if row.pid is not None else "no pid"
    line = f"{process_id}  {where} on {row.host or '?'}  [{row.state}]  {row.name}"
    step = row.step
    if (
        step is not None
        and row.state in LIVE_PROCESS_STATUSES
        and step.detail not in ("", row.name)
    ):
        line += f"  — {step.kind} {step.detail}"
    if row.log_path:
        line += f"  (log {row.log_path})"
    return line


def _cells(row: ProcessRow, now: datetime) -> tuple[str, ...]:
    """The cells of ``row`` that are never shortened (every column but the command)."""
    pid = str(row.pid) if row.pid is not None else "-"
    doing = visible_escapes(row.doing(now))
    return (pid, row.state, row.kind, format_age(row.heartbeat_age(now)), row.host or "-", doing)


class ProcessesPane(DataTable[Text]):
    """One row per supervised process or agent seen in the ledger.

    Every cell is a :class:`~rich.text.Text`: a ``str`` cell is parsed as markup, and a command
    or agent id is whatever a process wrote into the ledger.
    """

    @dataclass
    class ProcessSelected(Message):
        """The selection moved to ``row`` (``None`` when nothing is listed).

        ``by_operator`` is true when the operator moved the cursor (not a refresh).
        """

        row: ProcessRow | None
        by_operator: bool = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row")
        self.process_rows: list[ProcessRow] = []
        self.selected_key: str | None = None
        #: True once the operator picked a row; before that the top row is selected.
        self.chosen = False
        self._now: datetime | None = None
        self._width = 0

    def on_mount(self) -> None:
        # Fixed widths set on every draw (from the cells, see _draw): the table's own fitting
        # happens on a later idle, so a first frame would cut every cell to its header.
        for column in COLUMNS:
            self.add_column(column, key=column, width=len(column))

    @property
    def selected_row(self) -> ProcessRow | None:
        """The selected row, if it is still listed."""
        return next((row for row in self.process_rows if row.key == self.selected_key), None)

    @property
    def selected_process_id(self) -> str | None:
        """The selected supervised process's id (``None`` for an agent row or nothing)."""
        return process_id_of(self.selected_key) if self.selected_row is not None else None

    def select_key(self, key: str) -> bool:
        """Put the cursor on the row ``key``; ``False`` when no such row is listed."""
        for index, row in enumerate(self.process_rows):
            if row.key == key:
                self.move_cursor(row=index)
                self._take_cursor()
                self.chosen = True
                return True
        return False

    def show_rows(self, rows: list[ProcessRow], now: datetime) -> None:
        """Replace the rows (a few dozen at most), keeping the cursor on the same process."""
        self._take_cursor()
        self.process_rows = rows
        self._now = now
        if self.selected_row is None or not self.chosen:
            top = rows[0].key if rows else None
            if top != self.selected_key or self.selected_row is None:
                self.selected_key = top
                self.post_message(self.ProcessSelected(self.selected_row))
        self._draw()

    def _take_cursor(self) -> None:
        """Make the row under the cursor the selection: a different row there means the
        operator moved the cursor (a refresh puts it back on the selected row)."""
        if not self.row_count:
            return
        try:
            key = self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0)).row_key.value
        except CellDoesNotExist:
            return
        if key is not None and key != self.selected_key:
            self.selected_key = key
            self.chosen = True
            self.post_message(self.ProcessSelected(self.selected_row, by_operator=True))

    def _widths(self, fixed: list[tuple[str, ...]]) -> tuple[list[int], int, int]:
        """Widths of the columns that are never cut (pid, state, kind, heartbeat, host: their
        widest cell), and the cells left for the "doing" cell and the command.

        The step keeps its width (up to :data:`DOING_WIDTH`) while the command has
        :data:`NAME_MIN` cells; on a narrower terminal the step gives way, down to
        :data:`DOING_MIN`, and then the command.
        """
        whole = [
            max([len(name), *(len(visible_escapes(c[index])) for c in fixed)])
            for index, name in enumerate(COLUMNS[:-2])
        ]
        padding = 2 * self.cell_padding
        used = padding * len(COLUMNS) + sum(whole)
        left = max(0, self.scrollable_content_region.width - used)
        wanted = max([len("doing"), *(len(c[-1]) for c in fixed)])
        doing = min(wanted, DOING_WIDTH, max(DOING_MIN, left - NAME_MIN))
        return whole, doing, max(len("name") + 2, left - doing)

    def _draw(self) -> None:
        if self._now is None:
            return
        fixed = [_cells(row, self._now) for row in self.process_rows]
        whole, doing_width, width = self._widths(fixed)
        self._width = self.scrollable_content_region.width
        shown = [
            (
                *cells[:-1],
                shorten(cells[-1], doing_width),
                shorten(visible_escapes(row.name), width),
            )
            for row, cells in zip(self.process_rows, fixed, strict=True)
        ]
        cut = [max([len(name), *(len(row[index]) for row in shown)])
               for index, name in enumerate(COLUMNS) if index >= len(whole)]  # fmt: skip
        for name, cell_width in zip(COLUMNS, [*whole, *cut], strict=True):
            column = self.columns[ColumnKey(name)]
            column.auto_width, column.width = False, cell_width
        self.clear()
        for row, cells in zip(self.process_rows, shown, strict=True):
            self.add_row(*(literal(cell) for cell in cells), key=row.key)
        index = next(
            (i for i, row in enumerate(self.process_rows) if row.key == self.selected_key), None
        )
        if index is not None:
            self.move_cursor(row=index)

    def on_resize(self, event: events.Resize) -> None:
        if self.scrollable_content_region.width != self._width:
            self._take_cursor()
            self._draw()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._take_cursor()
