"""The semantic cache: answers replayed for repeated questions, admitted only when clean.

Admission (what may be cached): a completed run on a new thread whose every tool call was to a
deterministic, side-effect free tool and ended ``success`` or ``empty``. Any side-effecting tool,
any approval, and any other outcome (``degraded``, ``fallback``, ``provider_error``, ``error``,
decisions) bypass admission for that run, so a degraded or failed provider response is never
replayed later as though it were a clean primary-provider success.

A call refused before it ran (unknown or out-of-scope tool, a limit, invalid arguments) records
an ``error`` outcome, so a run that only "answered" after a refusal is never admitted.

Lookup: the key is the agent, the normalised query (Unicode NFKC, case-folded, whitespace
collapsed, trailing punctuation dropped) and the answer context (:func:`answer_context`): the
agent's tool contracts, the user, the tools that user's scope reaches, the instructions, the
model configuration and the context policy. Changing any of them misses; an answer built for
one user (with that user's scoped tools) is never served to another user. The context hash is
stored in the ``tools_hash`` column, and similarity lookups compare only entries of the same
agent and context. With an embedder, a near-identical query (cosine similarity at or above the
threshold) also hits. Hits are traced.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from supervisor.canonical import canonical_hash
from supervisor.ledger.models import CacheEntry
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.repository import LedgerTx

CLEAN_STATUSES = frozenset({"success", "empty"})
_SPACE = re.compile(r"\s+")


class Embedder(Protocol):
    """Anything that turns texts into vectors (a local model; never a hub download)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def normalise_query(query: str) -> str:
    """The cache's view of a query (see the module docstring)."""
    text = unicodedata.normalize("NFKC", query).casefold()
    return _SPACE.sub(" ", text).strip().rstrip("?!.").strip()


def answer_context(
    *,
    tools_hash: str,
    user_id: str | None,
    scope: Iterable[str],
    config: Mapping[str, Any],
) -> str:
    """The hash of everything besides the query that shapes an answer.

    Args:
        tools_hash: Hash of the agent's tool contracts.
        user_id: On whose behalf the agent acts (``None``: no user).
        scope: The names or handles of the tools the user's scope reaches.
        config: The rest of the agent's answer-shaping configuration (JSON data).
    """
    return canonical_hash(
        {"tools": tools_hash, "user": user_id, "scope": sorted(scope), "config": dict(config)}
    )


def _cosine(left: Sequence[float], right: Sequence[float]) -> float:
    dot = sum(a * b for a, b in zip(left, right, strict=False))
    norms = math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right))
    return dot / norms if norms else 0.0


class SemanticCache:
    """Cached final answers in the ledger, shared by every process on it.

    Args:
        ledger: Where entries live.
        embedder: Optional; enables similarity hits.
        similarity: Cosine threshold for a similarity hit.
        scan_limit: How many recent entries of the agent a similarity lookup compares.
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        *,
        embedder: Embedder | None = None,
        similarity: float = 0.95,
        scan_limit: int = 500,
    ) -> None:
        self.ledger = ledger
        self.embedder = embedder
        self.similarity = similarity
        self.scan_limit = scan_limit

    @staticmethod
    def key(agent_id: str, context_hash: str, query: str) -> str:
        """The entry key for a query in an answer context (see :func:`answer_context`)."""
        return canonical_hash([agent_id, context_hash, normalise_query(query)])

    @staticmethod
    def admissible(outcomes: Iterable[Mapping[str, Any]], tools: Iterable[Any]) -> bool:
        """Whether a run may be cached: only clean calls to deterministic, read-only tools."""
        by_name = {tool.name: tool for tool in tools}
        for outcome in outcomes:
            tool = by_name.get(outcome.get("tool_name", ""))
            if tool is None or not tool.policy.cacheable:
                return False
            if outcome.get("status") not in CLEAN_STATUSES:
                return False
        return True

    def lookup(self, agent_id: str, context_hash: str, query: str) -> str | None:
        """The cached answer for ``query`` in that answer context, or None; a hit is counted."""
        key = self.key(agent_id, context_hash, query)
        now = self.ledger.clock.now()
        with self.ledger.repository.write(audited=False) as tx:
            answer = tx.cache_hit(key, now)
            if answer is None and self.embedder is not None:
                similar = self._similar(tx, agent_id, context_hash, query)
                if similar is not None:
                    answer = tx.cache_hit(similar, now)
            return answer

    def _similar(self, tx: LedgerTx, agent_id: str, context_hash: str, query: str) -> str | None:
        """The key of the stored entry most similar to ``query`` at or above the threshold."""
        assert self.embedder is not None
        (vector,) = self.embedder.embed([normalise_query(query)])
        best: tuple[float, str] | None = None
        for entry in tx.cache_candidates(agent_id, context_hash, self.scan_limit):
            score = _cosine(vector, entry.embedding or [])
            if score >= self.similarity and (best is None or score > best[0]):
                best = (score, entry.key)
        return None if best is None else best[1]

    def store(self, agent_id: str, context_hash: str, query: str, answer: str) -> None:
        """Cache ``answer`` for that answer context (callers check :meth:`admissible` first)."""
        normalised = normalise_query(query)
        embedding = None
        if self.embedder is not None:
            embedding = self.embedder.embed([normalised])[0]
        entry = CacheEntry(
            key=self.key(agent_id, context_hash, query), agent_id=agent_id,
            context_hash=context_hash, query_norm=normalised, answer=answer,
            embedding=embedding, hits=0, created_at=self.ledger.clock.now(),
        )  # fmt: skip
        # The write lock serialises concurrent stores of the same key on both engines.
        with self.ledger.repository.write() as tx:
            tx.add_cache_entry(entry)
