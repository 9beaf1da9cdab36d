"""Approval policies (who may grant authority), their stored form, and the argument diff of an edit.

A policy is stored in the ledger as a versioned document (canonical JSON, see
:class:`PolicyVersion`) and every process that opens the ledger enforces the current version:

```json
{"format": 1,
 "approval": {"forbid_self_approval": true, "approvers_by_domain": {"finance": ["cfo"]}}}
```

Readers are strict: an unknown key or a newer ``format`` is refused, never ignored, so a release
that adds sections (allow/ask/deny rules, grants) cannot have its rules silently dropped by an
older one. Sections that older releases could safely ignore may be added without a new format;
anything that changes a decision bumps ``format``. Rules match the
:class:`~supervisor.ledger.identity.EnvironmentIdentity` of the deciding process (``user`` or
``user@host``), never a free-text approver id.
"""

from __future__ import annotations

import functools
import json
import tomllib
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from supervisor.canonical import canonical_json, sha256_hex
from supervisor.errors import CanonicalJSONError
from supervisor.ledger.errors import (
    ApproverNotAllowed,
    IdentityNotVerified,
    PolicyInvalid,
    SelfApprovalForbidden,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.models import Proposal
from supervisor.rules.condition import RuleConditionInvalid
from supervisor.rules.evaluate import RuleSet
from supervisor.rules.loader import RulesInvalid, rules_from_document

POLICY_FORMAT = 2
"""The newest policy document format this release reads and writes: 2 adds ``rules``
(allow/ask/deny, see :mod:`supervisor.rules`); a document without rules is still written as 1,
so its hash (and every older release's reading of it) stays the same."""
RULES_FORMAT = 2

_TOP_KEYS = frozenset({"format", "approval", "rules"})
_APPROVAL_KEYS = frozenset({"forbid_self_approval", "approvers_by_domain"})
_MAX_NAME = 200


def _problem_in_name(name: object, what: str) -> str | None:
    """Why ``name`` cannot be an identity or domain name, or ``None`` when it can."""
    if not isinstance(name, str):
        return f"{what} must be a string, not {type(name).__name__}"
    if not name or len(name) > _MAX_NAME:
        return f"{what} must be 1 to {_MAX_NAME} characters"
    for char in name:
        if char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            return f"{what} {name!r} contains a space, control or invisible character"
    return None


def _domain_problem(domain: object) -> str | None:
    """Why ``domain`` cannot be a policy domain key, or ``None`` when it can.

    A key is compared for equality with the domains of proposals, which are tool domains; a
    key no tool domain can equal (``Finance``, ``finance*``, ``crm:``) would leave the domain
    it was meant for open, so it is refused.
    """
    problem = _problem_in_name(domain, "a domain")
    if problem is not None:
        return problem
    from supervisor.tools.policy import TOOL_DOMAIN_RULE, is_tool_domain

    if not is_tool_domain(domain):
        return (
            f"domain {domain!r} can never match a tool's domain (tool domains are "
            f"{TOOL_DOMAIN_RULE}; keys are compared exactly, with no patterns)"
        )
    return None


def _identity_problem(name: object) -> str | None:
    problem = _problem_in_name(name, "an approver identity")
    if problem is None and isinstance(name, str) and "#" in name:
        # ``user@host#instance`` is a supervisor's label; identities are ``user`` or ``user@host``.
        return f"approver identity {name!r} must be an OS user or user@host (no '#instance')"
    return problem


def _normalised(
    forbid_self_approval: object, approvers_by_domain: object, *, source: str
) -> dict[str, frozenset[str]]:
    """The allowlists as frozensets, after checking every field.

    Raises:
        PolicyInvalid: A flag is not a bool, a domain is not a name a tool domain can have,
            or an identity is not a clean name.
    """
    if not isinstance(forbid_self_approval, bool):
        raise PolicyInvalid("forbid_self_approval must be true or false", source=source)
    if not isinstance(approvers_by_domain, Mapping):
        raise PolicyInvalid("approvers_by_domain must map domains to lists", source=source)
    normalised: dict[str, frozenset[str]] = {}
    for domain, approvers in approvers_by_domain.items():
        problem = _domain_problem(domain)
        if problem is None and (
            isinstance(approvers, str | bytes) or not isinstance(approvers, Collection)
        ):
            problem = f"the approvers of domain {domain!r} must be a list of identities"
        for approver in () if problem else approvers:
            problem = problem or _identity_problem(approver)
        if problem:
            raise PolicyInvalid(problem, source=source)
        normalised[domain] = frozenset(approvers)
    return normalised


def _rule_tables(rules: object, *, source: str) -> tuple[dict[str, Any], ...]:
    """The ``[[rules]]`` tables as JSON data (what is stored and hashed).

    Raises:
        PolicyInvalid: Not a list of tables, or a value JSON cannot hold (a TOML date).
    """
    if isinstance(rules, str | bytes | Mapping) or not isinstance(rules, Sequence):
        raise PolicyInvalid("rules must be an array of tables ([[rules]])", source=source)
    tables: list[dict[str, Any]] = []
    for index, rule in enumerate(rules):
        if not isinstance(rule, Mapping):
            raise PolicyInvalid(f"rules[{index}] must be a table", source=source)
        try:
            tables.append(json.loads(canonical_json(dict(rule))))
        except CanonicalJSONError as error:
            raise PolicyInvalid(
                f"rules[{index}] holds a value a policy cannot store ({error})", source=source
            ) from None
    return tuple(tables)


def _compiled(rules: tuple[dict[str, Any], ...], *, source: str) -> RuleSet:
    """The rule tables compiled (conditions included), once per distinct set of rules.

    Raises:
        PolicyInvalid: A rule is not usable as written (named, with the key at fault).
    """
    try:
        return _compile_rules(canonical_json(list(rules)))
    except (RulesInvalid, RuleConditionInvalid) as error:
        raise PolicyInvalid(error.message, source=source, hint=error.hint) from None


@functools.lru_cache(maxsize=32)
def _compile_rules(rules_json: str) -> RuleSet:
    return rules_from_document({"rules": json.loads(rules_json)})


@dataclass(frozen=True, eq=False)
class ApprovalPolicy:
    """Who may grant authority over a proposal.

    Applies to decisions that grant or prolong authority (approve, edit, extend); rejecting,
    cancelling and revoking only take authority away, so any approver may do them. The deciding
    party is the OS identity of the deciding process (``user`` or ``user@host``), never the
    approver id, which is only a label. Two policies are equal when their documents are.

    Attributes:
        forbid_self_approval: The OS user whose name is the proposal's ``user`` (as ``user`` or
            ``user@host``, compared case-insensitively) may not approve it.
        approvers_by_domain: For each listed domain, the only identities (``user`` matches that
            OS user on any host, ``user@host`` only on that host) allowed; an empty list allows
            nobody. Domains not listed are open to every approver. Keys are tool domains
            (``supervisor.tools.policy.TOOL_DOMAIN_RULE``), compared exactly.

    Raises:
        PolicyInvalid: A flag is not a bool, a domain key is not one a tool domain can be, or
            an identity is not a clean name.
    """

    forbid_self_approval: bool = False
    approvers_by_domain: Mapping[str, Collection[str]] = field(default_factory=dict)
    rules: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        normalised = _normalised(
            self.forbid_self_approval, self.approvers_by_domain, source="ApprovalPolicy"
        )
        object.__setattr__(self, "approvers_by_domain", normalised)
        rules = _rule_tables(self.rules, source="ApprovalPolicy")
        object.__setattr__(self, "rules", rules)
        object.__setattr__(self, "_ruleset", _compiled(rules, source="ApprovalPolicy"))

    @property
    def ruleset(self) -> RuleSet:
        """The rules, compiled (CEL conditions included) once when the policy was read."""
        compiled: RuleSet = getattr(self, "_ruleset")  # noqa: B009 - set in __post_init__
        return compiled

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApprovalPolicy):
            return NotImplemented
        return self.document_hash == other.document_hash

    def __hash__(self) -> int:
        return hash(self.document_hash)

    # -- the stored form ------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        """The policy as its stored JSON document (sorted lists; rules in file order).

        Format 1 without rules, :data:`RULES_FORMAT` with them: an older release refuses a
        policy with rules rather than enforcing it without them.
        """
        document: dict[str, Any] = {
            "format": RULES_FORMAT if self.rules else 1,
            "approval": {
                "forbid_self_approval": self.forbid_self_approval,
                "approvers_by_domain": {
                    domain: sorted(approvers)
                    for domain, approvers in sorted(self.approvers_by_domain.items())
                },
            },
        }
        if self.rules:
            document["rules"] = [dict(rule) for rule in self.rules]
        return document

    def document_json(self) -> str:
        """The document as canonical JSON (what is stored and hashed)."""
        return canonical_json(self.to_document())

    @cached_property
    def document_hash(self) -> str:
        """SHA-256 of :meth:`document_json`: two policies are the same exactly when it is."""
        return sha256_hex(self.document_json().encode())

    @classmethod
    def from_document(cls, document: object, *, source: str) -> ApprovalPolicy:
        """Read a policy document strictly.

        Args:
            document: Parsed JSON or TOML.
            source: Where it came from, named in errors (a file path, "stored policy v3").

        Raises:
            PolicyInvalid: Not a policy document of a format this release reads.
        """
        if not isinstance(document, Mapping):
            raise PolicyInvalid("a policy must be a table/object", source=source)
        unknown = sorted(set(document) - _TOP_KEYS)
        if unknown:
            raise PolicyInvalid(f"unknown key(s) {', '.join(map(repr, unknown))}", source=source)
        version = document.get("format", POLICY_FORMAT)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise PolicyInvalid("format must be a positive integer", source=source)
        if version > POLICY_FORMAT:
            raise PolicyInvalid(
                f"policy format {version} is newer than this release reads ({POLICY_FORMAT})",
                source=source,
                hint="Upgrade agent-supervisor in this process; nothing was changed.",
            )
        approval = document.get("approval", {})
        if not isinstance(approval, Mapping):
            raise PolicyInvalid("[approval] must be a table", source=source)
        unknown = sorted(set(approval) - _APPROVAL_KEYS)
        if unknown:
            raise PolicyInvalid(
                f"unknown key(s) in [approval]: {', '.join(map(repr, unknown))}", source=source
            )
        by_domain = approval.get("approvers_by_domain", {})
        if not isinstance(by_domain, Mapping):
            raise PolicyInvalid("[approval.approvers_by_domain] must be a table", source=source)
        forbid = approval.get("forbid_self_approval", False)
        rules = _rule_tables(document.get("rules", ()), source=source)
        if rules and version < RULES_FORMAT:
            raise PolicyInvalid(
                f"[[rules]] need format = {RULES_FORMAT} (or no format line)", source=source
            )
        _compiled(rules, source=source)  # errors name the file; the policy reuses the result
        return cls(
            forbid_self_approval=forbid,
            approvers_by_domain=_normalised(forbid, by_domain, source=source),
            rules=rules,
        )

    @classmethod
    def from_toml(cls, text: str, *, source: str) -> ApprovalPolicy:
        """Read a policy from TOML text (an ``[approval]`` table).

        Raises:
            PolicyInvalid: Not TOML, or not a policy document.
        """
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise PolicyInvalid(f"not valid TOML ({error})", source=source) from None
        return cls.from_document(document, source=source)

    # -- enforcement ----------------------------------------------------------------------

    def check_grant(
        self,
        proposal: Proposal,
        identity: EnvironmentIdentity,
        *,
        approving: bool,
        approver_id: str = "",
    ) -> None:
        """Raise if the process with ``identity`` may not grant authority over ``proposal``.

        Args:
            proposal: The proposal being decided.
            identity: The deciding process's OS identity (what the rules match).
            approving: True for an approval (self-approval applies), False for edit/extend.
            approver_id: The free-text label, only named in the error.

        Raises:
            IdentityNotVerified: A rule applies and a user namespace maps this process's uid.
            SelfApprovalForbidden: Self-approval is forbidden and the approver is the requester.
            ApproverNotAllowed: A domain of the proposal has an allowlist without the approver.
        """
        self_rule = approving and self.forbid_self_approval and proposal.user is not None
        listed = [domain for domain in proposal.domains if domain in self.approvers_by_domain]
        if (self_rule or listed) and not identity.verified:
            raise IdentityNotVerified(
                identity=str(identity), proposal_id=proposal.proposal_id, approver_id=approver_id
            )
        if self_rule and proposal.user is not None:
            requester = proposal.user.casefold()
            if any(name.casefold() == requester for name in identity.names()):
                raise SelfApprovalForbidden(
                    proposal.proposal_id,
                    approver_id=approver_id,
                    identity=str(identity),
                    user=proposal.user,
                )
        for domain in listed:
            allowed = self.approvers_by_domain[domain]
            if any(identity.names_of(user).isdisjoint(allowed) for user in identity.users):
                raise ApproverNotAllowed(
                    proposal.proposal_id,
                    approver_id=approver_id,
                    domain=domain,
                    identity=str(identity),
                )


NO_POLICY = ApprovalPolicy()
"""What a ledger with no stored policy enforces: every approver may approve everything."""


POLICY_SUBJECT = "policy"
"""The audit subject of policy changes."""
POLICY_APPLY = "policy_apply"
"""The audit action that applies a policy version."""


class StoredPolicy(NamedTuple):
    """The policy version in force exactly as stored: what the decision path checks."""

    version: int
    document_hash: str
    document_json: str


class PolicyInForce(NamedTuple):
    """What a granting decision reads about the policy, inside its own write transaction.

    The highest ``policy_version`` row and the payload of the newest ``policy_apply`` audit
    record. A row is only a cache of that record: any process that can write the ledger can
    insert or rewrite rows, so the two must name the same version and document hash.
    """

    stored: StoredPolicy | None
    record_json: str | None

    def audit_problem(self) -> str | None:
        """Why the row in force is not the one the newest ``policy_apply`` record applied, or
        ``None`` when it is (or when there is neither)."""
        stored, record_json = self.stored, self.record_json
        if stored is None:
            if record_json is None:
                return None
            return "the audit chain applied a policy but the ledger has no policy row"
        if record_json is None:
            return "no policy_apply audit record applied this version"
        try:
            payload = json.loads(record_json)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return "the newest policy_apply audit record cannot be read"
        audited = payload.get("version")
        if audited != stored.version:
            return f"the newest policy_apply audit record applied v{audited}, not this version"
        if payload.get("document_hash") != stored.document_hash:
            return "the document is not the one its policy_apply audit record applied"
        return None


class PolicyVersion(BaseModel):
    """One stored version of a ledger's approval policy.

    Attributes:
        version: 1, 2, ... in the order applied.
        document: The policy document (see the module docstring).
        document_hash: SHA-256 of the document's canonical JSON.
        applied_by: The OS identity (``user@host``) of the process that applied it.
        applied_at: When (UTC).
        reason: Why, as given by whoever applied it.
        audit_seq: The audit record written with it.
    """

    model_config = ConfigDict(frozen=True)

    version: int
    document: dict[str, Any]
    document_hash: str
    applied_by: str
    applied_at: datetime
    reason: str | None = None
    audit_seq: int

    @property
    def policy(self) -> ApprovalPolicy:
        """The policy this version holds.

        Raises:
            PolicyInvalid: The stored document is not one this release reads.
        """
        return ApprovalPolicy.from_document(self.document, source=f"stored policy v{self.version}")


def diff_arguments(old: Any, new: Any, path: str = "$") -> list[dict[str, Any]]:
    """JSON-path-style differences between two argument values.

    Returns:
        One ``{"path", "old", "new"}`` entry per changed leaf; a missing side is reported under
        ``"op": "added"`` or ``"op": "removed"``.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[dict[str, Any]] = []
        for key in sorted(old.keys() | new.keys()):
            child = f"{path}.{key}"
            if key not in new:
                changes.append({"op": "removed", "path": child, "old": old[key]})
            elif key not in old:
                changes.append({"op": "added", "path": child, "new": new[key]})
            else:
                changes.extend(diff_arguments(old[key], new[key], child))
        return changes
    if old == new and type(old) is type(new):
        return []
    return [{"op": "changed", "path": path, "old": old, "new": new}]
