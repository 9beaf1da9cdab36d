"""The offline review service: one trace source and the index its rows are read into."""

from __future__ import annotations

from collections.abc import Iterator

from supervisor.services.review.index import ReviewIndex
from supervisor.services.review.rows import ReviewRow, iter_source, summaries_for

__all__ = ["ReviewService"]


class ReviewService:
    """One read-only review of ``source`` (a ledger path or URL, or a JSONL trace).

    The composition root builds it and closes it; the review screen reads :meth:`chunks` in a
    worker, adds them to :attr:`index` and pages the timeline out of it.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.index = ReviewIndex(summaries_for(source))

    def chunks(self) -> Iterator[list[ReviewRow]]:
        """The source's rows, one screen first, then bounded chunks.

        Raises:
            FileNotFoundError: The source does not exist.
        """
        return iter_source(self.source)

    def close(self) -> None:
        """Delete the index (a worker still reading sees :attr:`ReviewIndex.closed`)."""
        self.index.close()
