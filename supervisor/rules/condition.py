"""CEL conditions: compiled once when the rule set is loaded, evaluated per call.

CEL (the Common Expression Language) is a maintained, side-effect-free expression language
with a Python package (``common-expression-language``, Rust underneath); a condition can read
the call (``args``, ``tool``, ``domains``, ``agent``, ``user``, ``target``) and nothing else.

A condition that cannot be evaluated for a call (a missing argument, a type mismatch) fails
safe: an ``allow`` rule then does not match, an ``ask`` or ``deny`` rule does, so a broken
condition never turns a call into an unasked one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from supervisor.errors import SupervisorError


class RuleConditionInvalid(SupervisorError, ValueError):
    """A rule's ``when`` is not a CEL expression (or not a boolean one)."""

    code = "invalid_rule_condition"


_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def _fields_read(source: str, variable: str) -> frozenset[str] | None:
    """The keys of ``variable`` that ``source`` reads, when it only ever reads
    ``variable.key`` (never the map itself, a method on it or a key by index); else ``None``.

    A literal string that happens to contain ``args.x`` only adds a key, and one that contains
    a bare ``args`` only makes the whole map passed: both are safe.
    """
    uses = list(re.finditer(rf"(?<![\w.]){variable}\b", source))
    fields = set()
    for use in uses:
        member = re.compile(rf"\s*\.\s*({_IDENT})\b(?!\s*\()").match(source, use.end())
        if member is None:
            return None
        fields.add(member.group(1))
    return frozenset(fields)


@dataclass(frozen=True)
class Condition:
    """A compiled CEL condition and the call variables it reads (only those are passed in:
    handing CEL the whole call costs more than evaluating most conditions).

    For ``args`` and ``target`` read only as ``args.key``, only those keys are passed: a
    browser target's nested element costs far more to hand over than the URL a rule reads.
    """

    source: str
    program: Any
    variables: tuple[str, ...] = ()
    fields: tuple[tuple[str, frozenset[str]], ...] = ()

    @classmethod
    def compile(cls, source: str, where: str) -> Condition:
        """Compile ``source``.

        Raises:
            RuleConditionInvalid: It does not parse; the message quotes CEL's own error.
        """
        # Imported on the first rule compiled: the package (and the CLI it drags in) costs a
        # fifth of a second, which a ledger without rules, and the TUI's first screen, never need.
        import cel

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
        variables = tuple(sorted(program.references().get("variables", ())))
        fields = tuple(
            (name, read)
            for name in variables
            if name in ("args", "target") and (read := _fields_read(source, name)) is not None
        )
        return cls(source, program, variables, fields)

    def holds(self, activation: dict[str, Any]) -> bool | None:
        """True or False; ``None`` when it cannot be evaluated for this call."""
        passed = {name: activation[name] for name in self.variables if name in activation}
        for name, read in self.fields:
            value = passed.get(name)
            if isinstance(value, dict):
                passed[name] = {key: value[key] for key in read if key in value}
        try:
            value = self.program.execute(passed)
        except (KeyError, ValueError, TypeError, RuntimeError, AttributeError):
            return None
        return value if isinstance(value, bool) else None
