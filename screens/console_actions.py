"""Habits of the terminal tools people live in: ``:`` command mode, ``y`` copy, and the
review of this ledger from the live screen (``:review``). Help (``?``/F1) is the app's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from screens.command_bar import COMMANDS, CommandBar
from screens.copy_dialog import CopyDialog, copy_texts
from screens.grant_actions import GrantActions
from screens.literal import escaped
from screens.widgets.inbox.inbox_pane import InboxPane


class ConsoleActions(GrantActions):
    """Mixed into the main screen (which provides the selection and the processes pane)."""

    if TYPE_CHECKING:

        def selected_process_id(self) -> str | None: ...  # ProcessActions

    def action_command_mode(self) -> None:
        themes = sorted(self.app.available_themes)
        self.app.push_screen(CommandBar(themes), self._run_command)

    def action_group_sessions(self) -> None:
        """Toggle the inbox between oldest first and grouped by runtime and session."""
        inbox = self.query_one(InboxPane)
        inbox.set_grouped(not inbox.grouped)
        self.notify("inbox grouped by runtime and session" if inbox.grouped else
                    "inbox oldest first")  # fmt: skip

    def _run_command(self, chosen: tuple[str, str] | None) -> None:
        if chosen is None:
            return
        command, argument = chosen
        if command == "theme":
            if argument:
                self.app.theme = argument
                self.notify(f"theme {argument}")
            else:
                self.app.action_change_theme()
            return
        action = COMMANDS[command][1]
        self.call_after_refresh(self.run_action, action)

    def action_copy(self) -> None:
        texts = copy_texts(self.proposal_at_cursor(), self.selected_process_id())
        if not texts:
            self.notify("Nothing selected to copy.", severity="warning")
            return

        def copied(picked: tuple[str, str] | None) -> None:
            if picked is None:
                return
            label, text = picked
            self.app.copy_to_clipboard(text)
            shown = text if len(text) <= 40 else text[:39] + "…"
            self.notify(f"Copied the {label} to the clipboard: {escaped(shown)}")

        self.app.push_screen(CopyDialog(texts), copied)

    def action_open_review(self) -> None:
        """The offline review of this ledger's trace, over the live screen (Esc/b back)."""
        from screens.review_screen import ReviewScreen
        from supervisor.services.review.service import ReviewService

        url = self.approvals.ledger.repository.engine.url.render_as_string(hide_password=False)
        review = ReviewService(url)
        self.app.push_screen(ReviewScreen(review=review, closable=True))
