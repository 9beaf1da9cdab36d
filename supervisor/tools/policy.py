"""A governed tool's policy: what it may do and whether a human must approve each call."""

from __future__ import annotations

import re
from dataclasses import dataclass

from supervisor.errors import PolicyError

#: Parameter names that belong to the approval machinery. A governed tool may not declare them
#: and a model may not send them: the model can never approve its own call.
RESERVED_PARAMETER_NAMES = frozenset(
    {
        "approved",
        "approve",
        "confirm",
        "confirmed",
        "approval",
        "approval_id",
        "approver",
        "proposal_id",
    }
)

_DOMAIN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
TOOL_DOMAIN_RULE = (
    "lowercase ASCII letters, digits, '.', '_' or '-', starting with a letter or digit, "
    "at most 64 characters"
)
"""What every tool domain is (:func:`is_tool_domain`), in words for error messages."""


def is_tool_domain(name: object) -> bool:
    """True if ``name`` can be a tool's domain (see :data:`TOOL_DOMAIN_RULE`)."""
    return isinstance(name, str) and _DOMAIN.fullmatch(name) is not None


def is_reserved_name(name: str) -> bool:
    """True for reserved approval names and for any name starting with an underscore."""
    return name.startswith("_") or name.lower() in RESERVED_PARAMETER_NAMES


@dataclass(frozen=True)
class ToolPolicy:
    """The resolved, coherent policy of one governed tool.

    Attributes:
        deterministic: Same arguments give the same result.
        side_effects: A call changes something outside the agent (a write, a message, a payment).
        requires_approval: A human must approve each call's exact arguments before it runs.
        approval_reason: Why approval is needed, shown to the approver.
        domains: Scopes the tool belongs to (routing, approver allowlists, risk).
        cacheable: Results may be admitted to the semantic cache.
        grantable: An operator may answer a call with a grant ("allow similar"); False for
            tools whose every call must be judged on its own (secret reads, egress).
    """

    deterministic: bool
    side_effects: bool
    requires_approval: bool
    approval_reason: str | None
    domains: tuple[str, ...]
    cacheable: bool
    grantable: bool = True

    @property
    def read_only(self) -> bool:
        """Runs unasked when no policy rule says otherwise (it needs no approval)."""
        return not self.requires_approval

    @classmethod
    def resolve(
        cls,
        tool_name: str,
        *,
        deterministic: bool,
        side_effects: bool,
        requires_approval: bool | None,
        approval_reason: str | None,
        domains: tuple[str, ...] | list[str] | str,
        cacheable: bool | None,
        allow_unapproved_side_effects: bool,
        grantable: bool = True,
    ) -> ToolPolicy:
        """Resolve defaults and refuse incoherent combinations.

        ``requires_approval`` follows ``side_effects`` when not given; ``cacheable`` defaults to
        deterministic and side-effect free.

        Raises:
            PolicyError: cacheable with side effects or non-deterministic; a side effect without
                approval unless ``allow_unapproved_side_effects``; an approval reason on a tool
                that needs no approval; malformed domains.
        """
        if isinstance(domains, str):
            domains = (domains,)
        for domain in domains:
            if not is_tool_domain(domain):
                raise PolicyError(
                    f"Tool {tool_name!r} has an invalid domain {domain!r}.",
                    hint="Use lowercase names of letters, digits, '.', '_' or '-', e.g. 'crm'.",
                    tool=tool_name,
                )
        needs_approval = side_effects if requires_approval is None else requires_approval
        if side_effects and not needs_approval and not allow_unapproved_side_effects:
            raise PolicyError(
                f"Tool {tool_name!r} has side effects but requires_approval=False.",
                hint="Remove requires_approval=False, or pass allow_unapproved_side_effects=True "
                "to state that this side effect may run without a human.",
                tool=tool_name,
            )
        if approval_reason is not None and not needs_approval:
            raise PolicyError(
                f"Tool {tool_name!r} gives an approval_reason but does not require approval.",
                hint="Set requires_approval=True (or side_effects=True), or drop approval_reason.",
                tool=tool_name,
            )
        if cacheable and (side_effects or not deterministic):
            raise PolicyError(
                f"Tool {tool_name!r} is marked cacheable but is "
                f"{'side-effecting' if side_effects else 'non-deterministic'}.",
                hint="Only deterministic, side-effect free tools may be cached.",
                tool=tool_name,
            )
        if needs_approval and approval_reason is None:
            approval_reason = (
                f"{tool_name} has side effects" if side_effects else f"{tool_name} needs approval"
            )
        return cls(
            deterministic=deterministic,
            side_effects=side_effects,
            requires_approval=needs_approval,
            approval_reason=approval_reason,
            domains=tuple(domains),
            cacheable=(deterministic and not side_effects) if cacheable is None else cacheable,
            grantable=grantable,
        )
