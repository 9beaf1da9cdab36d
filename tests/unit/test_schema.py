"""Strict JSON Schema and the OpenAI function form, derived from signatures."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from support.agents import inventory_lookup
from typing_extensions import TypedDict

from supervisor import governed_tool
from supervisor.demo import tools as seed_tools
from supervisor.errors import ToolDefinitionError

TESTS = Path(__file__).resolve().parent.parent


class Address(BaseModel):
    street: str
    postcode: str | None = None


class LineItem(TypedDict):
    sku: str
    quantity: int


@dataclasses.dataclass
class Window:
    start: int
    end: int


@governed_tool
def place_order(
    customer: str,
    items: list[LineItem],
    ship_to: Address,
    window: Window | None = None,
    priority: Literal["low", "high"] = "low",
    note: Annotated[str, Field(description="Free text for the packer.")] = "",
    quantity_limit: Annotated[int, Field(ge=1, le=100)] = 10,
) -> dict[str, Any]:
    """Place an order.

    Args:
        customer: Customer id, e.g. "cus_1".
        items: What to ship. Each line names a SKU
            and a quantity.
        ship_to: Delivery address.
        note: This docstring text loses to the Field description.
    """
    return {"ok": True}


def test_required_defaults_and_closed_objects() -> None:
    schema = place_order.parameters
    assert schema["required"] == ["customer", "items", "ship_to"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["priority"] == {
        "default": "low",
        "enum": ["low", "high"],
        "type": "string",
    }
    assert schema["properties"]["quantity_limit"]["minimum"] == 1
    assert schema["properties"]["quantity_limit"]["maximum"] == 100
    for name in ("Address", "LineItem", "Window"):
        assert schema["$defs"][name]["additionalProperties"] is False, name


def test_descriptions_from_docstring_and_field() -> None:
    properties = place_order.parameters["properties"]
    assert properties["customer"]["description"] == 'Customer id, e.g. "cus_1".'
    assert properties["items"]["description"] == (
        "What to ship. Each line names a SKU and a quantity."
    )
    assert properties["note"]["description"] == "Free text for the packer."
    assert place_order.description == "Place an order."


def test_optional_and_list_shapes() -> None:
    properties = place_order.parameters["properties"]
    assert properties["items"]["type"] == "array"
    assert properties["items"]["items"] == {"$ref": "#/$defs/LineItem"}
    assert {"type": "null"} in properties["window"]["anyOf"]
    assert properties["window"]["default"] is None


def test_no_titles_leak_into_the_schema() -> None:
    assert '"title"' not in str(place_order.parameters).replace("'", '"')


def test_schema_hash_is_stable_across_processes() -> None:
    code = "from support.agents import inventory_lookup as t; print(t.schema_hash, flush=True)"
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    environment = {**os.environ, "PYTHONPATH": path}
    other = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=environment
    ).stdout.strip()
    assert other == inventory_lookup.schema_hash
    assert len(other) == 64


def test_schema_hash_changes_with_the_contract() -> None:
    @governed_tool(name="inventory_lookup", domains=("inventory",))
    def changed(sku: str, warehouse: Literal["london", "paris"] = "london") -> dict[str, Any]:
        """Return current inventory for one SKU and warehouse."""
        return {}

    assert changed.schema_hash != inventory_lookup.schema_hash


def test_openai_strict_form_for_the_seed_tool() -> None:
    seed_lookup = seed_tools.inventory_lookup
    function = seed_lookup.openai.definition["function"]
    assert seed_lookup.openai.strict is True
    assert function["strict"] is True
    assert function["parameters"]["required"] == ["sku", "warehouse"]
    warehouse = function["parameters"]["properties"]["warehouse"]
    assert {"type": "null"} in warehouse["anyOf"]
    assert "london" in warehouse["description"]
    assert "default" not in str(function["parameters"])
    assert seed_lookup.openai.null_means_default == {"warehouse"}


def test_openai_strict_nested_objects_have_all_properties_required() -> None:
    function = place_order.openai.definition["function"]
    assert place_order.openai.strict is True
    address = function["parameters"]["$defs"]["Address"]
    assert address["required"] == ["street", "postcode"]


def test_openai_falls_back_for_free_form_maps() -> None:
    @governed_tool
    def tag(labels: dict[str, str]) -> None:
        """Set labels."""

    assert tag.openai.strict is False
    assert tag.openai.definition["function"]["strict"] is False
    assert tag.openai.definition["function"]["parameters"] == tag.parameters


def test_openai_falls_back_for_nested_optional_without_null() -> None:
    @governed_tool
    def crawl(url: str, options: CrawlOptions) -> None:
        """Crawl."""

    assert crawl.openai.strict is False


class LegacyTypedDict(typing.TypedDict):
    a: int


class CrawlOptions(BaseModel):
    depth: int = 1


def test_python_3_11_typing_typeddict_gets_a_clear_error() -> None:
    def tool(value: LegacyTypedDict) -> None: ...

    with pytest.raises(ToolDefinitionError, match=r"typing_extensions\.TypedDict"):
        governed_tool(tool)


def test_openai_falls_back_for_keywords_outside_the_strict_subset() -> None:
    @governed_tool
    def label(text: Annotated[str, Field(max_length=20)]) -> None:
        """Print a label."""

    assert label.parameters["properties"]["text"]["maxLength"] == 20
    assert label.openai.strict is False
