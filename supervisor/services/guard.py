"""The rendered guard: a decision needs proof that the UI showed the whole argument set.

The detail pane renders a proposal's arguments with :func:`render_arguments` and reports the
lines it laid out; the approvals service compares them with its own rendering and, only if they
match exactly, issues a :class:`RenderedGuard`. Approve, batch approve and edit refuse without a
guard issued by the same service for the same proposal and args hash.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from supervisor.errors import SupervisorError


@dataclass(frozen=True)
class RenderedGuard:
    """Proof that ``proposal_id``'s arguments (hash ``args_hash``) were rendered in full."""

    proposal_id: str
    args_hash: str
    digest: str
    token: str

    @classmethod
    def issue(cls, proposal_id: str, args_hash: str, digest: str) -> RenderedGuard:
        """A new guard with an unguessable token."""
        return cls(proposal_id, args_hash, digest, secrets.token_hex(16))


class RenderGuardMissing(SupervisorError):
    """A decision was attempted before the full arguments were rendered and confirmed."""

    code = "render_guard_missing"

    def __init__(self, proposal_id: str, detail: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"Proposal {proposal_id[:12]}: {detail}; nothing was decided.",
            hint="Select the proposal and let the detail pane show all of its arguments.",
            proposal_id=proposal_id,
        )
