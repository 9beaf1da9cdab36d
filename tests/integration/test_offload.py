"""Large tool results: stored once, replaced by a pointer, read back page by page with integrity.

Every test runs against a real SQLite file and a real PostgreSQL database (``ledger_url``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from supervisor.canonical import sha256_hex
from supervisor.runtime.errors import BlobIntegrityFailed, UnknownBlob
from supervisor.runtime.offload import (
    NEVER_OFFLOAD,
    OffloadDecision,
    ResultOffloader,
    expansion_tools,
)
from supervisor.runtime.policies import ToolResultPolicy
from supervisor.store.provider import SQLModelProvider
from supervisor.tools import GovernedTool

ORDER_UUID = "9f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"
NEEDLE = "NeEdLe-7f3a"


@pytest.fixture
def provider(ledger_url: str) -> Iterator[SQLModelProvider]:
    with SQLModelProvider(ledger_url) as opened:
        yield opened


def _large_result(total_chars: int = 200_000) -> str:
    """A realistic JSON result of exactly ``total_chars`` characters, multi-byte included."""
    rows: list[dict[str, Any]] = [
        {
            "order_id": "ord-0001",
            "uuid": ORDER_UUID,
            "customer": {"email": "ana@example.com", "name": "Ana Ñúñez"},
            "href": "https://shop.example.com/orders/ord-0001",
            "note": 'Ünïcødé ✓ 日本語 🚚 "quoted"',
        }
    ]
    rows += [
        {"order_id": f"ord-{index:04d}", "note": f"ítem {index} — 配送 📦"}
        for index in range(2, 2200)
    ]
    body = json.dumps({"orders": rows}, ensure_ascii=False)
    filler = total_chars - len(body) - len(', "tail": ""')
    assert filler > 0
    tail = ("€" * (filler // 2)) + NEEDLE + ("x" * (filler - filler // 2 - len(NEEDLE)))
    content = body[:-1] + f', "tail": "{tail}"' + "}"
    assert len(content) == total_chars
    json.loads(content)
    return content


def _blob_rows(provider: SQLModelProvider, hex_digest: str) -> int:
    with provider.engine.connect() as connection:
        count = connection.execute(
            text("SELECT count(*) FROM blob WHERE sha256 = :digest"), {"digest": hex_digest}
        ).scalar_one()
    return int(count)


def _all_blob_rows(provider: SQLModelProvider) -> int:
    with provider.engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM blob")).scalar_one())


def _tools(offloader: ResultOffloader) -> tuple[GovernedTool[..., Any], GovernedTool[..., Any]]:
    expand, search = expansion_tools(offloader)
    assert (expand.name, search.name) == ("expand_result", "search_result")
    return expand, search


def test_large_result_becomes_a_small_auditable_pointer(provider: SQLModelProvider) -> None:
    offloader = ResultOffloader(provider, ToolResultPolicy())
    content = _large_result()

    decision = offloader.offload("list_orders", "call_abc", content)

    assert decision.offloaded
    assert len(decision.model_content) < 2_000
    assert json.loads(decision.model_content) == decision.pointer
    assert decision.pointer is not None
    pointer = decision.pointer["offloaded_result"]
    hex_digest = sha256_hex(content.encode("utf-8"))
    assert decision.digest == pointer["digest"] == f"sha256:{hex_digest}"
    assert pointer["size_chars"] == 200_000
    assert pointer["size_bytes"] == len(content.encode("utf-8")) > 200_000
    assert (pointer["tool"], pointer["call_id"]) == ("list_orders", "call_abc")
    assert pointer["preview"] == content[:600]
    assert pointer["identifiers"][:5] == [
        "ord-0001",
        ORDER_UUID,
        "ana@example.com",
        "https://shop.example.com/orders/ord-0001",
        "ord-0002",
    ]
    assert len(pointer["identifiers"]) == 20
    assert pointer["expand_with"] == {
        "tool": "expand_result",
        "arguments": {"digest": decision.digest, "offset": 0, "limit": 4_000},
    }
    assert pointer["search_with"]["tool"] == "search_result"
    assert pointer["search_with"]["arguments"]["digest"] == decision.digest
    assert _blob_rows(provider, hex_digest) == 1


def test_repeated_result_is_stored_once(provider: SQLModelProvider, ledger_url: str) -> None:
    content = _large_result()
    first = ResultOffloader(provider).offload("list_orders", "call_1", content)
    second = ResultOffloader(provider).offload("list_orders", "call_2", content)
    with SQLModelProvider(ledger_url) as other_process:
        third = ResultOffloader(other_process).offload("export_orders", "call_3", content)

    assert first.digest == second.digest == third.digest
    assert first.pointer is not None and third.pointer is not None
    assert third.pointer["offloaded_result"]["call_id"] == "call_3"
    assert _all_blob_rows(provider) == 1


def test_expansion_pages_reproduce_the_content_exactly(provider: SQLModelProvider) -> None:
    offloader = ResultOffloader(provider, ToolResultPolicy())
    content = _large_result()
    decision = offloader.offload("list_orders", "call_1", content)
    assert decision.pointer is not None
    expand, _ = _tools(offloader)
    arguments = dict(decision.pointer["offloaded_result"]["expand_with"]["arguments"])

    pages: list[str] = []
    calls = 0
    while True:
        result = expand.dispatch(arguments)
        calls += 1
        assert result.ok, result.value
        page = result.value
        assert page["total_chars"] == len(content)
        assert len(page["text"]) <= 4_000
        pages.append(page["text"])
        if page["next_offset"] is None:
            break
        arguments["offset"] = page["next_offset"]

    assert "".join(pages) == content
    assert calls == 50


def test_expansion_accepts_bare_digest_and_caps_direct_reads(provider: SQLModelProvider) -> None:
    offloader = ResultOffloader(provider, ToolResultPolicy())
    content = _large_result()
    decision = offloader.offload("list_orders", "call_1", content)
    assert decision.digest is not None
    bare = decision.digest.removeprefix("sha256:")
    expand, _ = _tools(offloader)

    page = expand.dispatch({"digest": bare.upper(), "offset": 199_990, "limit": 8_000}).value
    assert page["digest"] == decision.digest
    assert page["text"] == content[199_990:]
    assert page["next_offset"] is None
    past_end = expand.dispatch({"digest": bare, "offset": 500_000}).value
    assert (past_end["text"], past_end["next_offset"]) == ("", None)
    assert len(offloader.page(bare, 0, 1_000_000)["text"]) == 8_000


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"offset": -1}, "invalid_arguments"),
        ({"limit": 8_001}, "invalid_arguments"),
        ({"limit": 0}, "invalid_arguments"),
        ({"offset": "10"}, "invalid_arguments"),
        ({"digest": "sha256:xyz"}, "invalid_arguments"),
    ],
)
def test_out_of_range_expansion_is_refused_by_validation(
    provider: SQLModelProvider, arguments: dict[str, Any], code: str
) -> None:
    offloader = ResultOffloader(provider)
    decision = offloader.offload("list_orders", "call_1", _large_result())
    expand, _ = _tools(offloader)

    result = expand.dispatch({"digest": decision.digest, **arguments})

    assert not result.ok
    assert result.value["error"]["code"] == code


def test_search_finds_a_planted_needle_with_its_offset(provider: SQLModelProvider) -> None:
    offloader = ResultOffloader(provider)
    content = _large_result()
    decision = offloader.offload("list_orders", "call_1", content)
    _, search = _tools(offloader)

    result = search.dispatch({"digest": decision.digest, "query": NEEDLE.lower()})

    assert result.ok, result.value
    matches = result.value["matches"]
    assert len(matches) == 1
    hit = matches[0]
    assert hit["offset"] == content.index(NEEDLE) > 100_000
    assert content[hit["offset"] : hit["offset"] + len(NEEDLE)] == NEEDLE
    assert NEEDLE in hit["snippet"]
    assert content[hit["snippet_offset"] :].startswith(hit["snippet"])
    assert result.value["more_matches"] is False


def test_search_is_bounded(provider: SQLModelProvider) -> None:
    offloader = ResultOffloader(provider)
    content = _large_result()
    decision = offloader.offload("list_orders", "call_1", content)
    _, search = _tools(offloader)

    result = search.dispatch({"digest": decision.digest, "query": "ORD-", "max_hits": 5}).value
    assert [hit["offset"] for hit in result["matches"]] == [
        index for index in _find_all(content, "ord-")[:5]
    ]
    assert result["more_matches"] is True
    refused = search.dispatch({"digest": decision.digest, "query": "ord", "max_hits": 51})
    assert refused.value["error"]["code"] == "invalid_arguments"
    missing = search.dispatch({"digest": decision.digest, "query": "no such text"}).value
    assert (missing["matches"], missing["more_matches"]) == ([], False)


def _find_all(content: str, query: str) -> list[int]:
    found: list[int] = []
    start = content.find(query)
    while start >= 0:
        found.append(start)
        start = content.find(query, start + len(query))
    return found


def test_corrupted_blob_is_reported_not_returned(provider: SQLModelProvider) -> None:
    offloader = ResultOffloader(provider)
    content = _large_result()
    decision = offloader.offload("list_orders", "call_1", content)
    assert decision.digest is not None
    hex_digest = decision.digest.removeprefix("sha256:")
    tampered = content.replace("ord-0001", "ord-9999", 1).encode("utf-8")
    with provider.engine.begin() as connection:
        updated = connection.execute(
            text("UPDATE blob SET content = :content WHERE sha256 = :digest"),
            {"content": tampered, "digest": hex_digest},
        )
        assert updated.rowcount == 1
    expand, search = _tools(offloader)

    for result in (
        expand.dispatch({"digest": decision.digest}),
        search.dispatch({"digest": decision.digest, "query": "ord-9999"}),
    ):
        assert not result.ok
        assert result.value["error"]["code"] == "blob_integrity_failed"
        assert result.outcome.reason_code == "blob_integrity_failed"
        assert "ord-9999" not in json.dumps(result.value)
    with pytest.raises(BlobIntegrityFailed):
        offloader.read(decision.digest)


def test_unknown_digest_is_a_structured_error(provider: SQLModelProvider) -> None:
    offloader = ResultOffloader(provider)
    expand, search = _tools(offloader)
    digest = "sha256:" + sha256_hex(b"never stored")

    for result in (
        expand.dispatch({"digest": digest}),
        search.dispatch({"digest": digest, "query": "x"}),
    ):
        assert result.value["error"]["code"] == "unknown_blob"
        assert result.outcome.reason_code == "unknown_blob"
    with pytest.raises(UnknownBlob):
        offloader.read(digest)


def test_expansion_output_is_never_offloaded(provider: SQLModelProvider) -> None:
    policy = ToolResultPolicy(
        offload_above_chars=256, expansion_page_chars=8_000, expansion_max_page_chars=8_000
    )
    offloader = ResultOffloader(provider, policy)
    content = _large_result()
    decision = offloader.offload("list_orders", "call_1", content)
    expand, search = _tools(offloader)
    assert {expand.name, search.name} == NEVER_OFFLOAD
    blobs_before = _all_blob_rows(provider)

    page = expand.dispatch({"digest": decision.digest, "offset": 0, "limit": 8_000})
    hits = search.dispatch({"digest": decision.digest, "query": "ord-", "max_hits": 50})
    for tool_name, result in (("expand_result", page), ("search_result", hits)):
        output = result.model_content()
        assert len(output) > policy.offload_above_chars
        # The same text from any other tool is offloaded, so this assertion can fail.
        assert offloader.offload("other_tool", "call_x", output).offloaded
        passed = offloader.offload(tool_name, "call_2", output)
        assert passed == OffloadDecision(model_content=output)
    assert len(json.loads(page.model_content())["text"]) == 8_000
    # Only the "other_tool" copies above were stored; expansion output never was.
    assert _all_blob_rows(provider) == blobs_before + 2


def test_small_results_stay_inline_untouched(provider: SQLModelProvider) -> None:
    offloader = ResultOffloader(provider, ToolResultPolicy())
    exactly_threshold = json.dumps({"text": "é" * (8_000 - 12)}, ensure_ascii=False)
    assert len(exactly_threshold) == 8_000
    small = json.dumps({"id": "a-1", "status": "ok"})

    for content in (small, exactly_threshold, ""):
        decision = offloader.offload("lookup", "call_1", content)
        assert decision == OffloadDecision(model_content=content, pointer=None, digest=None)
        assert decision.model_content is content
    assert _all_blob_rows(provider) == 0
    assert offloader.offload("lookup", "call_2", exactly_threshold + " ").offloaded


def test_pointer_stays_far_below_the_threshold(provider: SQLModelProvider) -> None:
    hostile = json.dumps(
        [{"url": "https://example.com/" + "q" * 150 + str(index), "note": '"\\' * 500}
         for index in range(400)]
    )  # fmt: skip
    for policy in (
        ToolResultPolicy(),
        ToolResultPolicy(preview_chars=8_000, max_identifiers=200),
        ToolResultPolicy(offload_above_chars=40_000, preview_chars=8_000, max_identifiers=200),
    ):
        decision = ResultOffloader(provider, policy).offload("crawl", "call_1", hostile)
        assert decision.pointer is not None
        assert len(decision.model_content) <= policy.offload_above_chars // 2 + 600
        pointer = decision.pointer["offloaded_result"]
        assert hostile.startswith(pointer["preview"])
        assert pointer["identifiers"]
    tiny = ToolResultPolicy(offload_above_chars=256)
    pointer = ResultOffloader(provider, tiny).offload("crawl", "c", hostile).pointer
    assert pointer is not None
    assert pointer["offloaded_result"]["preview"] == hostile[:32]


def test_page_bounds_follow_the_policy(provider: SQLModelProvider) -> None:
    policy = ToolResultPolicy(expansion_page_chars=300, expansion_max_page_chars=500)
    offloader = ResultOffloader(provider, policy)
    decision = offloader.offload("list_orders", "call_1", _large_result())
    expand, _ = _tools(offloader)

    default_page = expand.dispatch({"digest": decision.digest}).value
    assert (default_page["limit"], len(default_page["text"])) == (300, 300)
    assert expand.dispatch({"digest": decision.digest, "limit": 500}).ok
    refused = expand.dispatch({"digest": decision.digest, "limit": 501}).value
    assert refused["error"]["code"] == "invalid_arguments"
    assert expand.parameters["properties"]["limit"]["maximum"] == 500
