"""Typed ledger errors: each has a stable ``code`` and a message that says what to do."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from supervisor.errors import SupervisorError


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else "an unknown time"


class LedgerError(SupervisorError):
    """Base of every error raised by the approval ledger."""

    code = "ledger_error"


class ProposalNotFound(LedgerError, LookupError):
    """No proposal has that id (it never existed or was purged by retention)."""

    code = "proposal_not_found"

    def __init__(self, proposal_id: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"No proposal {proposal_id!r} in the ledger.",
            hint="Check the id with `supervisor proposals list --all`; purged proposals remain "
            "in the audit log.",
            proposal_id=proposal_id,
        )


class IdAmbiguous(LedgerError, LookupError):
    """A typed id prefix matches more than one row: the candidates are listed."""

    code = "ambiguous_id"

    def __init__(self, kind: str, given: str, candidates: list[tuple[str, str]]) -> None:
        self.given = given
        self.candidates = candidates
        shown = "; ".join(f"{found} ({what})" for found, what in candidates[:5])
        more = f" and {len(candidates) - 5} more" if len(candidates) > 5 else ""
        super().__init__(
            f"{len(candidates) if len(candidates) <= 10 else 'More than 10'} {kind}s start "
            f"with {given!r}: {shown}{more}.",
            hint="Type more of the id (the full id is always accepted).",
            given=given,
            candidates=[found for found, _ in candidates],
        )


#: The command that lists a kind of row, where it is not ``supervisor <kind>s list --all``.
_LIST_COMMAND = {"webhook": "supervisor notify list --all"}


class IdPrefixTooShort(LedgerError, ValueError):
    """An id prefix too short to name one row among many."""

    code = "id_prefix_too_short"

    def __init__(self, kind: str, given: str, minimum: int) -> None:
        self.given = given
        super().__init__(
            f"{given!r} is too short to name a {kind}: type at least {minimum} characters of "
            "its id.",
            hint=f"List them with `{_LIST_COMMAND.get(kind, f'supervisor {kind}s list --all')}` "
            "to copy an id.",
            given=given,
        )


class ApprovalAlreadyDecided(LedgerError):
    """The proposal is no longer in the state the action needs; someone else acted first."""

    code = "approval_already_decided"

    def __init__(
        self,
        proposal_id: str,
        *,
        status: str,
        by: str | None,
        at: datetime | None,
        wanted: str,
    ) -> None:
        self.proposal_id = proposal_id
        self.status = status
        self.by = by
        self.at = at
        who = by or "the ledger"
        super().__init__(
            f"Proposal {proposal_id} is already {status} (by {who} at {_when(at)}); "
            f"it cannot be {wanted}.",
            hint="Reload the proposal; a consumed or decided proposal is never reused.",
            proposal_id=proposal_id,
            status=status,
            by=by,
            at=at.isoformat() if at else None,
        )


class NotApproved(LedgerError):
    """The proposal has not been approved yet, so it cannot run."""

    code = "not_approved"

    def __init__(self, proposal_id: str, *, status: str) -> None:
        self.proposal_id = proposal_id
        self.status = status
        super().__init__(
            f"Proposal {proposal_id} is {status}; only an approved proposal can be claimed.",
            hint="Wait for a human decision (`supervisor proposals list --status pending`).",
            proposal_id=proposal_id,
            status=status,
        )


class ApprovalExpired(LedgerError):
    """The proposal's expiry passed before the action."""

    code = "approval_expired"

    def __init__(self, proposal_id: str, *, expires_at: datetime) -> None:
        self.proposal_id = proposal_id
        self.expires_at = expires_at
        super().__init__(
            f"Proposal {proposal_id} expired at {_when(expires_at)}.",
            hint="Ask the agent to propose the call again, or extend it before it expires.",
            proposal_id=proposal_id,
            expires_at=expires_at.isoformat(),
        )


class ArgumentsMismatch(LedgerError):
    """What is about to run does not hash to what was approved (changed args or tampering)."""

    code = "arguments_mismatch"

    def __init__(self, proposal_id: str, *, expected: str, stored: str, recomputed: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"Proposal {proposal_id}: arguments hash mismatch "
            f"(caller {expected[:12]}, stored {stored[:12]}, recomputed {recomputed[:12]}). "
            "Nothing was executed.",
            hint="Propose the call again with the exact arguments; check the ledger for tampering "
            "with `supervisor audit verify`.",
            proposal_id=proposal_id,
            expected=expected,
            stored=stored,
            recomputed=recomputed,
        )


class AuditMismatch(LedgerError):
    """The proposal's row says something its audit records do not (the ledger was written to
    outside the supervisor): nothing may run on it."""

    code = "audit_mismatch"

    def __init__(self, proposal_id: str, *, detail: str) -> None:
        self.proposal_id = proposal_id
        self.detail = detail
        super().__init__(
            f"Proposal {proposal_id}: the ledger row does not match its audit records ({detail}). "
            "Nothing was executed.",
            hint="Someone wrote to the ledger outside the supervisor: run `supervisor audit "
            "verify` and do not trust this proposal; propose the call again if it is wanted.",
            proposal_id=proposal_id,
            detail=detail,
        )


class InvalidAnchor(LedgerError, ValueError):
    """An audit anchor is not ``HASH`` or ``SEQ:HASH`` (a 64-digit hex SHA-256)."""

    code = "invalid_anchor"

    def __init__(self, anchor: str) -> None:
        super().__init__(
            f"Not an audit anchor: {anchor!r}.",
            hint="Pass the hash printed by `supervisor audit head` (HASH or SEQ:HASH).",
            anchor=anchor,
        )


class NotOwner(LedgerError, PermissionError):
    """The caller is not the party this action belongs to (e.g. another executor's claim)."""

    code = "not_owner"

    def __init__(self, proposal_id: str, *, actor: str, owner: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"{actor!r} cannot act on proposal {proposal_id}; it belongs to {owner!r}.",
            hint="Only the executor that claimed a proposal may record its outcome.",
            proposal_id=proposal_id,
            actor=actor,
            owner=owner,
        )


class ApproverNotAllowed(LedgerError, PermissionError):
    """The deciding OS identity is not on the allowlist for one of the proposal's domains."""

    code = "approver_not_allowed"

    def __init__(
        self, proposal_id: str, *, approver_id: str, domain: str, identity: str | None = None
    ) -> None:
        self.proposal_id = proposal_id
        self.approver_id = approver_id
        self.identity = identity or approver_id
        label = f" (approver label {approver_id!r})" if identity else ""
        super().__init__(
            f"{self.identity} may not decide proposal {proposal_id} (domain {domain!r}){label}.",
            hint="Ask an approver listed for that domain to decide it from their own OS account "
            "(`supervisor policy show`); the approver label does not change who you are.",
            proposal_id=proposal_id,
            approver_id=approver_id,
            domain=domain,
            identity=self.identity,
        )


class SelfApprovalForbidden(LedgerError, PermissionError):
    """Policy forbids the requesting user from approving their own proposal."""

    code = "self_approval_forbidden"

    def __init__(
        self,
        proposal_id: str,
        *,
        approver_id: str,
        identity: str | None = None,
        user: str | None = None,
    ) -> None:
        self.proposal_id = proposal_id
        self.approver_id = approver_id
        self.identity = identity or approver_id
        label = f" (approver label {approver_id!r})" if identity else ""
        requester = f"is the proposal's user ({user!r})" if user else "requested it"
        super().__init__(
            f"{self.identity} {requester} and may not approve proposal {proposal_id}{label}.",
            hint="Ask someone logged in as a different OS user (the ledger forbids self-approval).",
            proposal_id=proposal_id,
            approver_id=approver_id,
            identity=self.identity,
        )


class IdentityNotVerified(LedgerError, PermissionError):
    """A policy rule needs this process's OS user, which a user namespace makes unverifiable."""

    code = "identity_not_verified"

    def __init__(
        self, *, identity: str, proposal_id: str | None = None, approver_id: str | None = None
    ) -> None:
        self.proposal_id = proposal_id
        self.identity = identity
        act = f"decide proposal {proposal_id}" if proposal_id else "apply an approval policy"
        label = f" (approver label {approver_id!r})" if approver_id else ""
        super().__init__(
            f"{identity} may not {act}: a user namespace maps this process's uid, so its OS "
            f"user cannot be verified{label}.",
            hint="Run it from a process outside any user namespace (a normal login shell).",
            proposal_id=proposal_id,
            approver_id=approver_id,
            identity=identity,
        )


class PolicyInvalid(LedgerError, ValueError):
    """An approval policy document (a file, an SDK object or the stored version) is unusable."""

    code = "policy_invalid"

    def __init__(self, problem: str, *, source: str, hint: str | None = None) -> None:
        self.source = source
        super().__init__(
            f"{source}: {problem}",
            hint=hint or "Fix the policy (see docs/policy.md) and run `supervisor policy apply`.",
            source=source,
        )


class GrantRefused(LedgerError, PermissionError):
    """A grant cannot be made from this proposal (a never-grantable tool, bad limits)."""

    code = "grant_refused"

    def __init__(self, proposal_id: str, why: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"No grant was made from proposal {proposal_id}: {why}.",
            hint="Approve the call on its own, or fix the grant's lifetime and use cap.",
            proposal_id=proposal_id,
        )


class GrantNotFound(LedgerError, LookupError):
    """No grant has that id."""

    code = "grant_not_found"

    def __init__(self, grant_id: str) -> None:
        self.grant_id = grant_id
        super().__init__(
            f"No grant {grant_id!r}.",
            hint="List the grants with `supervisor grants list --all`.",
            grant_id=grant_id,
        )


class QuorumVoteRepeated(LedgerError, PermissionError):
    """An identity that already approved a quorum proposal approved it again."""

    code = "quorum_vote_repeated"

    def __init__(self, proposal_id: str, identity: str, quorum: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"{identity} already approved proposal {proposal_id} ({quorum}); a quorum needs "
            "distinct approvers.",
            hint="Ask another approver, from their own OS account, to approve it.",
            proposal_id=proposal_id,
            identity=identity,
        )


class PolicyMismatch(LedgerError):
    """A process opened the ledger with a policy other than the one the ledger enforces."""

    code = "policy_mismatch"

    def __init__(self, *, stored_version: int, stored_hash: str, given_hash: str) -> None:
        self.stored_version = stored_version
        super().__init__(
            f"The ledger enforces approval policy v{stored_version} ({stored_hash[:12]}); this "
            f"process was given a different one ({given_hash[:12]}) and it was not applied.",
            hint="Open the ledger without policy= to use the stored policy, or change it for "
            "everyone with `supervisor policy apply FILE`.",
            stored_version=stored_version,
            stored_hash=stored_hash,
            given_hash=given_hash,
        )


class BlobCorrupted(LedgerError):
    """Stored blob content no longer matches its digest."""

    code = "blob_corrupted"

    def __init__(self, digest: str, *, actual: str) -> None:
        super().__init__(
            f"Blob {digest[:12]} is corrupted (content hashes to {actual[:12]}).",
            hint="Restore the ledger from a backup; do not trust this content.",
            digest=digest,
            actual=actual,
        )


class LedgerSchemaTooNew(LedgerError):
    """The ledger was written by a newer release than this code."""

    code = "ledger_schema_too_new"

    def __init__(self, *, found: Any, supported: Any, url: str) -> None:
        super().__init__(
            f"The ledger at {url} has schema version {found}; this release understands "
            f"up to {supported}.",
            hint="Upgrade agent-supervisor (pip install -U agent-supervisor) or point "
            "SUPERVISOR_DB at another ledger.",
            found=found,
            supported=supported,
        )


class LedgerBusy(LedgerError):
    """The ledger stayed locked by other writers past the busy timeout."""

    code = "ledger_busy"


class LedgerUnavailable(LedgerError):
    """The ledger cannot be reached or written (server down, disk full, read-only file)."""

    code = "ledger_unavailable"


class InvalidExtension(LedgerError, ValueError):
    """An ``extend`` that cannot be applied; nothing was changed (subclasses say why)."""

    code = "invalid_extension"

    def __init__(self, proposal_id: str, message: str, *, hint: str, **details: Any) -> None:
        self.proposal_id = proposal_id
        super().__init__(message, hint=hint, proposal_id=proposal_id, **details)


class ExtensionNotFinite(InvalidExtension):
    """The extension is not a finite number of seconds (NaN, infinity, not a number)."""

    code = "extension_not_finite"

    def __init__(self, proposal_id: str, *, seconds: object) -> None:
        super().__init__(
            proposal_id,
            f"Cannot extend proposal {proposal_id} by {seconds!r}: not a finite number of seconds.",
            hint="Give a positive, finite number of seconds.",
            seconds=repr(seconds),
        )


class ExtensionNotPositive(InvalidExtension):
    """The extension is zero or negative (an extension never shortens an expiry)."""

    code = "extension_not_positive"

    def __init__(self, proposal_id: str, *, seconds: float) -> None:
        super().__init__(
            proposal_id,
            f"Cannot extend proposal {proposal_id} by {seconds!r} seconds: it must be positive.",
            hint="Give a positive number of seconds; cancel or reject to end a proposal early.",
            seconds=seconds,
        )


class ExtensionTooSmall(InvalidExtension):
    """The extension is below the smallest step (1 ms): it would not move the expiry."""

    code = "extension_too_small"

    def __init__(self, proposal_id: str, *, seconds: float, minimum: float) -> None:
        super().__init__(
            proposal_id,
            f"Cannot extend proposal {proposal_id} by {seconds!r} seconds: an extension must be "
            f"at least {minimum:g} seconds to move the expiry.",
            hint=f"Give at least {minimum:g} seconds.",
            seconds=seconds,
            minimum=minimum,
        )


class ExtensionBeyondLimit(InvalidExtension):
    """The extension would push the proposal's lifetime past the ledger's extend limit."""

    code = "extension_beyond_limit"

    def __init__(
        self, proposal_id: str, *, seconds: float, max_expires_at: datetime, max_seconds: float
    ) -> None:
        self.max_expires_at = max_expires_at
        super().__init__(
            proposal_id,
            f"Cannot extend proposal {proposal_id} by {seconds!r} seconds: its expiry may move "
            f"to {_when(max_expires_at)} at the latest ({max(0.0, max_seconds):.0f} seconds "
            "from its current expiry).",
            hint="Extend by less, or ask the agent to propose the call again.",
            seconds=seconds,
            max_expires_at=max_expires_at.isoformat(),
            max_seconds=max(0.0, max_seconds),
        )


class ReservedArgumentEdit(LedgerError, ValueError):
    """Edited arguments use a name reserved for the approval machinery; nothing was changed."""

    code = "reserved_argument"

    def __init__(self, proposal_id: str, *, names: list[str]) -> None:
        self.proposal_id = proposal_id
        self.names = names
        listed = ", ".join(repr(name) for name in names)
        super().__init__(
            f"Cannot edit proposal {proposal_id}: {listed} "
            f"{'is a reserved name' if len(names) == 1 else 'are reserved names'} "
            "(approval is decided by a human, never by an argument).",
            hint="Remove the reserved names (approved, confirm, proposal_id, _anything...).",
            proposal_id=proposal_id,
            names=names,
        )


class LedgerNotFound(LedgerUnavailable):
    """No ledger exists where a command that must not create one looked (read commands)."""

    code = "ledger_not_found"

    def __init__(self, where: str, *, reason: str = "does not exist") -> None:
        self.where = where
        super().__init__(
            f"No ledger at {where}: it {reason}; nothing was created.",
            hint="Check --db / SUPERVISOR_DB; reading never creates a ledger (the first agent "
            "run, the TUI or SQLModelProvider(url) does).",
            where=where,
        )


class NotALedger(LedgerUnavailable):
    """The file or database exists but is not an agent-supervisor ledger."""

    code = "not_a_ledger"

    def __init__(self, where: str | None, *, reason: str) -> None:
        self.where = where
        super().__init__(
            f"{where or 'The ledger file'} is not a ledger: {reason}; nothing was written.",
            hint="Check --db / SUPERVISOR_DB: point it at a ledger file or database.",
            where=where,
        )


class LedgerCorrupt(LedgerUnavailable):
    """The ledger's file or metadata is damaged (truncated file, unreadable schema version)."""

    code = "ledger_corrupt"

    def __init__(self, where: str | None, *, reason: str) -> None:
        self.where = where
        super().__init__(
            f"The ledger{f' at {where}' if where else ''} is damaged: {reason}; "
            "nothing was written.",
            hint="Restore it from a backup (or salvage it with `sqlite3 FILE .recover`).",
            where=where,
        )


class LedgerSchemaTooOld(LedgerUnavailable):
    """A read-only open found a ledger that needs a migration (which would be a write)."""

    code = "ledger_schema_too_old"

    def __init__(self, where: str, *, found: int, supported: int) -> None:
        super().__init__(
            f"The ledger at {where} has schema version {found}; this release reads version "
            f"{supported} and does not migrate a ledger it opens read-only.",
            hint="Open it once with write access (the TUI, or SQLModelProvider(url) in Python) "
            "to migrate it.",
            where=where,
            found=found,
            supported=supported,
        )


class UnsupportedLedgerUrl(LedgerUnavailable):
    """The ledger URL names an engine or driver the ledger does not run on."""

    code = "unsupported_ledger_url"

    def __init__(self, shown: str, *, reason: str) -> None:
        super().__init__(
            f"{shown} is not a ledger URL this release can open: {reason}.",
            hint="Use a SQLite path or sqlite:///PATH, or postgresql+psycopg://USER@HOST/DB.",
            url=shown,
        )


def _clipped(text: str, limit: int = 160) -> str:
    """``text`` for a one-line message: a very long value keeps its start and end."""
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]}…{text[-limit // 4 :]} ({len(text)} characters)"


class LedgerPathInvalid(LedgerUnavailable):
    """A SQLite ledger path the filesystem cannot use (a name too long, an unknown ``~user``,
    a NUL character, a folder on the way that is a file)."""

    code = "invalid_ledger_path"

    def __init__(self, where: str, *, reason: str) -> None:
        self.where = where
        super().__init__(
            f"{_clipped(where)} cannot be a ledger file: {reason}; nothing was written.",
            hint="Check --db / SUPERVISOR_DB: a SQLite path (or sqlite:///PATH) the filesystem "
            "accepts, or postgresql+psycopg://USER@HOST/DB.",
            where=_clipped(where),
        )


class LedgerPermissionDenied(LedgerUnavailable):
    """The database refused this session a read or write it needs (e.g. a PostgreSQL role
    granted only SELECT): nothing was written."""

    code = "ledger_permission_denied"

    def __init__(self, problem: str) -> None:
        super().__init__(
            f"The ledger refused this command: {problem}; nothing was written.",
            hint="Connect as a role (or OS user) allowed to write the ledger's tables; with "
            "read access only, the read commands still work (list, show, verify, export).",
        )


class LedgerValueRejected(LedgerError, ValueError):
    """A value is longer than (or otherwise not valid for) the ledger column it goes into."""

    code = "ledger_value_rejected"

    def __init__(self, problem: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(
            f"The ledger cannot store this value: {problem}; nothing was written.",
            hint=hint or "Shorten the value (ids and labels hold at most 200 characters).",
            **details,
        )


class LeaseHeld(LedgerError):
    """Another live holder has the lease on this resource (until its deadline)."""

    code = "lease_held"

    def __init__(self, resource: str, *, holder: str, until: datetime) -> None:
        self.resource = resource
        self.holder = holder
        self.until = until
        super().__init__(
            f"{resource} is held by {holder} until {until.isoformat()}.",
            hint="Wait for it to finish; if the holder died, its lease is taken over after "
            "that deadline.",
            resource=resource,
            holder=holder,
            until=until.isoformat(),
        )


class NotAwaitingReconciliation(LedgerError):
    """Only a call flagged ``needs_reconciliation`` can have a human's finding recorded."""

    code = "not_awaiting_reconciliation"

    def __init__(self, proposal_id: str, *, status: str) -> None:
        self.proposal_id = proposal_id
        self.status = status
        still = (
            " Its executor is still running it; recovery flags it once that process is gone."
            if status == "executing"
            else ""
        )
        super().__init__(
            f"Proposal {proposal_id} is {status}, not needs_reconciliation; there is nothing "
            f"to reconcile.{still}",
            hint="`supervisor proposals list --status needs_reconciliation` lists the calls that "
            "await a human's finding.",
            proposal_id=proposal_id,
            status=status,
        )


class InvalidReconcileOutcome(LedgerError, ValueError):
    """A reconciliation finding is ``executed`` or ``failed``, nothing else."""

    code = "invalid_reconcile_outcome"

    def __init__(self, outcome: object) -> None:
        super().__init__(
            f"{outcome!r} is not a reconciliation finding; nothing was recorded.",
            hint="Record 'executed' (the call took effect) or 'failed' (it did not).",
            outcome=str(outcome),
        )
