"""Ledger services for what agent runs leave: checkpoints, the trace (redacted, pruned), blobs
(verified on every read) and issued result pointers."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from supervisor.canonical import normalise, sha256_hex
from supervisor.ledger.base import LedgerBase
from supervisor.ledger.errors import BlobCorrupted, LedgerError
from supervisor.ledger.models import Blob, Checkpoint, TraceEvent
from supervisor.ledger.retention import TraceRetention
from supervisor.redact import KnownSecrets
from supervisor.store.notify import TRACE_CHANNEL, ChangeProbe

CHECKPOINT_SCHEMA_VERSION = 1
PREVIEW_CHARS = 500
JSON_MEDIA_TYPE = "application/json"
TEXT_MEDIA_TYPE = "text/plain"
BINARY_MEDIA_TYPE = "application/octet-stream"
_TEXT_SUBTYPE = re.compile(r"^text/[a-z0-9][a-z0-9.+-]{0,60}$")


def blob_preview(content: bytes) -> str:
    """The first characters of ``content`` as text (undecodable bytes shown as U+FFFD)."""
    return content[: PREVIEW_CHARS * 4].decode("utf-8", errors="replace")[:PREVIEW_CHARS]


def blob_media_type(content: bytes, declared: str) -> str:
    """The media type to show for ``content``: ``declared`` when the content bears it out
    (``application/json`` parses as JSON, ``text/...`` is UTF-8, ``application/octet-stream``
    is anything), else what the content is: JSON, UTF-8 text or bytes."""
    if declared == BINARY_MEDIA_TYPE:
        return declared
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return BINARY_MEDIA_TYPE
    if _TEXT_SUBTYPE.match(declared):
        return declared
    try:
        json.loads(text)
    except ValueError:
        return TEXT_MEDIA_TYPE
    return JSON_MEDIA_TYPE


def verified_blob(digest: str, content: bytes, declared_media_type: str) -> Blob:
    """A blob whose every field comes from ``content`` that hashes to ``digest``.

    Size and preview are computed from the content, and the media type is checked against it,
    so nothing stored beside the content (and not covered by the digest) reaches a viewer.

    Raises:
        BlobCorrupted: ``content`` does not hash to ``digest``.
    """
    actual = sha256_hex(content)
    if actual != digest:
        raise BlobCorrupted(digest, actual=actual)
    return Blob(
        sha256=digest, size=len(content), media_type=blob_media_type(content, declared_media_type),
        preview=blob_preview(content), content=content,
    )  # fmt: skip


class RunsServiceMixin(LedgerBase):
    """What agent runs store besides approvals, read back by the runtime and the TUI.

    ``trace_retention`` (a :class:`~supervisor.ledger.retention.TraceRetention`, settable per
    ledger handle) bounds the trace; the writer applies it on a cadence.
    """

    trace_retention: TraceRetention = TraceRetention()
    _traces_since_prune: int = 0

    def save_checkpoint(
        self,
        agent_id: str,
        thread_id: str,
        messages: Sequence[Any],
        pending_tool_calls: Sequence[Any] = (),
        *,
        state: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        schema_version: int = CHECKPOINT_SCHEMA_VERSION,
        trace: Iterable[TraceEvent] = (),
    ) -> Checkpoint:
        """Store an agent's resumable state as JSON (checkpoints are immutable), with the trace
        events that led to it in the same transaction (see :meth:`append_trace`).

        Args:
            agent_id: The agent.
            thread_id: The agent thread.
            messages: Message history.
            pending_tool_calls: Tool calls waiting for approval.
            state: Runtime state (JSON object) needed to resume.
            checkpoint_id: A pre-chosen id (so proposals can reference it); generated if omitted.
            schema_version: Version of the checkpoint's layout.
            trace: Trace events to append with it (one commit for a run's step).

        Returns:
            The stored checkpoint.

        Raises:
            CanonicalJSONError: The state is not JSON data.
        """
        checkpoint = self.checkpoint_of(
            agent_id, thread_id, messages, pending_tool_calls, state=state,
            checkpoint_id=checkpoint_id, schema_version=schema_version,
        )  # fmt: skip
        batch = [self.redact_trace_event(event) for event in trace]
        with self.repository.write(audited=False) as tx:
            tx.insert_checkpoint(checkpoint)
            tx.insert_trace_events(batch)
        self._traced(len(batch))
        return checkpoint

    def checkpoint_of(
        self,
        agent_id: str,
        thread_id: str,
        messages: Sequence[Any],
        pending_tool_calls: Sequence[Any] = (),
        *,
        state: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        schema_version: int = CHECKPOINT_SCHEMA_VERSION,
    ) -> Checkpoint:
        """The checkpoint :meth:`save_checkpoint` stores, not stored yet (``propose(...,
        checkpoint=...)`` stores a pause's checkpoint with its first proposal).

        Raises:
            CanonicalJSONError: The state is not JSON data.
        """
        return Checkpoint(
            checkpoint_id=checkpoint_id or uuid.uuid4().hex,
            agent_id=agent_id,
            thread_id=thread_id,
            messages=normalise(list(messages)),
            pending_tool_calls=normalise(list(pending_tool_calls)),
            state=normalise(dict(state or {})),
            schema_version=schema_version,
            created_at=self._now(),
        )

    def load_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """A checkpoint by id, or ``None``."""
        with self.repository.read() as tx:
            return tx.checkpoint(checkpoint_id)

    def latest_checkpoint(self, agent_id: str, thread_id: str) -> Checkpoint | None:
        """The newest checkpoint of an agent's thread, or ``None``."""
        with self.repository.read() as tx:
            return tx.latest_checkpoint(agent_id, thread_id)

    _trace_secrets: KnownSecrets | None = None

    @property
    def trace_secrets(self) -> KnownSecrets:
        """Secret values replaced in every trace event this ledger writes, whoever wrote it
        (a provider shares its own; agents add their API key and endpoint credentials)."""
        if self._trace_secrets is None:
            self._trace_secrets = KnownSecrets()
        return self._trace_secrets

    @trace_secrets.setter
    def trace_secrets(self, secrets: KnownSecrets) -> None:
        self._trace_secrets = secrets

    def redact_trace_event(self, event: TraceEvent) -> TraceEvent:
        """``event`` with every known secret value (and its encodings) replaced in every string
        it holds: ids, kind, tool, outcome status, reason code, blob reference, payload keys
        and values (:func:`supervisor.redact.redact_event`)."""
        secrets = self._trace_secrets
        return secrets.redact_event(event) if secrets else event

    def append_trace(self, events: Iterable[TraceEvent]) -> int:
        """Append trace events in one transaction; returns how many were written.

        Known secret values (:attr:`trace_secrets`) are replaced first. Every
        ``trace_retention.prune_every`` events appended through this handle, one short pruning
        pass follows (at most ``trace_retention.batch`` deletions). A pass that fails (the ledger
        busy, say) is left to the next one: the events were written either way.
        """
        batch = [self.redact_trace_event(event) for event in events]
        with self.repository.write(audited=False) as tx:
            tx.insert_trace_events(batch)
        self._traced(len(batch))
        return len(batch)

    def _traced(self, count: int) -> None:
        """``count`` events were appended: prune on the retention's cadence."""
        retention = self.trace_retention
        self._traces_since_prune += count
        if retention.prune_every and self._traces_since_prune >= retention.prune_every:
            self._traces_since_prune = 0
            try:
                self.prune_traces(limit=retention.batch)
            except LedgerError:
                pass

    def prune_traces(
        self, retention: TraceRetention | None = None, *, limit: int | None = None
    ) -> int:
        """Delete trace events the retention policy no longer keeps.

        Events older than ``max_age_seconds`` or beyond the newest ``max_events`` go, except
        those of a thread that still has a pending, approved, executing or
        needs_reconciliation proposal. Age is judged in trace order (ids ascend with time).

        Args:
            retention: The policy to apply; this handle's ``trace_retention`` if omitted.
            limit: At most this many deletions, in one transaction. If omitted, everything that
                qualifies goes, in transactions of ``retention.batch`` deletions each, so other
                writers (approvals) wait at most one batch.

        Returns:
            How many events were deleted.
        """
        policy = retention or self.trace_retention
        before = None
        if policy.max_age_seconds is not None:
            before = self._now() - timedelta(seconds=policy.max_age_seconds)
        total = 0
        while True:
            step = policy.batch if limit is None else limit
            with self.repository.write(audited=False) as tx:
                deleted = tx.prune_trace_events(
                    before=before, keep_last=policy.max_events, limit=step
                )
            total += deleted
            if limit is not None or deleted < step:
                return total

    def trace_probe(self) -> ChangeProbe:
        """A dedicated connection that wakes when trace events may have been appended (a live
        tail waits on it instead of sleeping): SQLite's ``data_version`` polled every 20 ms,
        PostgreSQL's ``LISTEN`` on the trace channel every append notifies. The caller closes it.

        Raises:
            LedgerUnavailable: The database cannot be reached.
        """
        return self.repository.change_probe(TRACE_CHANNEL)

    def trace_events(
        self,
        *,
        agent_id: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
        kind: str | None = None,
        after_id: int = 0,
        limit: int = 500,
        newest_first: bool = False,
    ) -> list[TraceEvent]:
        """Trace events after ``after_id`` matching every given filter, ascending by id (the
        newest ``limit`` of them, newest first, with ``newest_first``)."""
        with self.repository.read() as tx:
            return tx.trace_events(
                agent_id=agent_id, thread_id=thread_id, run_id=run_id, kind=kind,
                after_id=after_id, limit=limit, newest_first=newest_first,
            )  # fmt: skip

    def put_blob(self, content: bytes, media_type: str = "application/octet-stream") -> Blob:
        """Store ``content`` once under its SHA-256 digest (a repeat put is a no-op).

        Returns:
            The blob's metadata (without content).
        """
        blob = self.blob_of(content, media_type)
        with self.repository.write(audited=False) as tx:
            tx.insert_blob(blob, self._now())  # a digest already stored is left as it is
        return blob.model_copy(update={"content": None})

    @staticmethod
    def blob_of(content: bytes, media_type: str = "application/octet-stream") -> Blob:
        """The blob ``content`` makes (digest, size, media type, preview and the content), not
        stored yet: ``complete(..., blob=...)`` and ``fail(..., blob=...)`` store it with the
        outcome that points at it."""
        return Blob(
            sha256=sha256_hex(content), size=len(content),
            media_type=blob_media_type(content, media_type), preview=blob_preview(content),
            content=content,
        )  # fmt: skip

    def get_blob(self, digest: str) -> Blob | None:
        """A blob with its content, after checking the content still hashes to ``digest``.

        Size, preview and media type are derived from the verified content (see
        :func:`verified_blob`), never read from the row's other columns.

        Raises:
            BlobCorrupted: The stored content no longer matches the digest.
        """
        with self.repository.read() as tx:
            stored = tx.stored_blob(digest)
            if stored is None:
                return None
            return verified_blob(digest, stored.content or b"", stored.media_type)

    def issue_result_pointer(
        self, digest: str, *, agent_id: str, thread_id: str, user_id: str | None
    ) -> None:
        """Record that the offloaded result ``digest`` was handed to this agent thread and user,
        the only ones that may read it back (see :mod:`supervisor.runtime.offload`)."""
        with self.repository.write(audited=False) as tx:
            tx.insert_result_pointer(digest, agent_id, thread_id, user_id or "", self._now())

    def result_pointer_issued(
        self, digest: str, *, agent_id: str, thread_id: str, user_id: str | None
    ) -> bool:
        """Whether the offloaded result ``digest`` was handed to this agent thread and user."""
        with self.repository.read() as tx:
            return tx.result_pointer_exists(digest, agent_id, thread_id, user_id or "")
