"""The HTML of the web pages: small, script-free, phone-first.

Every piece of ledger text goes through :func:`shown`: first :func:`visible_escapes` (the TUI's
escaping: control, bidi, zero-width and other hidden characters become ``\\uXXXX``), then HTML
escaping, so nothing an agent wrote can add markup or reorder what the operator reads.
"""

from __future__ import annotations

import html
from datetime import datetime
from urllib.parse import quote

from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.services.rendering import visible_escapes
from supervisor.web.desk import ShownPage

STYLESHEET = "/static/serve.css"


def shown(text: str | None) -> str:
    """Untrusted text as safe HTML: hidden characters escaped visibly, then HTML-escaped."""
    return html.escape(visible_escapes(text or ""), quote=True)


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "-"


def decision_link(proposal: Proposal) -> str:
    """The decision page of ``proposal``, bound to its args hash."""
    return f"/p/{quote(proposal.proposal_id, safe='')}?h={proposal.args_hash}"


def document(title: str, body: str, *, operator: str | None = None, csrf: str = "") -> str:
    """A whole page around ``body`` (already HTML)."""
    nav = ""
    if operator is not None:
        nav = (
            '<nav><a href="/">Pending</a> <a href="/tui/">Full TUI</a> '
            f'<span class="who">{shown(operator)}</span>'
            '<form method="post" action="/logout" class="inline">'
            f'<input type="hidden" name="csrf" value="{_attr(csrf)}">'
            '<button type="submit" class="link">Log out</button></form></nav>'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="same-origin">'
        f"<title>{shown(title)} - Agent Supervisor</title>"
        f'<link rel="stylesheet" href="{STYLESHEET}"></head>'
        f"<body>{nav}<main>{body}</main></body></html>\n"
    )


def login_page(message: str | None = None) -> str:
    """The token form."""
    note = f'<p class="error" id="error">{shown(message)}</p>' if message else ""
    body = (
        "<h1>Agent Supervisor</h1>"
        f"{note}"
        '<form method="post" action="/login" class="card">'
        '<label for="token">Operator token</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password" '
        "required autofocus>"
        '<button type="submit" id="login">Log in</button></form>'
        '<p class="muted">Get a token with <code>supervisor operators add NAME</code>.</p>'
    )
    return document("Log in", body)


def list_page(pending: list[Proposal], operator: str, csrf: str) -> str:
    """The pending proposals, oldest first, each linking to its decision page."""
    if not pending:
        rows = '<p class="muted" id="empty">Nothing is waiting for a decision.</p>'
    else:
        items = "".join(
            f'<li><a href="{_attr(decision_link(proposal))}">'
            f'<span class="tool">{shown(proposal.tool_name)}</span></a>'
            f'<span class="muted"> {shown(proposal.owner or "-")} &middot; expires '
            f"{_when(proposal.expires_at)} &middot; {shown(proposal.proposal_id[:12])}</span></li>"
            for proposal in pending
        )
        rows = f'<ul class="proposals" id="pending">{items}</ul>'
    return document("Pending", f"<h1>Pending proposals ({len(pending)})</h1>{rows}",
                    operator=operator, csrf=csrf)  # fmt: skip


def _field(label: str, value: str, field_id: str) -> str:
    return f'<dt>{label}</dt><dd id="{field_id}">{value}</dd>'


def _pre(lines: list[str], element_id: str) -> str:
    return f'<pre id="{element_id}" class="json">' + "\n".join(map(html.escape, lines)) + "</pre>"


def _state(proposal: Proposal, now: datetime) -> str:
    if proposal.status is ProposalStatus.PENDING and proposal.expires_at <= now:
        return f"This proposal expired at {_when(proposal.expires_at)}; nothing can be decided."
    if proposal.status is ProposalStatus.PENDING:
        return ""
    text = f"This proposal is {proposal.status.value}"
    if proposal.decided_by:
        text += f" by {visible_escapes(proposal.decided_by)}"
    if proposal.decided_at:
        text += f" at {_when(proposal.decided_at)}"
    return text + "; this link decides nothing any more."


def decision_page(page: ShownPage, operator: str, csrf: str, now: datetime) -> str:
    """One proposal in full with the approve and reject forms (when it can be decided)."""
    proposal = page.proposal
    fields = "".join([
        _field("Tool", f'<span class="tool">{shown(proposal.tool_name)}</span>', "tool"),
        _field("Agent", shown(proposal.owner or "-"), "agent"),
        _field("Runtime", shown(proposal.runtime), "runtime"),
        _field("Thread", shown(proposal.thread_id or "-"), "thread"),
        _field("User", shown(proposal.user or "-"), "user"),
        _field("Reason", shown(proposal.policy_reason or "-"), "reason"),
        _field("Domains", shown(", ".join(proposal.domains) or "-"), "domains"),
        _field("Expires", _when(proposal.expires_at), "expires"),
        _field("Proposal", f"<code>{shown(proposal.proposal_id)}</code>", "proposal-id"),
        _field("Args hash", f'<code class="hash">{shown(proposal.args_hash)}</code>', "args-hash"),
        _field("Status", shown(proposal.status.value), "status"),
    ])  # fmt: skip
    target = ""
    if page.target_lines:
        target = "<h2>Execution target</h2>" + _pre(page.target_lines, "target")
    state = _state(proposal, now)
    if proposal.superseded_by_id:
        state += (' <a id="superseded-by" href="/">The edited proposal is in the pending '
                  "list.</a>")  # fmt: skip
    forms = f'<p class="notice" id="state">{shown(state)}</p>' if state else ""
    if page.view is not None:
        hidden = (
            f'<input type="hidden" name="csrf" value="{_attr(csrf)}">'
            f'<input type="hidden" name="view" value="{_attr(page.view.view_id)}">'
            f'<input type="hidden" name="args_hash" value="{_attr(proposal.args_hash)}">'
        )
        action = f"/p/{quote(proposal.proposal_id, safe='')}/decide"
        forms = (
            '<div class="decisions">'
            f'<form method="post" action="{_attr(action)}" class="decide">{hidden}'
            '<input type="hidden" name="action" value="approve">'
            '<label for="approve-reason">Note (optional)</label>'
            '<input id="approve-reason" name="reason" maxlength="2000">'
            '<button type="submit" id="approve" class="approve">Approve</button></form>'
            f'<form method="post" action="{_attr(action)}" class="decide">{hidden}'
            '<input type="hidden" name="action" value="reject">'
            '<label for="reject-reason">Reason for rejecting</label>'
            '<input id="reject-reason" name="reason" required maxlength="2000">'
            '<button type="submit" id="reject" class="reject">Reject</button></form></div>'
        )
    body = (
        f"<h1>Decide: {shown(proposal.tool_name)}</h1>"
        f"<dl>{fields}</dl>"
        "<h2>Arguments</h2>"
        '<p class="muted">Keys sorted, in full. Characters that could hide or reorder text '
        "are shown as <code>\\uXXXX</code>.</p>"
        f"{_pre(page.argument_lines, 'arguments')}{target}{forms}"
    )
    return document(f"Decide {proposal.tool_name}", body, operator=operator, csrf=csrf)


def decided_page(proposal: Proposal, operator: str, csrf: str) -> str:
    """What a successful decision shows."""
    verdict = proposal.status.value
    body = (
        f'<h1 id="outcome">{shown(proposal.tool_name)}: {shown(verdict)}</h1>'
        f'<p>Recorded as <b id="approver">{shown(proposal.approver_id)}</b> via web at '
        f"{_when(proposal.decided_at)} for args hash <code>{shown(proposal.args_hash)}</code>."
        '</p><p><a href="/">Back to the pending proposals</a></p>'
    )
    return document(verdict, body, operator=operator, csrf=csrf)


def refused_page(code: str, message: str, hint: str | None, back: str | None = None) -> str:
    """Why a request was refused, with its stable code."""
    link = f'<p><a href="{_attr(back)}">Open it again</a></p>' if back else ""
    body = (
        "<h1>Refused</h1>"
        f'<p class="error" id="error" data-code="{_attr(code)}">error [{shown(code)}]: '
        f"{shown(message)}</p>"
        + (f'<p class="muted">{shown(hint)}</p>' if hint else "")
        + link
        + '<p><a href="/">Pending proposals</a></p>'
    )
    return document("Refused", body)
