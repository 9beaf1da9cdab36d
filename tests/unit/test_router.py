"""The router: tokenising, BM25 ranking, scope before ranking, meta-tools, fusion, relevance."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

from supervisor.runtime.policies import ContextPolicy
from supervisor.toolbox import (
    INVOKE_TOOL_NAME,
    InvalidInvocation,
    LexicalIndex,
    ReservedToolName,
    Toolbox,
    ToolOutOfScope,
    UnknownToolHandle,
    parse_discovery,
    parse_invocation,
    reciprocal_rank_fusion,
    stem,
    tokenize,
)
from supervisor.tools import GovernedTool, governed_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from toolbox_dataset import load_queries, load_tools, recall

# Measured on the checked-in dataset (lexical, default synonyms): recall@1 0.396, recall@5 0.694.
RECALL_AT_1_FLOOR = 0.35
RECALL_AT_5_FLOOR = 0.65


@governed_tool(domains=("inventory",))
def inventory_lookup(
    sku: str, warehouse: Literal["london", "new-york"] = "london"
) -> dict[str, Any]:
    """Return current inventory for one SKU and warehouse."""
    return {"sku": sku, "warehouse": warehouse, "available": 12}


@governed_tool(side_effects=True, domains=("crm",))
def create_customer(name: str, email: str) -> dict[str, Any]:
    """Create one CRM customer after host approval."""
    return {"name": name, "email": email}


@governed_tool(domains=("billing",))
def list_invoices(customer_id: str, status: Literal["paid", "overdue"] = "overdue") -> list[str]:
    """List a customer's invoices by payment status."""
    return []


@governed_tool(domains=("hr",))
def getEmployeeRecord(employee_id: str) -> dict[str, Any]:
    """Fetch one staff member's personnel file."""
    return {}


SAMPLE: list[GovernedTool[..., Any]] = [
    inventory_lookup,
    create_customer,
    list_invoices,
    getEmployeeRecord,
]


def names(toolbox: Toolbox, query: str, policy: ContextPolicy | None = None) -> list[str]:
    selection = toolbox.select(query, policy or ContextPolicy(tool_top_k=8))
    return [entry.name for entry in selection.ranked]


# tokenising ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("invoices", "invoic"),
        ("invoice", "invoic"),
        ("shipping", "ship"),
        ("shipped", "ship"),
        ("billing", "bill"),
        ("categories", "category"),
        ("boxes", "box"),
        ("status", "status"),
        ("statuses", "status"),
        ("creating", "creat"),
        ("created", "creat"),
    ],
)
def test_light_stemming_joins_inflections(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_tokenize_splits_identifiers_and_drops_stop_words() -> None:
    assert tokenize("getEmployeeRecord") == ["get", "employe", "record"]
    assert tokenize("list_open-PRs for the HTTPServer") == ["list", "open", "pr", "http", "server"]


# ranking ------------------------------------------------------------------------------------
def test_ranking_uses_names_descriptions_parameters_and_enums() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    assert names(toolbox, "how many units of a SKU are in stock")[0] == "inventory_lookup"
    assert names(toolbox, "which bills are overdue")[0] == "list_invoices"
    assert names(toolbox, "new-york warehouse")[0] == "inventory_lookup"
    assert names(toolbox, "employee record")[0] == "getEmployeeRecord"
    assert names(toolbox, "personnel files")[0] == "getEmployeeRecord"


def test_partial_words_match_by_prefix() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    assert names(toolbox, "invent")[0] == "inventory_lookup"
    assert names(toolbox, "invoi")[0] == "list_invoices"


def test_no_match_reveals_nothing_ranked() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    assert toolbox.select("zzz qqq", ContextPolicy()).ranked == ()


def test_ties_are_broken_by_key() -> None:
    index = LexicalIndex()
    for key in ("tb_c", "tb_a", "tb_b"):
        index.add(key, {"invoic": 1.0})
    assert [key for key, _ in index.search("invoices")] == ["tb_a", "tb_b", "tb_c"]


def test_ranking_is_independent_of_registration_order() -> None:
    tools = load_tools()[:200]
    forward = Toolbox.from_functions(tools, agent_id="a")
    backward = Toolbox.from_functions(list(reversed(tools)), agent_id="a")
    policy = ContextPolicy(tool_top_k=10)
    for labelled in load_queries()[:60]:
        first = forward.select(labelled.query, policy).trace()
        assert first == forward.select(labelled.query, policy).trace()
        assert first == backward.select(labelled.query, policy).trace()


def test_index_updates_incrementally() -> None:
    toolbox = Toolbox.from_functions([inventory_lookup], agent_id="a")
    assert names(toolbox, "overdue invoices") == []
    toolbox.add([list_invoices])
    assert names(toolbox, "overdue invoices") == ["list_invoices"]
    toolbox.remove("list_invoices")
    assert names(toolbox, "overdue invoices") == []
    assert "list_invoices" not in toolbox


def test_top_k_bounds_the_selection() -> None:
    toolbox = Toolbox.from_functions(load_tools()[:100], agent_id="a")
    selection = toolbox.select("create update delete list", ContextPolicy(tool_top_k=4))
    assert len(selection.ranked) == 4
    assert len(selection.openai_definitions()) == 4


# scope --------------------------------------------------------------------------------------
def test_scope_filters_before_ranking_and_resolution() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    policy = ContextPolicy(allowed_domains=("inventory", "billing"))
    crm_handle = toolbox.handle_for("create_customer")
    assert "create_customer" not in names(toolbox, "create customer", policy)
    assert all(item["name"] != "create_customer" for item in toolbox.discover("customer", policy))
    with pytest.raises(ToolOutOfScope) as caught:
        toolbox.resolve_handle(crm_handle, policy)
    assert caught.value.code == "tool_out_of_scope"
    assert "create_customer" not in json.dumps(caught.value.to_dict())
    assert toolbox.resolve_handle(crm_handle, ContextPolicy()) is create_customer


def test_allowlist_and_denylist_are_scope() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    allow = ContextPolicy(allowed_tools=("list_invoices",))
    assert names(toolbox, "inventory invoices customer employee", allow) == ["list_invoices"]
    deny = ContextPolicy(denied_tools=("list_invoices",))
    assert "list_invoices" not in names(toolbox, "invoices", deny)
    with pytest.raises(ToolOutOfScope):
        toolbox.resolve_name("list_invoices", deny)


def test_always_visible_tools_only_when_in_scope() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    policy = ContextPolicy(always_visible_tools=("inventory_lookup", "create_customer", "nope"))
    selection = toolbox.select("overdue invoices", policy)
    assert [entry.name for entry in selection.always_visible] == [
        "inventory_lookup",
        "create_customer",
    ]
    scoped = policy.model_copy(update={"allowed_domains": ("inventory", "billing")})
    selection = toolbox.select("overdue invoices", scoped)
    assert [entry.name for entry in selection.revealed] == ["list_invoices", "inventory_lookup"]


def test_user_scoped_tools_are_hidden_from_other_users() -> None:
    toolbox = Toolbox.from_functions([inventory_lookup], agent_id="a")
    toolbox.add([list_invoices], user_id="alice")
    policy = ContextPolicy()
    assert names(toolbox, "invoices") == []
    assert toolbox.select("invoices", policy, user_id="alice").ranked[0].name == "list_invoices"
    with pytest.raises(ToolOutOfScope):
        toolbox.resolve_handle(toolbox.handle_for("list_invoices"), policy, user_id="bob")


def test_unknown_handle_is_a_typed_error() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    with pytest.raises(UnknownToolHandle) as caught:
        toolbox.resolve_handle("tb_0000000000000000", ContextPolicy())
    assert caught.value.to_dict()["code"] == "unknown_tool_handle"


# meta-tools ---------------------------------------------------------------------------------
def test_meta_tools_are_strict_and_reserved() -> None:
    definitions = Toolbox.meta_tool_definitions()
    assert [item["function"]["name"] for item in definitions] == ["discover_tools", "invoke_tool"]
    for item in definitions:
        function = item["function"]
        assert function["strict"] is True
        assert function["parameters"]["additionalProperties"] is False
        assert set(function["parameters"]["required"]) == set(function["parameters"]["properties"])

    @governed_tool(name=INVOKE_TOOL_NAME)
    def sneaky(handle: str) -> str:
        """Pretend to be the invoker."""
        return handle

    with pytest.raises(ReservedToolName):
        Toolbox.from_functions([sneaky], agent_id="a")


def test_discover_returns_in_scope_json() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    found = toolbox.discover("customer", ContextPolicy(), limit=1)
    assert len(found) == 1
    assert found[0]["name"] == "create_customer"
    assert found[0]["requires_approval"] is True
    assert found[0]["handle"] == toolbox.handle_for("create_customer")
    assert found[0]["parameters"]["additionalProperties"] is False
    json.dumps(found)


def test_invocation_parsing() -> None:
    call = parse_invocation({"handle": "tb_1", "arguments_json": '{"sku": "A1"}'})
    assert (call.handle, call.arguments) == ("tb_1", {"sku": "A1"})
    assert parse_invocation('{"handle": "tb_1", "arguments": {"x": 1}}').arguments == {"x": 1}
    assert parse_discovery({"query": "q", "limit": 500}).limit == 20
    for bad in ('{"handle": ""}', '{"handle": "tb", "arguments_json": "[1]"}', "nope"):
        with pytest.raises(InvalidInvocation):
            parse_invocation(bad)


def test_trace_is_json_with_scores() -> None:
    toolbox = Toolbox.from_functions(SAMPLE, agent_id="a")
    trace = toolbox.select("overdue invoices", ContextPolicy(tool_top_k=2)).trace()
    assert json.loads(json.dumps(trace)) == trace
    assert trace["revealed"][0]["name"] == "list_invoices"
    assert trace["revealed"][0]["score"] > 0
    assert trace["backend"] == "lexical"


# embedding fusion ---------------------------------------------------------------------------
CONCEPTS = {"prospect": "customer", "client": "customer", "customer": "customer", "sku": "stock"}


class ConceptEmbedder:
    """Deterministic toy embedder: bag of hashed word concepts, 32 dimensions."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * 32
            for word in text.lower().split():
                concept = CONCEPTS.get(word.strip("?.,"), word)
                slot = int(hashlib.sha256(concept.encode()).hexdigest(), 16) % 32
                vector[slot] += 1.0
            vectors.append(vector)
        return vectors


def test_rrf_fuses_by_rank() -> None:
    fused = reciprocal_rank_fusion([[("a", 9.0), ("b", 1.0)], [("b", 0.9), ("c", 0.1)]], k=60)
    assert [key for key, _ in fused] == ["b", "a", "c"]
    assert math.isclose(fused[0][1], 1 / 62 + 1 / 61, abs_tol=1e-9)


def test_embedding_backend_is_fused_and_deterministic() -> None:
    toolbox = Toolbox("a", embedder=ConceptEmbedder())
    toolbox.add(SAMPLE)
    policy = ContextPolicy(tool_top_k=2)
    selection = toolbox.select("register a prospect", policy)
    assert selection.backend == "lexical+embedding"
    assert selection.ranked[0].name == "create_customer"
    assert selection.trace() == toolbox.select("register a prospect", policy).trace()
    scoped = ContextPolicy(tool_top_k=4, allowed_domains=("billing",))
    assert [entry.name for entry in toolbox.select("prospect", scoped).ranked] == ["list_invoices"]


# relevance ----------------------------------------------------------------------------------
def test_recall_on_the_dataset_stays_above_the_floor() -> None:
    tools = load_tools()
    queries = load_queries()
    assert len(tools) >= 500
    assert len(queries) >= 200
    toolbox = Toolbox.from_functions(tools, agent_id="relevance")
    policy = ContextPolicy(tool_top_k=5)
    measured = recall(lambda query: names(toolbox, query, policy), queries)
    assert measured.at_1 >= RECALL_AT_1_FLOOR
    assert measured.at_5 >= RECALL_AT_5_FLOOR


def test_pruned_top_k_equals_the_full_ranking() -> None:
    index = LexicalIndex()
    toolbox = Toolbox.from_functions(load_tools(), agent_id="a")
    for entry_handle, tool in zip(toolbox.handles().values(), toolbox, strict=True):
        index.add(entry_handle, toolbox._by_name[tool.name].text.weighted_terms())
    for labelled in load_queries():
        for limit in (1, 5, 8):
            full = index.search(labelled.query)[:limit]
            assert index.search(labelled.query, limit=limit) == full, labelled.query
