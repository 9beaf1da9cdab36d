"""Approve and allow similar: the grant a pending call becomes, argument by argument.

Each argument of the call is shown literally; the operator keeps it exact or widens it to a
path prefix, URL origin or number range, starting from a prefilled value (its directory, its
origin, 0 to it). Below: the lifetime (default 15 minutes), the use cap (default 20), whether
other agents' calls count too, and the other pending proposals the grant would allow, listed
as they are chosen, with the option to approve exactly those now. Ctrl+S confirms; Enter never
does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Select, Static

from screens.key_hints import key_hints, key_line
from screens.literal import escaped, literal, literal_lines
from supervisor.errors import SupervisorError
from supervisor.ledger.grants import DEFAULT_GRANT_SECONDS, DEFAULT_GRANT_USES, MAX_GRANT_SECONDS
from supervisor.ledger.models import Proposal
from supervisor.rules.grants import check_patterns
from supervisor.services.grants import (
    GrantRequest,
    PatternKind,
    PatternOption,
    pattern_from_text,
    pattern_options,
    similar_pending,
)

#: Most matched proposals listed one per line (the count always covers all of them).
LISTED = 12


def _compact(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


class GrantInputInvalid(SupervisorError):
    """The lifetime or use cap typed in the dialog is not usable."""

    code = "invalid_grant_limits"


class GrantDialog(ModalScreen[GrantRequest | None]):
    """Dismisses with a :class:`GrantRequest` once every choice is valid, or ``None``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "confirm", "Approve and grant", id="grant.confirm"),
        Binding("escape", "abandon", "Back", id="grant.back"),
    ]

    def __init__(self, proposal: Proposal, pending: Callable[[], list[Proposal]]) -> None:
        super().__init__()
        self.proposal = proposal
        self.pending = pending
        self.names = sorted(proposal.arguments)
        self.options: list[dict[PatternKind, PatternOption]] = [
            {option.kind: option for option in pattern_options(proposal.arguments[name])}
            for name in self.names
        ]
        #: The other pending proposals listed as matched, as last shown.
        self.matched: list[Proposal] = []

    def compose(self) -> ComposeResult:
        proposal = self.proposal
        with Vertical(classes="dialog -wide"):
            yield Static(
                literal(f"Approve {proposal.tool_name} and allow similar calls"),
                classes="dialog-question",
            )
            yield Static("", id="grant-scope", markup=False)
            with VerticalScroll(id="grant-arguments"):
                for index, name in enumerate(self.names):
                    value = proposal.arguments[name]
                    yield Static(literal(f"{name} = {_compact(value)}"), classes="grant-arg")
                    with Horizontal(classes="grant-row"):
                        choices = [
                            (option.label, kind) for kind, option in self.options[index].items()
                        ]
                        yield Select(
                            choices, value="exact", allow_blank=False, id=f"grant-kind-{index}"
                        )
                        yield Input(id=f"grant-value-{index}", disabled=True)
            with Horizontal(classes="grant-row"):
                yield Static("minutes", classes="grant-label")
                yield Input(f"{DEFAULT_GRANT_SECONDS / 60:g}", id="grant-minutes")
                yield Static("uses", classes="grant-label")
                yield Input(str(DEFAULT_GRANT_USES), id="grant-uses")
                yield Checkbox("any agent", id="grant-any-agent")
            yield Input(placeholder="reason (optional, audited)", id="grant-reason")
            yield Static("", id="grant-error", classes="dialog-error", markup=False)
            yield Static("", id="grant-matches", markup=False)
            yield Checkbox("Also approve the listed proposals", id="grant-also", disabled=True)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Approve and grant", variant="warning", id="grant-confirm")
                yield Button("Back", id="grant-back")
            yield key_line(key_hints(self.BINDINGS, [("Tab", "next field")]))

    def on_mount(self) -> None:
        self._update()
        if self.names:
            self.query_one("#grant-kind-0", Select).focus()

    # -- reading the choices --------------------------------------------------------------

    def _kind(self, index: int) -> PatternKind:
        value = self.query_one(f"#grant-kind-{index}", Select).value
        for kind in self.options[index]:
            if value == kind:
                return kind
        return "exact"

    def _text(self, index: int, kind: PatternKind) -> str:
        """The value typed for argument ``index``; the prefill is shown escaped, so an
        untouched prefill stands for the raw value it shows."""
        typed = self.query_one(f"#grant-value-{index}", Input).value
        prefill = self.options[index][kind].prefill
        return prefill if typed == escaped(prefill) else typed

    def patterns(self) -> dict[str, Any]:
        """Argument name -> pattern for every argument not kept exact.

        Raises:
            GrantInvalid: A range that does not parse.
        """
        chosen: dict[str, Any] = {}
        for index, name in enumerate(self.names):
            kind = self._kind(index)
            pattern = pattern_from_text(name, kind, self._text(index, kind))
            if pattern is not None:
                chosen[name] = pattern
        return chosen

    def _limits(self) -> tuple[float, int]:
        minutes_text = self.query_one("#grant-minutes", Input).value.strip()
        uses_text = self.query_one("#grant-uses", Input).value.strip()
        try:
            minutes = float(minutes_text)
        except ValueError:
            minutes = -1.0
        if not 0 < minutes * 60 <= MAX_GRANT_SECONDS:
            days = MAX_GRANT_SECONDS / 86400
            raise GrantInputInvalid(
                f"The lifetime is minutes, more than 0 and at most {days:g} days."
            )
        if not uses_text.isdigit() or int(uses_text) < 1:
            raise GrantInputInvalid("The use cap is a whole number of at least 1.")
        return minutes * 60, int(uses_text)

    @property
    def any_agent(self) -> bool:
        return self.query_one("#grant-any-agent", Checkbox).value

    # -- feedback -------------------------------------------------------------------------

    def _update(self) -> None:
        """Re-check the choices and re-list the pending proposals they match."""
        owner = self.proposal.owner or "no agent"
        who = "any agent" if self.any_agent else f"agent {owner}"
        self.query_one("#grant-scope", Static).update(
            literal(
                f"Allows calls of {self.proposal.tool_name} with the same schema and execution "
                f"target from {who}, each argument as chosen below."
            )
        )
        error = self.query_one("#grant-error", Static)
        try:
            checked = check_patterns(self.patterns(), self.proposal.arguments)
        except SupervisorError as problem:
            error.update(literal_lines(problem.message))
            self._show_matches(None)
            return
        error.update("")
        self._show_matches(
            similar_pending(self.proposal, checked, self.pending(), any_agent=self.any_agent)
        )

    def _show_matches(self, matched: list[Proposal] | None) -> None:
        self.matched = matched or []
        also = self.query_one("#grant-also", Checkbox)
        also.disabled = not self.matched
        if not self.matched:
            also.value = False
        count = len(self.matched)
        also.label = f"Also approve the {count} listed proposal{'s' if count != 1 else ''} now"
        if matched is None:
            text = "Fix the pattern to see which pending proposals it matches."
        elif not matched:
            text = "No other pending proposal matches this grant."
        else:
            many = count != 1
            lines = [f"{count} other pending proposal{'s match' if many else ' matches'}:"]
            lines.extend(
                escaped(f"  {p.proposal_id[:12]}  {p.owner or '-'}  {_compact(p.arguments)}")
                for p in self.matched[:LISTED]
            )
            if count > LISTED:
                lines.append(f"  (+{count - LISTED} more)")
            text = "\n".join(lines)
        self.query_one("#grant-matches", Static).update(Text(text))

    def on_select_changed(self, event: Select.Changed) -> None:
        select_id = event.select.id or ""
        if not select_id.startswith("grant-kind-"):
            return
        index = int(select_id.removeprefix("grant-kind-"))
        kind = self._kind(index)
        field = self.query_one(f"#grant-value-{index}", Input)
        field.value = "" if kind == "exact" else escaped(self.options[index][kind].prefill)
        field.disabled = kind == "exact"
        self._update()

    def on_input_changed(self, event: Input.Changed) -> None:
        if (event.input.id or "").startswith("grant-value-"):
            self._update()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # Enter never confirms a grant

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        if event.checkbox.id == "grant-any-agent":
            self._update()

    # -- answers --------------------------------------------------------------------------

    def request(self) -> GrantRequest:
        """What the operator chose.

        Raises:
            GrantInvalid, GrantInputInvalid: A choice is not usable.
        """
        patterns = self.patterns()
        check_patterns(patterns, self.proposal.arguments)
        seconds, uses = self._limits()
        reason = self.query_one("#grant-reason", Input).value.strip() or None
        also = self.query_one("#grant-also", Checkbox).value and bool(self.matched)
        return GrantRequest(
            proposal_id=self.proposal.proposal_id, patterns=patterns, seconds=seconds,
            max_uses=uses, any_agent=self.any_agent, reason=reason,
            also_approve=tuple(p.proposal_id for p in self.matched) if also else (),
        )  # fmt: skip

    def action_confirm(self) -> None:
        try:
            request = self.request()
        except SupervisorError as problem:
            self.query_one("#grant-error", Static).update(literal_lines(problem.message))
            return
        self.dismiss(request)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "grant-confirm":
            self.action_confirm()
        else:
            self.dismiss(None)

    def action_abandon(self) -> None:
        self.dismiss(None)
