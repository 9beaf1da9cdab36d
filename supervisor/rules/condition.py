"""CEL conditions: compiled once when the rule set is loaded, evaluated per call.

CEL (the Common Expression Language) is a maintained, side-effect-free expression language
with a Python package (``common-expression-language``, Rust underneath); a condition can read
the call (``args``, ``tool``, ``domains``, ``agent``, ``user``, ``target``) and nothing else.

A condition that cannot be evaluated for a call (a missing argument, a type mismatch) fails
safe: an ``allow`` rule then does not match, an ``ask`` or ``deny`` rule does, so a broken
condition never turns a call into an unasked one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cel

from supervisor.errors import SupervisorError


class RuleConditionInvalid(SupervisorError, ValueError):
    """A rule's ``when`` is not a CEL expression (or not a boolean one)."""

    code = "invalid_rule_condition"


@dataclass(frozen=True)
class Condition:
    """A compiled CEL condition and the call variables it reads (only those are passed in:
    handing CEL the whole call costs more than evaluating most conditions)."""

    source: str
    program: Any
    variables: tuple[str, ...] = ()

    @classmethod
    def compile(cls, source: str, where: str) -> Condition:
        """Compile ``source``.

        Raises:
            RuleConditionInvalid: It does not parse; the message quotes CEL's own error.
        """
        try:
            program = cel.compile(source)
        except (ValueError, TypeError, RuntimeError) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise RuleConditionInvalid(
                f"{where}: `when` is not a CEL expression ({first}).",
                hint="Write a boolean CEL expression over args, tool, domains, agent, user and "
                "target, e.g. when = 'args.amount < 100 && args.path.startsWith(\"/tmp/\")'.",
                where=where,
            ) from None
        return cls(source, program, tuple(program.references().get("variables", ())))

    def holds(self, activation: dict[str, Any]) -> bool | None:
        """True or False; ``None`` when it cannot be evaluated for this call."""
        try:
            value = self.program.execute(
                {name: activation[name] for name in self.variables if name in activation}
            )
        except (KeyError, ValueError, TypeError, RuntimeError, AttributeError):
            return None
        return value if isinstance(value, bool) else None
