"""The gateway's non-blocking long wait: MCP 2026-07-28 ``input_required`` with ``requestState``.

On a 2026-07-28 connection whose client accepts form elicitation, a call still waiting for
approval after the gateway's blocking period is answered with an ``input_required`` result
instead of holding the request open. Its one input request is a form elicitation telling the
user where the call is decided (proposal id, tool, arguments hash, ``supervisor proposals
approve ID``, the TUI, the decision page); its ``requestState`` binds the proposal id and the
arguments hash and is sealed by the SDK's :class:`~mcp.server.request_state.RequestStateBoundary`
(a tampered, expired or foreign state is refused before the gateway sees it).

The client re-sends the call with the answer and the echoed state. The answer is never an
approval: ``accept`` means "check again", ``decline``/``cancel`` means "stop waiting" (the call
does not run; the proposal is left as it is). Approval comes only from the ledger.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from supervisor.ledger.models import Proposal
from supervisor.mcp.tool import PROPOSAL_META_KEY
from supervisor.web.pages import decision_link

WAIT_INPUT_KEY = "supervisor/approval"
STATE_TTL_SECONDS = 24 * 3600.0
_STATE_VERSION = 1

WaitAnswer = Literal["check_again", "stop_waiting"]


@dataclass(frozen=True)
class WaitState:
    """What a ``requestState`` binds: the proposal a call waits on and its arguments hash."""

    proposal_id: str
    args_hash: str

    def dump(self) -> str:
        """The plaintext state (the boundary seals it on the way out)."""
        return json.dumps(
            {"v": _STATE_VERSION, "proposal_id": self.proposal_id, "args_hash": self.args_hash},
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def load(cls, plaintext: str) -> WaitState | None:
        """The state the gateway minted (already verified by the boundary); ``None`` otherwise."""
        try:
            data = json.loads(plaintext)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("v") != _STATE_VERSION:
            return None
        proposal_id, args_hash = data.get("proposal_id"), data.get("args_hash")
        if not isinstance(proposal_id, str) or not isinstance(args_hash, str):
            return None
        return cls(proposal_id, args_hash)


def state_boundary(server_name: str) -> RequestStateBoundary:
    """The middleware sealing and verifying ``requestState`` under this process's own key.

    The key lives only in this gateway process: a state minted by another gateway (or before a
    restart) is refused, and the client calls again without it (an identical call joins the
    proposal anyway).
    """
    security = RequestStateSecurity.ephemeral(ttl=STATE_TTL_SECONDS)
    return RequestStateBoundary(security, default_audience=server_name)


def can_ask(session_version: str, capabilities: types.ClientCapabilities | None) -> bool:
    """Whether this connection has ``input_required`` and its client answers form elicitation."""
    if session_version not in MODERN_PROTOCOL_VERSIONS or capabilities is None:
        return False
    elicitation = capabilities.elicitation
    if elicitation is None:
        return False
    # An empty elicitation capability means form mode (the spec's backward-compatible reading).
    return elicitation.form is not None or elicitation.url is None


def answer_of(responses: dict[str, Any] | None) -> WaitAnswer:
    """The user's answer to the wait form: only an explicit decline or cancel stops waiting."""
    response = (responses or {}).get(WAIT_INPUT_KEY)
    if isinstance(response, types.ElicitResult) and response.action in ("decline", "cancel"):
        return "stop_waiting"
    return "check_again"


def waiting_message(proposal: Proposal, tool_name: str, decision_base_url: str | None) -> str:
    """The form's text: what waits, where it is decided, and what the answers mean."""
    pid = proposal.proposal_id
    where = f"`supervisor proposals approve {pid}` (or reject), the supervisor TUI's inbox"
    if decision_base_url:
        where += f", or {decision_base_url.rstrip('/')}{decision_link(proposal)}"
    return (
        f"The call of {tool_name} waits for a person's approval in the Agent Supervisor "
        f"(proposal {pid}, arguments hash {proposal.args_hash[:16]}). It is decided there: "
        f"{where}. Accept to check again; decline to stop waiting (the call does not run and "
        "the proposal stays). Answering this form never approves the call."
    )


def input_required(
    proposal: Proposal, tool_name: str, decision_base_url: str | None
) -> types.InputRequiredResult:
    """The ``input_required`` answer for a call still waiting on ``proposal``."""
    form = types.ElicitRequestFormParams(
        message=waiting_message(proposal, tool_name, decision_base_url),
        requested_schema={"type": "object", "properties": {}},
    )
    state = WaitState(proposal.proposal_id, proposal.args_hash)
    return types.InputRequiredResult(
        input_requests={WAIT_INPUT_KEY: types.ElicitRequest(params=form)},
        request_state=state.dump(),
        _meta={PROPOSAL_META_KEY: proposal.proposal_id},
    )


__all__ = [
    "STATE_TTL_SECONDS",
    "WAIT_INPUT_KEY",
    "WaitAnswer",
    "WaitState",
    "answer_of",
    "can_ask",
    "input_required",
    "state_boundary",
    "waiting_message",
]
