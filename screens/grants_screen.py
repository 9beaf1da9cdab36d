"""The grants view: what "approve and allow similar" has allowed, and revoking it at once.

One row per grant: its id, state, tool, agent (or any agent), argument patterns, uses of its
cap, time left and who made it. Live grants only, or (``a``) every grant ever made. ``r``
revokes the selected live grant after a confirmation; a call recorded after the revoke commits
is asked again. The list follows the ledger's change feed (a grant made, used or revoked from
any process) and the time left counts down every second.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.widgets.data_table import ColumnKey
from textual.worker import Worker, WorkerState

from screens.confirm_dialog import ConfirmDialog
from screens.literal import escaped, literal
from screens.widgets.inbox.inbox_pane import format_countdown
from supervisor.errors import SupervisorError
from supervisor.ledger.grants import Grant
from supervisor.services.grants import GrantsChange, GrantsService
from supervisor.services.settings import SupervisorSettings

COLUMNS = ("grant", "state", "tool", "agent", "patterns", "uses", "left", "made by")


def patterns_text(grant: Grant) -> str:
    """``path=prefix:"/srv/" amount=range:[0, 50]`` (exact arguments as ``exact:VALUE``)."""
    return "  ".join(
        f"{name}={kind}:{json.dumps(spec, ensure_ascii=False)}"
        for name, pattern in sorted(grant.arguments.items())
        for kind, spec in pattern.items()
    )


def grant_cells(grant: Grant, now: datetime) -> tuple[str, ...]:
    """The row of one grant as plain strings (escape them before showing)."""
    state = grant.state(now)
    left = format_countdown(grant.expires_at, now) if state == "active" else "-"
    return (
        grant.grant_id[:12], state, grant.tool_name, grant.owner or "any agent",
        patterns_text(grant), f"{grant.uses}/{grant.max_uses}", left, grant.approver_id,
    )  # fmt: skip


@dataclass
class GrantsRefreshed(Message):
    """The grants service re-read the grants."""

    change: GrantsChange

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GrantsRefreshed)


@dataclass
class GrantRevoked(Message):
    grant: Grant


@dataclass
class GrantRevokeFailed(Message):
    message: str


class GrantsScreen(Screen[None]):
    """The grants table; ``a`` shows past grants too, ``r`` revokes, Esc goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "revoke", "Revoke", id="grants.revoke"),
        Binding("a", "toggle_all", "All / live", id="grants.all"),
        Binding("escape", "app.pop_screen", "Back", id="grants.back"),
    ]

    def __init__(self, *, grants: GrantsService, settings: SupervisorSettings) -> None:
        super().__init__()
        self.service = grants
        self.settings = settings
        self.show_all = False
        self.grants: dict[str, Grant] = {}
        self.selected_id: str | None = None
        self._columns: list[ColumnKey] = []

    def compose(self) -> ComposeResult:
        yield Static("Grants — approve and allow similar", id="title-bar", markup=False)
        yield Static("", id="grants-status", markup=False)
        yield DataTable(id="grants-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="grants-detail", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#grants-table", DataTable)
        self._columns = table.add_columns(*COLUMNS)
        self.service.subscribe(self._on_change)
        self.show(self.service.grants())
        self.load()
        self.set_interval(1.0, self._tick)
        self.set_focus(table)

    def on_unmount(self) -> None:
        self.service.unsubscribe(self._on_change)

    def _on_change(self, change: GrantsChange) -> None:
        self.post_message(GrantsRefreshed(change))

    @work(thread=True, exit_on_error=False, group="grants-load", exclusive=True)
    def load(self) -> None:
        self.service.refresh()

    def on_grants_refreshed(self, message: GrantsRefreshed) -> None:
        self.show(list(message.change.grants))

    def _tick(self) -> None:
        self.show(list(self.grants.values()))

    # -- the table ------------------------------------------------------------------------

    def shown(self, grants: list[Grant]) -> list[Grant]:
        """The grants the table lists (live ones only unless :attr:`show_all`)."""
        now = self.settings.now()
        return [g for g in grants if self.show_all or g.state(now) == "active"]

    def show(self, grants: list[Grant]) -> None:
        """List ``grants`` (newest first), keeping the cursor on the same grant."""
        now = self.settings.now()
        self.grants = {grant.grant_id: grant for grant in grants}
        rows = self.shown(grants)
        table = self.query_one("#grants-table", DataTable)
        keep = self.selected_id
        ids = [grant.grant_id for grant in rows]
        if [row.value for row in table.rows] == ids:  # same rows: update cells in place
            for grant in rows:
                for column, cell in zip(self._columns, grant_cells(grant, now), strict=True):
                    table.update_cell(grant.grant_id, column, literal(cell))
        else:
            table.clear()
            for grant in rows:
                cells = grant_cells(grant, now)
                table.add_row(*(literal(cell) for cell in cells), key=grant.grant_id)
        live = sum(1 for grant in grants if grant.state(now) == "active")
        which = "all grants" if self.show_all else "live grants (a: show past ones too)"
        self.query_one("#grants-status", Static).update(
            f"{live} live of {len(grants)} made — showing {which}"
        )
        if not ids:
            self._select(None)
            return
        row = ids.index(keep) if keep in ids else 0
        if table.cursor_row != row:
            table.move_cursor(row=row)
        self._select(ids[row])

    def on_data_table_row_highlighted(self, message: DataTable.RowHighlighted) -> None:
        # The row under the cursor now, not the one the message names: a rebuild queues
        # highlights of rows the cursor has already left.
        table = message.data_table
        if not table.row_count:
            return
        key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        if key in self.grants and key != self.selected_id:
            self._select(key)

    def _select(self, grant_id: str | None) -> None:
        self.selected_id = grant_id
        self.refresh_bindings()
        grant = self.grants.get(grant_id or "")
        detail = self.query_one("#grants-detail", Static)
        if grant is None:
            detail.update(
                "No grant selected." if self.grants else "No grants yet (g in the inbox)."
            )
            return
        lines = [
            f"grant {grant.grant_id}  from proposal {grant.source_proposal_id or '-'}",
            f"made {grant.created_at:%Y-%m-%d %H:%M:%S} UTC by {grant.approver_id} "
            f"({grant.created_by}); reason: {grant.reason or '-'}",
        ]
        if grant.revoked_at is not None:
            lines.append(
                f"revoked {grant.revoked_at:%Y-%m-%d %H:%M:%S} UTC by {grant.revoked_by}: "
                f"{grant.revoke_reason or '-'}"
            )
        detail.update(Text("\n".join(escaped(line) for line in lines)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "revoke":
            grant = self.grants.get(self.selected_id or "")
            return True if grant is not None and grant.revoked_at is None else None
        return True

    def action_toggle_all(self) -> None:
        self.show_all = not self.show_all
        self.show(list(self.grants.values()))

    # -- revoking -------------------------------------------------------------------------

    def action_revoke(self) -> None:
        grant = self.grants.get(self.selected_id or "")
        if grant is None or grant.revoked_at is not None:
            return

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.revoke(grant.grant_id)

        self.app.push_screen(
            ConfirmDialog(
                f"Revoke grant {escaped(grant.grant_id[:12])} for {escaped(grant.tool_name)} "
                f"({grant.uses}/{grant.max_uses} used)? Calls recorded after this are asked "
                "again.",
                "Revoke",
            ),
            confirmed,
        )

    @work(thread=True, exit_on_error=False, group="grants-revoke")
    def revoke(self, grant_id: str) -> None:
        try:
            grant = self.service.revoke(grant_id)
        except SupervisorError as error:
            self.post_message(GrantRevokeFailed(error.message))
            return
        self.post_message(GrantRevoked(grant))

    def on_grant_revoked(self, message: GrantRevoked) -> None:
        grant = message.grant
        self.notify(
            f"Grant {escaped(grant.grant_id[:12])} for {escaped(grant.tool_name)} revoked; "
            "similar calls are asked again.",
            title="Grant revoked",
        )

    def on_grant_revoke_failed(self, message: GrantRevokeFailed) -> None:
        self.notify(escaped(message.message), title="Revoke failed", severity="error")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            text = getattr(error, "message", None) or str(error)
            self.notify(text, title="Ledger error", severity="error")
