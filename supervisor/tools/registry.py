"""The tool registry: tools by name, their import references and contracts.

Tools are rebound on resume from the live registry or, in another process, from a reviewed
import reference (``module:qualname``). A reference is imported only if it is on the registry's
explicit allowlist; the resolved object must be a governed tool whose schema hash matches the one
recorded. Nothing is ever unpickled or evaluated.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from supervisor.errors import (
    DuplicateToolError,
    ReferenceMismatch,
    ReferenceNotAllowed,
    ReferenceNotImportable,
    UnknownToolError,
)
from supervisor.tools.contract import Tool
from supervisor.tools.governed import GovernedTool, governed_tool


@dataclass(frozen=True)
class RegistryEntry:
    """What the ledger records about a registered tool."""

    name: str
    import_ref: str | None
    schema_hash: str
    description: str
    parameters: dict[str, Any]
    domains: tuple[str, ...]
    requires_approval: bool
    side_effects: bool


def as_governed(tool: Tool | Callable[..., Any]) -> Tool:
    """Return ``tool`` as a :class:`Tool`; a plain function gets governed_tool's defaults
    (deterministic, no side effects, no approval)."""
    # The concrete check first: it is the common case and far cheaper than the Protocol's.
    if isinstance(tool, GovernedTool) or isinstance(tool, Tool):
        return tool
    return governed_tool(tool)


class ToolRegistry:
    """Governed tools keyed by name, with an allowlist of importable references."""

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        allowlist: Iterable[str] = (),
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self.allowlist: frozenset[str] = frozenset(allowlist)
        for tool in tools:
            self.register(tool)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def register(self, tool: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Add a tool. Registering the same tool twice is a no-op.

        Raises:
            DuplicateToolError: a different tool already has that name and ``replace`` is False.
        """
        governed = as_governed(tool)
        existing = self._tools.get(governed.name)
        if existing is not None and existing is not governed and not replace:
            same_contract = existing.schema_hash == governed.schema_hash
            raise DuplicateToolError(
                f"A different tool named {governed.name!r} is already registered"
                + (" (same contract)." if same_contract else " with another contract."),
                hint="Rename one of them, or pass replace=True to replace it on purpose.",
                tool=governed.name,
            )
        self._tools[governed.name] = governed
        return governed

    def get(self, name: str) -> Tool:
        """The tool registered under ``name``.

        Raises:
            UnknownToolError: nothing is registered under that name.
        """
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(
                f"No tool named {name!r} is registered.",
                hint=f"Registered tools: {', '.join(self._tools) or 'none'}.",
                tool=name,
            ) from None

    def entries(self) -> list[RegistryEntry]:
        """The registry as records for the ledger."""
        return [
            RegistryEntry(
                name=tool.name,
                import_ref=tool.import_ref,
                schema_hash=tool.schema_hash,
                description=tool.description,
                parameters=tool.parameters,
                domains=tool.policy.domains,
                requires_approval=tool.policy.requires_approval,
                side_effects=tool.policy.side_effects,
            )
            for tool in self._tools.values()
        ]

    def is_allowed(self, reference: str) -> bool:
        """Whether ``reference`` may be imported: listed exactly, or its module as ``module:*``."""
        module, _, _ = reference.partition(":")
        return reference in self.allowlist or f"{module}:*" in self.allowlist

    def resolve(self, reference: str, *, expected_schema_hash: str | None = None) -> Tool:
        """Import an allowlisted ``module:qualname`` and return the governed tool there.

        Raises:
            ReferenceNotAllowed: the reference is not on the allowlist (nothing is imported).
            ReferenceMismatch: it does not name a governed tool, or its contract changed.
            ReferenceNotImportable: its module cannot be imported (a ``ReferenceMismatch``).
        """
        module_name, sep, qualname = reference.partition(":")
        if not sep or not module_name or not qualname:
            raise ReferenceMismatch(
                f"{reference!r} is not an import reference.",
                hint="Use the form 'package.module:function_name'.",
                reference=reference,
            )
        if not self.is_allowed(reference):
            raise ReferenceNotAllowed(
                f"Import reference {reference!r} is not on the allowlist, so it was not imported.",
                hint=f"Review it, then add {reference!r} (or '{module_name}:*') to the allowlist.",
                reference=reference,
            )
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError as error:
            raise ReferenceNotImportable(
                f"Cannot import {module_name!r} for {reference!r}: {error}.",
                hint="Check the module path, that its package is installed and on PYTHONPATH.",
                reference=reference,
            ) from error
        for part in qualname.split("."):
            target = getattr(target, part, None)
            if target is None:
                raise ReferenceMismatch(
                    f"{reference!r} names nothing in {module_name}.", reference=reference
                )
        if not isinstance(target, Tool):
            raise ReferenceMismatch(
                f"{reference!r} is a {type(target).__name__}, not a governed tool.",
                hint="Decorate the function with @governed_tool.",
                reference=reference,
            )
        if expected_schema_hash is not None and target.schema_hash != expected_schema_hash:
            raise ReferenceMismatch(
                f"The tool at {reference!r} has changed its contract since it was recorded.",
                hint="Pending proposals for the old contract cannot run; re-propose the call.",
                reference=reference,
                expected=expected_schema_hash,
                found=target.schema_hash,
            )
        return target

    def rebind(self, name: str, reference: str | None, schema_hash: str) -> Tool:
        """The live tool for a recorded ``(name, reference, schema_hash)``.

        The live registry wins; otherwise the allowlisted reference is imported.

        Raises:
            UnknownToolError: not live and no reference was recorded.
            ReferenceNotAllowed, ReferenceMismatch: see :meth:`resolve`.
        """
        live = self._tools.get(name)
        if live is not None:
            if live.schema_hash != schema_hash:
                raise ReferenceMismatch(
                    f"The live tool {name!r} has a different contract than the recorded one.",
                    hint="Pending proposals for the old contract cannot run; re-propose the call.",
                    tool=name,
                )
            return live
        if reference is None:
            raise UnknownToolError(
                f"Tool {name!r} is not registered here and has no import reference.",
                hint="Register the tool in this process before resuming.",
                tool=name,
            )
        return self.register(self.resolve(reference, expected_schema_hash=schema_hash))
