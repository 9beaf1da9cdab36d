"""A stored policy as the TOML file ``supervisor policy apply`` reads, and the difference
between two policies (``supervisor policy diff FILE``), rule by rule."""

from __future__ import annotations

import json
import re
from typing import Any

from supervisor.ledger.policy import ApprovalPolicy

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_RULE_ORDER = {key: index for index, key in enumerate(
    ("name", "verdict", "reason", "approvals", "tool", "domains", "agents", "users", "target",
     "sites", "args", "when", "examples")
)}  # fmt: skip


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def toml_value(value: Any) -> str:
    """One TOML value (inline tables and arrays); the values are JSON data."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        # A TOML basic string: JSON's escapes for quotes, backslashes and controls are TOML's.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{_key(key)} = {toml_value(item)}" for key, item in value.items())
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"not JSON data: {type(value).__name__}")


def policy_toml(policy: ApprovalPolicy) -> str:
    """The policy as a TOML file that ``supervisor policy apply`` reads back unchanged."""
    document = policy.to_document()
    approval = document["approval"]
    lines = [
        f"format = {document['format']}",
        "",
        "[approval]",
        f"forbid_self_approval = {toml_value(approval['forbid_self_approval'])}",
        "",
        "[approval.approvers_by_domain]",
    ]
    for domain, approvers in approval["approvers_by_domain"].items():
        lines.append(f"{toml_value(domain)} = {toml_value(approvers)}")
    for rule in document.get("rules", []):
        lines += ["", "[[rules]]"]
        # Stored with sorted keys; printed in the order people write a rule (name first).
        keys = sorted(rule, key=lambda key: (_RULE_ORDER.get(key, len(_RULE_ORDER)), key))
        lines += [f"{_key(key)} = {toml_value(rule[key])}" for key in keys]
    return "\n".join(lines)


def policy_diff(old: ApprovalPolicy, new: ApprovalPolicy) -> list[dict[str, Any]]:
    """What applying ``new`` over ``old`` changes: one entry per rule added, removed or
    changed (by name, with the keys that differ) and per approval setting changed."""
    changes: list[dict[str, Any]] = []
    old_doc, new_doc = old.to_document(), new.to_document()
    for key in ("forbid_self_approval", "approvers_by_domain"):
        before, after = old_doc["approval"][key], new_doc["approval"][key]
        if before != after:
            changes.append({"op": "changed", "what": f"approval.{key}", "old": before,
                            "new": after})  # fmt: skip
    old_rules = {rule["name"]: rule for rule in old_doc.get("rules", [])}
    new_rules = {rule["name"]: rule for rule in new_doc.get("rules", [])}
    for name, rule in old_rules.items():
        if name not in new_rules:
            changes.append({"op": "removed", "what": f"rule {name}", "old": rule})
    for name, rule in new_rules.items():
        before = old_rules.get(name)
        if before is None:
            changes.append({"op": "added", "what": f"rule {name}", "new": rule})
            continue
        for key in sorted(before.keys() | rule.keys()):
            if before.get(key) != rule.get(key):
                changes.append({"op": "changed", "what": f"rule {name}: {key}",
                                "old": before.get(key), "new": rule.get(key)})  # fmt: skip
    old_order = [name for name in old_rules if name in new_rules]
    new_order = [name for name in new_rules if name in old_rules]
    if old_order != new_order:  # order breaks ties between rules of equal strength
        changes.append({"op": "changed", "what": "rule order", "old": old_order,
                        "new": new_order})  # fmt: skip
    return changes


def diff_lines(changes: list[dict[str, Any]]) -> list[str]:
    """``+``/``-``/``~`` lines for people (values as TOML)."""
    lines = []
    for change in changes:
        op, what = change["op"], change["what"]
        if op == "added":
            lines.append(f"+ {what}: {toml_value(change['new'])}")
        elif op == "removed":
            lines.append(f"- {what}: {toml_value(change['old'])}")
        else:
            old = "(none)" if change["old"] is None else toml_value(change["old"])
            new = "(none)" if change["new"] is None else toml_value(change["new"])
            lines.append(f"~ {what}: {old} -> {new}")
    return lines
