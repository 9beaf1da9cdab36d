"""Headless services the supervisor UI and CLI share: plain Python state fed by the ledger.

Nothing here imports Textual; screens subscribe to these objects and receive change callbacks
from background threads (they must hop to the UI loop themselves, e.g. with ``post_message``).
"""

from __future__ import annotations

from supervisor.services.approvals import ApprovalsService, InboxChange
from supervisor.services.guard import RenderedGuard, RenderGuardMissing
from supervisor.services.identity import ApproverIdentity
from supervisor.services.processes import ProcessesService, ProcessRow
from supervisor.services.settings import SupervisorSettings
from supervisor.services.traces import TracesService

__all__ = [
    "ApprovalsService",
    "ApproverIdentity",
    "InboxChange",
    "ProcessRow",
    "ProcessesService",
    "RenderGuardMissing",
    "RenderedGuard",
    "SupervisorSettings",
    "TracesService",
]
