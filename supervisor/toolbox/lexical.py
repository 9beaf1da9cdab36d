"""A deterministic BM25 ranker over tool search text, updated incrementally.

Scoring is Okapi BM25 (``k1=1.2``, ``b=0.75``) over weighted term frequencies (see
:mod:`supervisor.toolbox.text` for fields and weights). A query term is expanded three ways,
each expansion counting half of an exact match:

* a small table of generic synonyms (``fetch`` ~ ``get``, ``remove`` ~ ``delete``, ...);
* a partial word (three letters or more, not itself indexed) matches the indexed words it starts
  (``inv`` -> ``invoice``, ``inventory``), at most :data:`MAX_PREFIX_EXPANSIONS` of them;
* a longer word matches the longest indexed word (four letters or more) it starts with
  (``configuration`` -> ``config``).

Results are ordered by score (rounded to 9 decimals), then by key, so the same query over the
same documents gives the same ranking in every process. Documents outside ``allowed`` are never
scored.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Collection, Iterable, Mapping

from supervisor.toolbox.text import stem, tokenize

K1 = 1.2
B = 0.75
EXPANSION_WEIGHT = 0.5
MAX_PREFIX_EXPANSIONS = 8
MIN_PREFIX_CHARS = 3
_MARGIN = 1e-6

#: Generic synonym groups of software and business vocabulary (stemmed at import).
SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("get", "fetch", "retrieve", "show", "read", "view", "display", "lookup"),
    ("list", "enumerate", "browse"),
    ("create", "add", "new", "make", "insert", "register"),
    ("update", "edit", "modify", "change", "patch", "amend"),
    ("delete", "remove", "drop", "erase", "destroy", "purge"),
    ("search", "find", "query", "filter", "lookup"),
    ("send", "deliver", "dispatch"),
    ("cancel", "revoke", "abort", "void"),
    ("email", "mail"),
    ("customer", "client"),
    ("invoice", "bill"),
    ("employee", "staff", "worker"),
    ("document", "file", "doc"),
    ("meeting", "event", "appointment"),
    ("export", "download"),
    ("import", "upload"),
    ("count", "total", "number"),
    ("schedule", "book"),
    ("start", "begin", "launch"),
    ("stop", "halt", "pause"),
    ("message", "msg"),
    ("repository", "repo"),
    ("configuration", "config", "setting"),
)


def _synonym_table(groups: Iterable[Iterable[str]]) -> dict[str, tuple[str, ...]]:
    table: dict[str, set[str]] = {}
    for group in groups:
        stems = {stem(word.lower()) for word in group}
        for word in stems:
            table.setdefault(word, set()).update(stems - {word})
    return {word: tuple(sorted(others)) for word, others in table.items()}


DEFAULT_SYNONYMS: Mapping[str, tuple[str, ...]] = _synonym_table(SYNONYM_GROUPS)


class LexicalIndex:
    """An inverted index of weighted terms with BM25 scoring.

    Args:
        synonyms: Stemmed term -> stemmed synonyms; ``None`` disables synonym expansion.
        prefixes: Expand partial and over-long words against the vocabulary.
    """

    def __init__(
        self,
        *,
        synonyms: Mapping[str, tuple[str, ...]] | None = DEFAULT_SYNONYMS,
        prefixes: bool = True,
    ) -> None:
        self._synonyms: Mapping[str, tuple[str, ...]] = synonyms or {}
        self._prefixes = prefixes
        self._docs: dict[str, dict[str, float]] = {}
        self._lengths: dict[str, float] = {}
        self._total_length = 0.0
        self._postings: dict[str, dict[str, float]] = {}
        self._vocabulary: list[str] = []
        self._term_cache: dict[str, tuple[dict[str, float], float]] = {}

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, key: object) -> bool:
        return key in self._docs

    def add(self, key: str, terms: Mapping[str, float]) -> None:
        """Index (or re-index) one document.

        Args:
            key: The document's key (a tool handle); ties are broken by it.
            terms: Term -> weighted frequency.
        """
        if key in self._docs:
            self.remove(key)
        document = {term: weight for term, weight in terms.items() if weight > 0}
        self._docs[key] = document
        length = sum(document.values())
        self._lengths[key] = length
        self._total_length += length
        for term, weight in document.items():
            posting = self._postings.get(term)
            if posting is None:
                posting = self._postings[term] = {}
                bisect.insort(self._vocabulary, term)
            posting[key] = weight
        self._term_cache.clear()

    def remove(self, key: str) -> None:
        """Drop one document; unknown keys are ignored."""
        document = self._docs.pop(key, None)
        if document is None:
            return
        self._total_length -= self._lengths.pop(key)
        for term in document:
            posting = self._postings[term]
            del posting[key]
            if not posting:
                del self._postings[term]
                index = bisect.bisect_left(self._vocabulary, term)
                del self._vocabulary[index]
        self._term_cache.clear()

    def expand_query(self, query: str) -> dict[str, float]:
        """Stemmed query terms with their weights, after synonym and prefix expansion."""
        expanded: dict[str, float] = {}

        def put(term: str, weight: float) -> None:
            if term in self._postings and expanded.get(term, 0.0) < weight:
                expanded[term] = weight

        for term in dict.fromkeys(tokenize(query)):
            put(term, 1.0)
            for synonym in self._synonyms.get(term, ()):
                put(synonym, EXPANSION_WEIGHT)
            if not self._prefixes or term in self._postings:
                continue
            for candidate in self._prefix_matches(term):
                put(candidate, EXPANSION_WEIGHT)
            for end in range(len(term) - 1, 3, -1):
                if term[:end] in self._postings:
                    put(term[:end], EXPANSION_WEIGHT)
                    break
        return expanded

    def _prefix_matches(self, term: str) -> list[str]:
        if len(term) < MIN_PREFIX_CHARS:
            return []
        start = bisect.bisect_left(self._vocabulary, term)
        matches: list[str] = []
        for candidate in self._vocabulary[start : start + MAX_PREFIX_EXPANSIONS]:
            if not candidate.startswith(term):
                break
            matches.append(candidate)
        return matches

    def _term_weights(self, term: str) -> tuple[dict[str, float], float]:
        """BM25 contribution of ``term`` to every document holding it, and the largest one.

        Cached until the index changes (the average document length moves with every change).
        """
        cached = self._term_cache.get(term)
        if cached is not None:
            return cached
        posting = self._postings[term]
        count = len(self._docs)
        frequency = len(posting)
        idf = math.log(1.0 + (count - frequency + 0.5) / (frequency + 0.5))
        average = self._total_length / count if count else 1.0
        lengths = self._lengths
        weights = {
            key: idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * lengths[key] / average))
            for key, tf in posting.items()
        }
        entry = (weights, max(weights.values()))
        self._term_cache[term] = entry
        return entry

    def scores(
        self,
        query: str,
        *,
        allowed: Collection[str] | None = None,
        limit: int | None = None,
    ) -> dict[str, float]:
        """BM25 scores of allowed documents matching at least one query term.

        With ``limit``, documents that provably cannot reach the best ``limit`` are skipped
        (MaxScore pruning): terms are visited by decreasing upper bound, and once the current
        ``limit``-th score beats every remaining term's bound combined, only documents already
        scored are updated, and those that can no longer catch up are dropped. The scores of
        the documents that can make the top ``limit`` are exact either way.
        """
        terms = []
        for term, query_weight in self.expand_query(query).items():
            weights, largest = self._term_weights(term)
            terms.append((query_weight * largest, term, query_weight, weights))
        terms.sort(key=lambda item: (-item[0], item[1]))
        remaining = sum(item[0] for item in terms)
        totals: dict[str, float] = {}
        closed = False
        for bound, _, query_weight, weights in terms:
            if limit is not None and not closed and len(totals) >= limit:
                threshold = heapq.nlargest(limit, totals.values())[-1]
                if threshold > remaining + _MARGIN:
                    closed = True
                    totals = {
                        key: score
                        for key, score in totals.items()
                        if score + remaining + _MARGIN >= threshold
                    }
            if closed and len(totals) < len(weights):
                for key in totals:
                    weight = weights.get(key)
                    if weight is not None:
                        totals[key] += query_weight * weight
            else:
                get = totals.get
                for key, weight in weights.items():
                    if closed and key not in totals:
                        continue
                    if allowed is not None and key not in allowed:
                        continue
                    totals[key] = get(key, 0.0) + query_weight * weight
            remaining -= bound
        return totals

    def search(
        self, query: str, *, allowed: Collection[str] | None = None, limit: int | None = None
    ) -> list[tuple[str, float]]:
        """Rank allowed documents for ``query``.

        Args:
            query: Free text.
            allowed: Keys that may be scored (``None``: every key). Others are never touched.
            limit: Keep only the best ``limit`` results (``None``: all matches).

        Returns:
            ``(key, score)`` pairs, best first; ties broken by key. Documents with no matching
            term are not returned.
        """
        totals = self.scores(query, allowed=allowed, limit=limit)
        ranked = [(key, round(score, 9)) for key, score in totals.items()]
        if limit is None:
            return sorted(ranked, key=_order)
        return heapq.nsmallest(limit, ranked, key=_order)


def _order(item: tuple[str, float]) -> tuple[float, str]:
    return (-item[1], item[0])
