"""governed_tool: decoration, policies and reserved names."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from support import agents

from supervisor import GovernedTool, governed_tool
from supervisor.demo.tools import create_customer, inventory_lookup
from supervisor.errors import PolicyError, ReservedParameterError, ToolDefinitionError
from supervisor.tools.policy import RESERVED_PARAMETER_NAMES


def test_seed_inventory_lookup_contract() -> None:
    assert inventory_lookup.parameters["type"] == "object"
    assert inventory_lookup.parameters["required"] == ["sku"]
    assert inventory_lookup.parameters["additionalProperties"] is False
    properties = inventory_lookup.parameters["properties"]
    assert set(properties) == {"sku", "warehouse"}
    assert properties["sku"]["type"] == "string"
    assert properties["warehouse"]["enum"] == ["london", "new-york"]
    assert properties["warehouse"]["default"] == "london"
    assert inventory_lookup.policy.requires_approval is False
    assert inventory_lookup.policy.domains == ("inventory",)


def test_seed_create_customer_requires_approval_with_its_reason() -> None:
    assert create_customer.policy.requires_approval is True
    assert create_customer.policy.side_effects is True
    assert create_customer.policy.approval_reason == "Creates a customer in the production CRM"
    assert create_customer.policy.cacheable is False


def test_bare_decorator_and_direct_call() -> None:
    @governed_tool
    def echo(text: str) -> str:
        """Echo text back."""
        return text

    assert isinstance(echo, GovernedTool)
    assert echo("hi") == "hi"
    assert echo.description == "Echo text back."
    assert echo.policy.requires_approval is False
    assert echo.policy.cacheable is True


def test_requires_approval_follows_side_effects() -> None:
    @governed_tool(side_effects=True, deterministic=False)
    def send(to: str) -> None:
        """Send."""

    assert send.policy.requires_approval is True
    assert send.policy.approval_reason == "send has side effects"


@pytest.mark.parametrize(
    "options",
    [
        {"cacheable": True, "side_effects": True},
        {"cacheable": True, "deterministic": False},
        {"side_effects": True, "requires_approval": False},
        {"approval_reason": "why", "requires_approval": False},
        {"domains": ("Not A Domain",)},
    ],
)
def test_incoherent_policies_are_refused(options: dict[str, Any]) -> None:
    def tool(x: int) -> int:
        return x

    with pytest.raises(PolicyError) as caught:
        governed_tool(**options)(tool)
    assert caught.value.code == "incoherent_policy"
    assert caught.value.hint


def test_unapproved_side_effect_needs_explicit_opt_in() -> None:
    @governed_tool(side_effects=True, requires_approval=False, allow_unapproved_side_effects=True)
    def log_line(line: str) -> None:
        """Append to a log."""

    assert log_line.policy.requires_approval is False


def _tool_with_parameter(name: str) -> Any:
    """A function whose second parameter is called ``name`` (built without exec)."""

    def tool(**arguments: Any) -> None: ...

    parameters = [
        inspect.Parameter("sku", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool),
    ]
    tool.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    tool.__annotations__ = {"sku": str, name: bool}
    return tool


@pytest.mark.parametrize("name", [*sorted(RESERVED_PARAMETER_NAMES), "_internal", "Approved"])
def test_reserved_parameter_names_are_refused(name: str) -> None:
    with pytest.raises(ReservedParameterError) as caught:
        governed_tool(_tool_with_parameter(name))
    assert caught.value.code == "reserved_parameter"
    assert name in caught.value.message


def test_an_ordinary_name_passes_the_same_construction() -> None:
    assert governed_tool(_tool_with_parameter("quantity")).parameters["required"] == ["sku"]


def test_variadic_parameters_are_refused() -> None:
    def star(*items: str) -> None: ...

    def double_star(**options: str) -> None: ...

    for function in (star, double_star):
        with pytest.raises(ToolDefinitionError, match="cannot be governed"):
            governed_tool(function)


def test_missing_type_hint_is_refused() -> None:
    def untyped(sku) -> None:  # type: ignore[no-untyped-def]
        ...

    with pytest.raises(ToolDefinitionError, match="no type hint"):
        governed_tool(untyped)


def test_positional_only_is_refused() -> None:
    def positional(sku: str, /) -> None: ...

    with pytest.raises(ToolDefinitionError, match="positional-only"):
        governed_tool(positional)


def test_name_and_description_overrides() -> None:
    @governed_tool(name="lookup-v2", description="Look up stock.")
    def lookup(sku: str) -> dict[str, str]:
        """Docstring summary."""
        return {"sku": sku}

    assert lookup.name == "lookup-v2"
    assert lookup.description == "Look up stock."
    assert lookup.openai.definition["function"]["name"] == "lookup-v2"


def test_invalid_tool_name_is_refused() -> None:
    def tool(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError):
        governed_tool(name="has spaces")(tool)


def test_import_reference() -> None:
    assert agents.inventory_lookup.import_ref == "support.agents:inventory_lookup"

    @governed_tool
    def local(x: int) -> int:
        return x

    assert local.import_ref is None
