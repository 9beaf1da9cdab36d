"""Optional approval policies and the argument diff recorded when a proposal is edited."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from supervisor.ledger.errors import ApproverNotAllowed, SelfApprovalForbidden
from supervisor.ledger.models import Proposal


@dataclass(frozen=True)
class ApprovalPolicy:
    """Who may grant authority over a proposal.

    Applies to decisions that grant or prolong authority (approve, edit, extend); rejecting,
    cancelling and revoking only take authority away, so any approver may do them.

    Attributes:
        forbid_self_approval: The proposal's requesting user may not approve it.
        approvers_by_domain: For each listed domain, the only approver ids allowed; domains not
            listed are open to every approver.
    """

    forbid_self_approval: bool = False
    approvers_by_domain: Mapping[str, Collection[str]] = field(default_factory=dict)

    def check_grant(self, proposal: Proposal, approver_id: str, *, approving: bool) -> None:
        """Raise if ``approver_id`` may not grant authority over ``proposal``.

        Raises:
            SelfApprovalForbidden: Self-approval is forbidden and the approver is the requester.
            ApproverNotAllowed: A domain of the proposal has an allowlist without the approver.
        """
        if (
            approving
            and self.forbid_self_approval
            and proposal.user is not None
            and proposal.user == approver_id
        ):
            raise SelfApprovalForbidden(proposal.proposal_id, approver_id=approver_id)
        for domain in proposal.domains:
            allowed = self.approvers_by_domain.get(domain)
            if allowed is not None and approver_id not in allowed:
                raise ApproverNotAllowed(
                    proposal.proposal_id, approver_id=approver_id, domain=domain
                )


def diff_arguments(old: Any, new: Any, path: str = "$") -> list[dict[str, Any]]:
    """JSON-path-style differences between two argument values.

    Returns:
        One ``{"path", "old", "new"}`` entry per changed leaf; a missing side is reported under
        ``"op": "added"`` or ``"op": "removed"``.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[dict[str, Any]] = []
        for key in sorted(old.keys() | new.keys()):
            child = f"{path}.{key}"
            if key not in new:
                changes.append({"op": "removed", "path": child, "old": old[key]})
            elif key not in old:
                changes.append({"op": "added", "path": child, "new": new[key]})
            else:
                changes.extend(diff_arguments(old[key], new[key], child))
        return changes
    if old == new and type(old) is type(new):
        return []
    return [{"op": "changed", "path": path, "old": old, "new": new}]
