"""What the reconciliation view says about one stopped call, drawn as literal text.

Three parts: what ran (tool, canonical arguments, execution target), where it stopped
(executor, pid, host, claimed at, why it was flagged) and the last trace events of its thread.
Everything in them came from the ledger: each value is escaped before it is joined into lines,
and the result is a :class:`rich.text.Text`, which no widget parses as markup.
"""

from __future__ import annotations

from rich.text import Text

from screens.literal import escaped
from supervisor.ledger.models import TraceEvent
from supervisor.services.reconciliation import ReconcileDetail, stopped_lines
from supervisor.services.rendering import render_arguments


def what_ran(detail: ReconcileDetail) -> Text:
    """The tool, its canonical arguments and its execution target."""
    proposal = detail.proposal
    lines = [
        f"tool       {escaped(proposal.tool_name)}",
        f"agent      {escaped(proposal.owner or '-')}  thread {escaped(proposal.thread_id or '-')}",
        f"args hash  {escaped(proposal.args_hash)}",
        "arguments",
        *(f"  {line}" for line in render_arguments(proposal.arguments)),
        "execution target",
        *(f"  {line}" for line in render_arguments(proposal.execution_target)),
    ]
    return Text("\n".join(lines))


def where_it_stopped(detail: ReconcileDetail) -> Text:
    """Executor, pid, host, claim time, why it was flagged (and the finding, once recorded)."""
    rows = stopped_lines(detail.proposal, detail.execution, detail.reconciliation)
    rows = [(label, text) for label, text in rows if label != "next"]  # the footer has e / f
    if not rows:
        return Text("never claimed: nothing ran")
    return Text("\n".join(f"{label:<11}{escaped(text)}" for label, text in rows))


def event_line(event: TraceEvent) -> str:
    """One trace event: time, kind, tool, outcome and reason (escaped)."""
    parts = (event.kind, event.tool, event.outcome_status, event.reason_code)
    shown = " ".join(escaped(part) for part in parts if part)
    return f"{event.at:%H:%M:%S}  {shown}"


def last_events(detail: ReconcileDetail) -> Text:
    """The last trace events of the call's thread, oldest first."""
    if not detail.events:
        return Text("no trace events recorded for its thread")
    return Text("\n".join(event_line(event) for event in detail.events))
