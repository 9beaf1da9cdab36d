"""The plain-Python pieces the screens are given: the results service, the review service and
the main screen's selection (no event loop)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from tui_helpers import generate_trace, propose

from screens.proposal_selection import ProposalSelection
from supervisor.ledger.errors import BlobCorrupted
from supervisor.services.guard import RenderedGuard
from supervisor.services.results import ResultsService
from supervisor.services.review.service import ReviewService
from supervisor.store.provider import SQLModelProvider

CONTENT = b'{"rows": [1, 2, 3]}'


def test_results_are_read_through_the_integrity_check(provider: SQLModelProvider) -> None:
    blob = provider.ledger.put_blob(CONTENT, "application/json")
    results = ResultsService(provider.ledger)
    for ref in (f"sha256:{blob.sha256}", f"blob:{blob.sha256}"):
        read = results.read(ref)
        assert read is not None and read.content == CONTENT
        described = results.describe(ref)
        assert described is not None and described.content is None
        assert (described.sha256, described.size) == (blob.sha256, len(CONTENT))
    assert results.read("sha256:" + "0" * 64) is None
    with provider.engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE blob SET content = :content WHERE sha256 = :digest"),
            {"content": b'{"rows": [6, 6, 6]}', "digest": blob.sha256},
        )
    with pytest.raises(BlobCorrupted):
        results.read(f"sha256:{blob.sha256}")
    with pytest.raises(BlobCorrupted):
        results.describe(f"sha256:{blob.sha256}")


def test_a_review_service_reads_its_source_into_its_own_index(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(e.model_dump_json() + "\n" for e in generate_trace(30)))
    review = ReviewService(str(trace))
    assert review.source == str(trace)
    for chunk in review.chunks():
        review.index.add(chunk)
    review.index.finish()
    assert review.index.count == 30
    folder = review.index.path.parent
    review.close()
    assert review.index.closed and not folder.exists()


def test_the_selection_resets_what_was_seen_only_when_another_proposal_is_selected(
    provider: SQLModelProvider,
) -> None:
    first = propose(provider.ledger)
    second = propose(provider.ledger, "delete_customer")
    selection = ProposalSelection()
    assert selection.select(first) and selection.pending
    guard = RenderedGuard.issue(first.proposal_id, first.args_hash, "digest")
    selection.rendered(guard, 10.0)
    selection.rendered(guard, 20.0)  # the first full drawing counts
    assert (selection.guard, selection.shown_at) == (guard, 10.0)
    assert not selection.select(first)  # the same state again: nothing to do
    decided = provider.ledger.reject(first.proposal_id, "tester", "no")
    assert selection.refresh(decided) and not selection.pending
    assert (selection.guard, selection.shown_at) == (guard, 10.0)
    assert not selection.refresh(second)
    assert selection.select(second)
    assert (selection.proposal, selection.guard, selection.shown_at) == (second, None, None)
    selection.rendered(RenderedGuard.issue(second.proposal_id, second.args_hash, "d"), 30.0)
    selection.clear()
    assert (selection.proposal, selection.guard, selection.shown_at) == (None, None, None)
