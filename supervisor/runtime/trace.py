"""Trace events of a run, buffered per turn and written to the ledger in one transaction."""

from __future__ import annotations

from typing import Any

from supervisor.ledger.models import TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.runtime import steps

#: Payloads are bounded; anything larger belongs in a blob with a pointer.
MAX_PAYLOAD_CHARS = 2_000


def _bounded(payload: dict[str, Any]) -> dict[str, Any]:
    bounded: dict[str, Any] = {}
    for key, value in payload.items():
        if isinstance(value, str) and len(value) > MAX_PAYLOAD_CHARS:
            bounded[key] = value[:MAX_PAYLOAD_CHARS] + "…"
            bounded[f"{key}_truncated_from"] = len(value)
        else:
            bounded[key] = value
    return bounded


class RunTracer:
    """Collects a run's trace events and flushes them to the ledger."""

    def __init__(self, ledger: ApprovalLedger, agent_id: str, thread_id: str, run_id: str) -> None:
        self._ledger = ledger
        self.agent_id = agent_id
        self.thread_id = thread_id
        self.run_id = run_id
        self._buffer: list[TraceEvent] = []

    def event(
        self,
        kind: str,
        *,
        tool: str | None = None,
        outcome_status: str | None = None,
        reason_code: str | None = None,
        blob_ref: str | None = None,
        **payload: Any,
    ) -> None:
        """Record one event (kinds: run, model_call, tool_call, tool_result, approval, ...).

        Known secret values (the ledger's ``trace_secrets``: API keys, endpoint credentials)
        are replaced before the payload is bounded, so no cut can leave part of one behind.
        """
        steps.report(kind, tool)
        secrets = self._ledger.trace_secrets
        if secrets:
            payload = secrets.redact_data(payload)
        self._buffer.append(
            TraceEvent(
                at=self._ledger.clock.now(),
                agent_id=self.agent_id,
                thread_id=self.thread_id,
                run_id=self.run_id,
                kind=kind,
                tool=tool,
                outcome_status=outcome_status,
                reason_code=reason_code,
                payload=_bounded(payload),
                blob_ref=blob_ref,
            )
        )

    def take(self) -> list[TraceEvent]:
        """The buffered events, handed to a caller that writes them with its own transaction
        (a checkpoint and the events that led to it commit together)."""
        batch, self._buffer = self._buffer, []
        return batch

    def flush(self) -> None:
        """Write buffered events (one transaction)."""
        if self._buffer:
            self._ledger.append_trace(self.take())
