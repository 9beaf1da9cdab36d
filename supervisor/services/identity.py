"""Who decides from this supervisor: OS user@host plus the supervisor instance id.

The OS user is read from the process's uid (see ``supervisor.ledger.identity``), not from
``LOGNAME``/``USER``. ``approver_id`` is a label recorded with each decision; approval policies
never match it: the ledger checks the OS identity of the deciding process itself.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from supervisor.ledger.models import ApproverContext, Via


@dataclass(frozen=True)
class ApproverIdentity:
    """An approver as recorded in the ledger.

    Attributes:
        approver_id: ``user@host#instance`` for a supervisor (so a conflict names the exact
            supervisor that won), ``user@host`` for the CLI, or an explicit label (``--approver``)
            recorded beside the OS identity; policies never match it.
        instance_id: This supervisor instance (empty for the CLI).
        context: What the ledger stores about the process (OS user, host, pid, tty, via).
    """

    approver_id: str
    instance_id: str
    context: ApproverContext

    @classmethod
    def current(cls, via: Via = "tui", approver_id: str | None = None) -> ApproverIdentity:
        """The identity of this process; a supervisor (via tui) gets a fresh instance id."""
        context = ApproverContext.current(via)
        instance_id = uuid.uuid4().hex[:8] if via == "tui" else ""
        default_id = f"{context.os_user}@{context.host}"
        if instance_id:
            default_id = f"{default_id}#{instance_id}"
        return cls(approver_id=approver_id or default_id, instance_id=instance_id, context=context)
