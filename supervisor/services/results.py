"""Offloaded results for the supervisor UI: read a blob a trace event points at, checked.

Every read goes through the ledger's integrity check (the content must still hash to the
digest the pointer names), so neither the detail pane nor the viewer ever shows unchecked bytes.
"""

from __future__ import annotations

from supervisor.ledger.models import Blob
from supervisor.ledger.service import ApprovalLedger
from supervisor.outcomes.blobref import BlobRef

__all__ = ["ResultsService"]


class ResultsService:
    """Reads offloaded results out of one ledger."""

    def __init__(self, ledger: ApprovalLedger) -> None:
        self._ledger = ledger

    def read(self, blob_ref: str) -> Blob | None:
        """The blob ``blob_ref`` names, content included (``None`` when it is not stored).

        ``blob_ref`` is either form of :class:`~supervisor.outcomes.blobref.BlobRef`
        (``sha256:<hex>`` or ``blob:<hex>``); one that is neither names nothing stored.

        Raises:
            BlobCorrupted: The stored content no longer matches the digest.
            LedgerError: The ledger cannot be read.
        """
        try:
            ref = BlobRef.parse(blob_ref)
        except ValueError:
            return None
        return self._ledger.get_blob(ref.hex)

    def describe(self, blob_ref: str) -> Blob | None:
        """Like :meth:`read` (same check) but without the content: digest, size, type, preview.

        Raises:
            BlobCorrupted: The stored content no longer matches the digest.
            LedgerError: The ledger cannot be read.
        """
        blob = self.read(blob_ref)
        return None if blob is None else blob.model_copy(update={"content": None})
