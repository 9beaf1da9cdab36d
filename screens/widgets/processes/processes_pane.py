"""Agents and supervised processes with their state and heartbeat age."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.widgets import DataTable

from screens.literal import literal
from supervisor.services.processes import ProcessRow

COLUMNS = ("name", "kind", "state", "heartbeat", "pid@host")


def format_age(seconds: float | None) -> str:
    """``3s``, ``2m``, ``1h`` ago, or ``-``."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds // 3600)}h"


class ProcessesPane(DataTable[Text]):
    """One row per supervised process or agent seen in the ledger.

    Every cell is a :class:`~rich.text.Text`: a ``str`` cell is parsed as markup, and a command
    or agent id is whatever a process wrote into the ledger.
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row")
        self.process_rows: list[ProcessRow] = []

    def on_mount(self) -> None:
        for column in COLUMNS:
            self.add_column(column, key=column)

    def show_rows(self, rows: list[ProcessRow], now: datetime) -> None:
        """Replace the rows (a few dozen at most; redrawing is cheap)."""
        self.process_rows = rows
        self.clear()
        for row in rows:
            where = f"{row.pid}@{row.host}" if row.pid is not None else row.host or "-"
            self.add_row(
                literal(row.name),
                literal(row.kind),
                literal(row.state),
                literal(format_age(row.heartbeat_age(now))),
                literal(where),
                key=row.key,
            )
