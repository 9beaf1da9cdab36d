"""Offloading of large tool results, and the tools that read them back.

A result whose JSON text is longer than ``ToolResultPolicy.offload_above_chars`` is stored once
in the ledger as a blob (UTF-8, ``application/json``, keyed by its SHA-256) and the model
receives a small, auditable pointer instead: digest, sizes, tool, call id, a bounded preview,
identifiers found in the result, and how to read it (``expand_result``) or search it
(``search_result``). Every read re-hashes the stored content against the digest.

The expansion tools' own results are never offloaded (:data:`NEVER_OFFLOAD`): each is bounded by
the page limit, so a pointer can never lead to another pointer.

A pointer is usable only where it was issued: each offload records the agent, thread and user
of the run that produced it (:func:`~supervisor.runtime.pointers.pointer_scope`, set by the
runtime around each run and resume), and a read from any other scope — another agent, thread
or user, or a digest that was never an offloaded result such as a sandbox's output — is refused
exactly like an unknown digest. The rules are in ``docs/results.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import Field

from supervisor.canonical import sha256_hex
from supervisor.errors import model_error
from supervisor.ledger.errors import BlobCorrupted
from supervisor.ledger.models import Blob
from supervisor.outcomes.blobref import POINTER_PREFIX, BlobRef
from supervisor.runtime.errors import (
    BlobIntegrityFailed,
    BlobNotText,
    InvalidDigest,
    OffloadError,
    UnknownBlob,
)
from supervisor.runtime.identifiers import extract_identifiers
from supervisor.runtime.pointers import current_scope
from supervisor.runtime.policies import ToolResultPolicy
from supervisor.tools.governed import GovernedTool, governed_tool

EXPAND_TOOL = "expand_result"
SEARCH_TOOL = "search_result"
NEVER_OFFLOAD: frozenset[str] = frozenset({EXPAND_TOOL, SEARCH_TOOL})
"""Tools whose results always reach the model inline (they are bounded by the page limit)."""

MEDIA_TYPE = "application/json"
SEARCH_CONTEXT_CHARS = 80
"""Characters of context kept on each side of a search hit (never across a line break)."""
SEARCH_MAX_HITS = 50
SEARCH_MAX_QUERY_CHARS = 200
JsonObject = dict[str, Any]
DigestArg = Annotated[
    str,
    Field(
        pattern=r"^(sha256:)?[0-9a-fA-F]{64}$",
        description="Digest from the offloaded_result pointer ('sha256:' prefix optional).",
    ),
]
OffsetArg = Annotated[int, Field(ge=0, description="First character to read (0-based).")]
QueryArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=SEARCH_MAX_QUERY_CHARS,
        description="Text to find (case-insensitive substring).",
    ),
]
MaxHitsArg = Annotated[int, Field(ge=1, le=SEARCH_MAX_HITS, description="Most hits to return.")]


@runtime_checkable
class BlobStore(Protocol):
    """Where blobs and issued pointers live: the approval ledger satisfies it."""

    def put_blob(self, content: bytes, media_type: str = ...) -> Blob: ...

    def get_blob(self, digest: str) -> Blob | None: ...

    def issue_result_pointer(
        self, digest: str, *, agent_id: str, thread_id: str, user_id: str | None
    ) -> None: ...

    def result_pointer_issued(
        self, digest: str, *, agent_id: str, thread_id: str, user_id: str | None
    ) -> bool: ...


class LedgerHolder(Protocol):
    """A memory provider (``SQLModelProvider``) whose ledger stores the blobs."""

    @property
    def ledger(self) -> BlobStore: ...


@dataclass(frozen=True, slots=True)
class OffloadDecision:
    """What the model receives for one tool result.

    Attributes:
        model_content: The text for the model's tool message (the result, or the pointer).
        pointer: The pointer as JSON data when the result was offloaded, else None.
        digest: ``sha256:<hex>`` of the stored blob when offloaded, else None.
    """

    model_content: str
    pointer: dict[str, Any] | None = None
    digest: str | None = None

    @property
    def offloaded(self) -> bool:
        """True when the model receives a pointer instead of the result."""
        return self.pointer is not None


def normalise_digest(digest: str) -> str:
    """The lowercase hex of a digest given with or without the ``sha256:`` prefix.

    Raises:
        InvalidDigest: ``digest`` is not 64 hex characters.
    """
    try:
        return BlobRef.from_pointer(digest.strip().lower()).hex
    except ValueError:
        raise InvalidDigest(
            f"{digest[:80]!r} is not a SHA-256 digest.",
            hint="Pass the digest from the pointer, e.g. 'sha256:' followed by 64 hex digits.",
        ) from None


class ResultOffloader:
    """Decides what the model sees for each tool result and serves the stored ones back.

    Args:
        store: A memory provider (its ``ledger`` is used, opened on first use) or any object
            with ``put_blob``/``get_blob`` such as the ledger itself.
        policy: Thresholds and page sizes; the defaults of :class:`ToolResultPolicy` if None.
    """

    def __init__(
        self, store: BlobStore | LedgerHolder, policy: ToolResultPolicy | None = None
    ) -> None:
        self._source = store
        self.policy = policy or ToolResultPolicy()

    @property
    def blobs(self) -> BlobStore:
        """The blob store (a provider's ledger is resolved on each use, so it can reopen)."""
        source = self._source
        return source if isinstance(source, BlobStore) else source.ledger

    def should_offload(self, tool_name: str, content: str) -> bool:
        """Whether ``content`` from ``tool_name`` would be replaced by a pointer."""
        return tool_name not in NEVER_OFFLOAD and len(content) > self.policy.offload_above_chars

    def offload(
        self, tool_name: str, call_id: str, content: str, *, force: bool = False
    ) -> OffloadDecision:
        """Decide what the model receives for one tool result, storing it if it is large.

        The pointer is issued to the current pointer scope (only it can read it back).

        Args:
            tool_name: The tool that produced the result.
            call_id: The model's tool-call id (recorded in the pointer for audit).
            content: The JSON text the model would receive.
            force: Offload whatever the size (a result above the agent's inline cap); the
                expansion tools' own results are still never offloaded.

        Returns:
            Inline content unchanged, or a pointer (JSON text) to the stored blob.
        """
        wanted = force and tool_name not in NEVER_OFFLOAD
        if not (wanted or self.should_offload(tool_name, content)):
            return OffloadDecision(model_content=content)
        encoded = content.encode("utf-8")
        blobs = self.blobs
        blob = blobs.put_blob(encoded, MEDIA_TYPE)
        scope = current_scope()
        blobs.issue_result_pointer(
            blob.sha256, agent_id=scope.agent_id, thread_id=scope.thread_id,
            user_id=scope.user_id,
        )  # fmt: skip
        digest = BlobRef(blob.sha256).pointer
        pointer = self._pointer(tool_name, call_id, content, digest, len(encoded))
        model_content = json.dumps(pointer, ensure_ascii=False)
        return OffloadDecision(model_content=model_content, pointer=pointer, digest=digest)

    def read(self, digest: str) -> str:
        """The full stored text of an offloaded result, after an integrity check.

        Args:
            digest: ``sha256:<hex>`` or the bare hex.

        Returns:
            The text exactly as it was offloaded.

        Raises:
            InvalidDigest: ``digest`` is malformed.
            UnknownBlob: No pointer to ``digest`` was issued to the current scope (another
                agent's, thread's or user's result, a blob that is not an offloaded result,
                or nothing at all: the same error for each).
            BlobIntegrityFailed: The stored content does not hash to ``digest``.
            BlobNotText: The blob is not UTF-8 text.
        """
        hex_digest = normalise_digest(digest)
        blobs = self.blobs
        scope = current_scope()
        issued = blobs.result_pointer_issued(
            hex_digest, agent_id=scope.agent_id, thread_id=scope.thread_id,
            user_id=scope.user_id,
        )  # fmt: skip
        if not issued:
            raise _unknown_blob(hex_digest)
        try:
            blob = blobs.get_blob(hex_digest)
        except BlobCorrupted as exc:
            raise _integrity_error(hex_digest, str(exc.details.get("actual", ""))) from None
        if blob is None:
            raise _unknown_blob(hex_digest)
        content = blob.content or b""
        actual = sha256_hex(content)
        if actual != hex_digest:
            raise _integrity_error(hex_digest, actual)
        try:
            return content.decode("utf-8")
        except UnicodeDecodeError:
            raise BlobNotText(
                f"Blob {BlobRef(hex_digest).pointer} is not UTF-8 text.",
                hint="Only offloaded tool results can be expanded.",
                digest=BlobRef(hex_digest).pointer,
            ) from None

    def page(self, digest: str, offset: int = 0, limit: int | None = None) -> dict[str, Any]:
        """One page of an offloaded result, in characters.

        Args:
            digest: ``sha256:<hex>`` or the bare hex.
            offset: First character (0-based); past the end gives an empty page.
            limit: Characters wanted; the policy's page size if None, capped at its maximum.

        Returns:
            ``{"digest", "offset", "limit", "total_chars", "text", "next_offset"}``; next_offset
            is None on the last page.

        Raises:
            ValueError: ``offset`` is negative or ``limit`` is below 1.
            OffloadError: as :meth:`read`.
        """
        wanted = self.policy.expansion_page_chars if limit is None else limit
        if offset < 0 or wanted < 1:
            raise ValueError("offset must be >= 0 and limit >= 1")
        wanted = min(wanted, self.policy.expansion_max_page_chars)
        text = self.read(digest)
        end = min(offset + wanted, len(text))
        return {
            "digest": BlobRef(normalise_digest(digest)).pointer,
            "offset": offset,
            "limit": wanted,
            "total_chars": len(text),
            "text": text[offset:end] if offset < len(text) else "",
            "next_offset": end if end < len(text) else None,
        }

    def search(self, digest: str, query: str, max_hits: int = 10) -> dict[str, Any]:
        """Case-insensitive substring search in an offloaded result.

        Hits do not overlap. Each carries the character offset of the match, its 1-based line
        and a snippet of the line around it (at most :data:`SEARCH_CONTEXT_CHARS` either side)
        with the snippet's own offset. The snippets together stay within the policy's maximum
        page, so the result is bounded like a page.

        Args:
            digest: ``sha256:<hex>`` or the bare hex.
            query: Text to find (1 to :data:`SEARCH_MAX_QUERY_CHARS` characters).
            max_hits: At most this many hits (1 to :data:`SEARCH_MAX_HITS`).

        Returns:
            ``{"digest", "query", "total_chars", "matches": [...], "more_matches"}``.

        Raises:
            ValueError: ``query`` is empty or too long, or ``max_hits`` is out of range.
            OffloadError: as :meth:`read`.
        """
        if not 1 <= len(query) <= SEARCH_MAX_QUERY_CHARS or not 1 <= max_hits <= SEARCH_MAX_HITS:
            raise ValueError("query needs 1-200 characters and max_hits 1-50")
        text = self.read(digest)
        budget = self.policy.expansion_max_page_chars
        matches: list[dict[str, Any]] = []
        more = False
        for found in re.finditer(re.escape(query), text, re.IGNORECASE):
            start, end = found.span()
            line_start = text.rfind("\n", 0, start) + 1
            line_end = text.find("\n", end)
            line_end = len(text) if line_end < 0 else line_end
            snippet_start = max(line_start, start - SEARCH_CONTEXT_CHARS)
            snippet = text[snippet_start : min(line_end, end + SEARCH_CONTEXT_CHARS)]
            if len(matches) >= max_hits or len(snippet) > budget:
                more = True
                break
            budget -= len(snippet)
            matches.append(
                {
                    "offset": start,
                    "line": text.count("\n", 0, start) + 1,
                    "snippet_offset": snippet_start,
                    "snippet": snippet,
                }
            )
        return {
            "digest": BlobRef(normalise_digest(digest)).pointer,
            "query": query,
            "total_chars": len(text),
            "matches": matches,
            "more_matches": more,
        }

    def tools(self) -> list[GovernedTool[..., dict[str, Any]]]:
        """The expansion tools bound to this offloader (see :func:`expansion_tools`)."""
        return expansion_tools(self)

    def _pointer(
        self, tool_name: str, call_id: str, content: str, digest: str, size_bytes: int
    ) -> dict[str, Any]:
        # The escaped preview takes at most a quarter of the threshold and the identifiers an
        # eighth, so a pointer stays below ~40% of the threshold plus ~800 fixed characters.
        threshold = self.policy.offload_above_chars
        preview = _json_prefix(content, min(self.policy.preview_chars, threshold // 8))
        identifiers = _within_budget(
            extract_identifiers(content, limit=self.policy.max_identifiers), threshold // 8
        )
        return {
            "offloaded_result": {
                "digest": digest,
                "size_chars": len(content),
                "size_bytes": size_bytes,
                "media_type": MEDIA_TYPE,
                "tool": tool_name,
                "call_id": call_id,
                "preview": preview,
                "identifiers": identifiers,
                "note": "The full result is stored. Read it page by page with expand_with, or "
                "find text with search_with after adding a query.",
                "expand_with": {
                    "tool": EXPAND_TOOL,
                    "arguments": {
                        "digest": digest,
                        "offset": 0,
                        "limit": self.policy.expansion_page_chars,
                    },
                },
                "search_with": {
                    "tool": SEARCH_TOOL,
                    "arguments": {"digest": digest, "max_hits": 10},
                    "required": ["query"],
                },
            }
        }


def expansion_tools(offloader: ResultOffloader) -> list[GovernedTool[..., dict[str, Any]]]:
    """``expand_result`` and ``search_result`` as governed tools over ``offloader``'s blobs.

    Both are deterministic reads without side effects. Arguments are validated by the normal
    governed pipeline (a malformed digest, a negative offset or a page above
    ``expansion_max_page_chars`` is refused unrun). A missing or corrupted blob is reported to
    the model as ``{"error": {"code": "unknown_blob" | "blob_integrity_failed", ...}}``.

    Args:
        offloader: Where the results are stored, and the page sizes.

    Returns:
        ``[expand_result, search_result]``.
    """
    policy = offloader.policy
    page_chars = policy.expansion_page_chars

    def expand_result(
        digest: DigestArg, offset: OffsetArg = 0, limit: int = page_chars
    ) -> JsonObject:
        """Read one page of an offloaded tool result; continue from next_offset until null."""
        return _reported(lambda: offloader.page(digest, offset, limit))

    def search_result(digest: DigestArg, query: QueryArg, max_hits: MaxHitsArg = 10) -> JsonObject:
        """Find text in an offloaded tool result (case-insensitive); hits carry offsets."""
        return _reported(lambda: offloader.search(digest, query, max_hits))

    # The page bound comes from this offloader's policy, so it is a real annotation object.
    maximum = policy.expansion_max_page_chars
    expand_result.__annotations__["limit"] = Annotated[
        int, Field(ge=1, le=maximum, description=f"Characters to read, at most {maximum}.")
    ]
    return [governed_tool(expand_result), governed_tool(search_result)]


def _reported(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a read; a missing or corrupted blob becomes a structured error for the model."""
    try:
        return read()
    except OffloadError as error:
        return model_error(error.code, error.message)


def _unknown_blob(hex_digest: str) -> UnknownBlob:
    """The one refusal for a digest this scope may not read, whatever the reason."""
    return UnknownBlob(
        f"No offloaded result is stored under {BlobRef(hex_digest).pointer}.",
        hint="Use the digest from the offloaded_result pointer of this conversation.",
        digest=BlobRef(hex_digest).pointer,
    )


def _integrity_error(hex_digest: str, actual: str) -> BlobIntegrityFailed:
    return BlobIntegrityFailed(
        f"The result stored under {POINTER_PREFIX}{hex_digest[:12]}... no longer matches its "
        "digest, so it is not returned.",
        hint="Do not rely on this result; run the tool again or restore the ledger.",
        digest=BlobRef(hex_digest).pointer,
        actual=POINTER_PREFIX + actual if actual else None,
    )


def _json_prefix(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters of ``text``, shortened only if JSON escaping would
    more than double them (text full of control characters or backslashes)."""
    prefix = text[:max_chars]
    budget = 2 * max_chars
    if len(json.dumps(prefix, ensure_ascii=False)) - 2 <= budget:
        return prefix
    used = 0
    for index, char in enumerate(prefix):
        used += len(json.dumps(char, ensure_ascii=False)) - 2
        if used > budget:
            return prefix[:index]
    return prefix


def _within_budget(identifiers: list[str], budget: int) -> list[str]:
    """The leading identifiers whose JSON-escaped lengths fit ``budget`` together."""
    kept: list[str] = []
    for identifier in identifiers:
        cost = len(json.dumps(identifier, ensure_ascii=False)) + 2
        if cost > budget:
            break
        budget -= cost
        kept.append(identifier)
    return kept
