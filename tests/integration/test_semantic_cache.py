"""The semantic cache over the store: exact and similarity hits, counted, per answer context."""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.ledger.service import ApprovalLedger
from supervisor.runtime.cache import SemanticCache

_WORDS = ("price", "cost", "widget", "gadget", "weather")


class WordEmbedder:
    """Toy embedder: one dimension per known word; "cost" counts as "price"."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            words = text.replace("cost", "price").split()
            vectors.append([float(words.count(word)) for word in _WORDS])
        return vectors


def _hits(ledger: ApprovalLedger, agent_id: str, context_hash: str) -> dict[str, int]:
    with ledger.repository.read() as tx:
        entries = tx.cache_candidates(agent_id, context_hash, 10)
    return {entry.query_norm: entry.hits for entry in entries}


def test_exact_hits_are_per_agent_and_answer_context(ledger: ApprovalLedger) -> None:
    cache = SemanticCache(ledger)
    cache.store("agent", "ctx", "What is the price of a widget?", "3 EUR")

    assert cache.lookup("agent", "ctx", "what is the  PRICE of a widget") == "3 EUR"
    assert cache.lookup("agent", "other-ctx", "What is the price of a widget?") is None
    assert cache.lookup("other-agent", "ctx", "What is the price of a widget?") is None


def test_the_first_answer_stays(ledger: ApprovalLedger) -> None:
    cache = SemanticCache(ledger)
    cache.store("agent", "ctx", "price of a widget", "3 EUR")
    cache.store("agent", "ctx", "Price of a widget?", "4 EUR")

    assert cache.lookup("agent", "ctx", "price of a widget") == "3 EUR"


def test_similar_queries_hit_above_the_threshold_and_are_counted(ledger: ApprovalLedger) -> None:
    cache = SemanticCache(ledger, embedder=WordEmbedder(), similarity=0.99)
    cache.store("agent", "ctx", "price widget", "3 EUR")
    cache.store("agent", "ctx", "price gadget", "5 EUR")

    assert cache.lookup("agent", "ctx", "cost widget") == "3 EUR"
    assert cache.lookup("agent", "ctx", "weather widget") is None
    assert cache.lookup("agent", "other-ctx", "cost widget") is None
    assert _hits(ledger, "agent", "ctx") == {"price widget": 1, "price gadget": 0}

    assert cache.lookup("agent", "ctx", "price widget") == "3 EUR"
    assert _hits(ledger, "agent", "ctx") == {"price widget": 2, "price gadget": 0}
