"""The approval policy lives in the ledger: every process enforces it, on SQLite and PostgreSQL.

The rules match the OS identity of the deciding process (the uid's user, or ``user@host``),
never the free-text approver label, and never ``LOGNAME``/``USER``. The CLI runs as a real
subprocess; another OS identity is a real process running as ``nobody`` (see
``support/as_user.py``) against PostgreSQL, whose ledger has no file permissions to share.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import SUPERVISOR
from support.required import unavailable

from supervisor.ledger import ApproverContext, ProposalStatus
from supervisor.ledger.errors import (
    ApproverNotAllowed,
    PolicyInvalid,
    PolicyMismatch,
    SelfApprovalForbidden,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.services.identity import ApproverIdentity
from supervisor.store.provider import SQLModelProvider

AS_USER = Path(__file__).resolve().parents[1] / "support" / "as_user.py"
ME = pwd.getpwuid(os.getuid()).pw_name
HOST = socket.gethostname()
OTHER = "nobody"
FORGED_ENV = {"LOGNAME": "alice", "USER": "alice", "USERNAME": "alice"}
STRICT = ApprovalPolicy(forbid_self_approval=True, approvers_by_domain={"finance": ["cfo"]})
STRICT_TOML = """
[approval]
forbid_self_approval = true
[approval.approvers_by_domain]
finance = ["cfo", "cfo@example.com"]
"""


def _cli(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert SUPERVISOR is not None, "the console script is not installed"
    return subprocess.run(
        [SUPERVISOR, *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def _cli_as(user: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process whose real and effective uid are ``user``'s."""
    if os.geteuid() != 0:
        unavailable(
            "needs root to run a process as another OS user",
            in_ci="CI runs as root so it can test another OS identity",
        )
    return subprocess.run(
        [sys.executable, str(AS_USER), user, *args], capture_output=True, text=True, timeout=120
    )


def _propose(url: str, *, user: str | None, domains: tuple[str, ...] = ("crm",)) -> str:
    with SQLModelProvider(url) as provider:
        proposal = provider.ledger.propose(
            "transfer", "schema-v1", {"amount": 100, "to": "acct-9"}, owner="pay-agent",
            user=user, domains=domains,
        )  # fmt: skip
    return proposal.proposal_id


def _status(url: str, proposal_id: str) -> ProposalStatus:
    with SQLModelProvider(url) as provider:
        return provider.ledger.get(proposal_id).status


def _one_error_line(result: subprocess.CompletedProcess[str], code: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"error [{code}]: "), result.stderr
    assert "Traceback" not in result.stderr


# identity ----------------------------------------------------------------------------------


def test_the_os_user_comes_from_the_uid_not_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in FORGED_ENV.items():
        monkeypatch.setenv(name, value)
    assert ApproverContext.current("cli").os_user == ME
    assert EnvironmentIdentity.current().names() == {ME, f"{ME}@{HOST}"}
    assert ApproverIdentity.current("cli").approver_id == f"{ME}@{HOST}"
    assert ApproverIdentity.current("cli", approver_id="bob").context.os_user == ME


# the CLI -----------------------------------------------------------------------------------


def test_cli_cannot_self_approve_under_any_label(ledger_url: str) -> None:
    with SQLModelProvider(ledger_url, policy=STRICT) as provider:
        provider.ledger.head()
    mine = _propose(ledger_url, user=ME)
    for label in ("alice", "cfo@example.com", f"someone-else@{HOST}"):
        result = _cli("proposals", "approve", mine, "--approver", label, "--db", ledger_url,
                      env=FORGED_ENV)  # fmt: skip
        _one_error_line(result, "self_approval_forbidden")
        assert f"{ME}@{HOST}" in result.stderr
    _one_error_line(_cli("proposals", "approve", mine, "--db", ledger_url, env=FORGED_ENV),
                    "self_approval_forbidden")  # fmt: skip
    assert _status(ledger_url, mine) is ProposalStatus.PENDING
    rejected = _cli("proposals", "reject", mine, "--reason", "mine", "--db", ledger_url)
    assert rejected.returncode == 0, rejected.stderr  # taking authority away stays open
    theirs = _propose(ledger_url, user="bob")
    approved = _cli("proposals", "approve", theirs, "--approver", "bob", "--db", ledger_url)
    assert approved.returncode == 0, approved.stderr


def test_a_label_naming_the_cfo_does_not_pass_a_cfo_only_domain(ledger_url: str) -> None:
    cfo_only = ApprovalPolicy(approvers_by_domain={"finance": ["cfo", "cfo@example.com"]})
    with SQLModelProvider(ledger_url, policy=cfo_only) as provider:
        provider.ledger.head()
    paying = _propose(ledger_url, user="bob", domains=("crm", "finance"))
    for label in ("cfo@example.com", "cfo"):
        result = _cli("proposals", "approve", paying, "--approver", label, "--db", ledger_url,
                      env={"LOGNAME": "cfo", "USER": "cfo"})  # fmt: skip
        _one_error_line(result, "approver_not_allowed")
        assert "finance" in result.stderr
    assert _status(ledger_url, paying) is ProposalStatus.PENDING
    with SQLModelProvider(ledger_url) as provider, pytest.raises(ApproverNotAllowed):
        provider.ledger.approve(paying, "cfo@example.com")
    open_domain = _propose(ledger_url, user="bob", domains=("crm",))
    assert _cli("proposals", "approve", open_domain, "--db", ledger_url).returncode == 0


@pytest.mark.postgres
def test_another_os_user_is_matched_by_its_uid(postgres_url: str) -> None:
    policy = ApprovalPolicy(forbid_self_approval=True, approvers_by_domain={"finance": [OTHER]})
    with SQLModelProvider(postgres_url, policy=policy) as provider:
        provider.ledger.head()
    paying = _propose(postgres_url, user="bob", domains=("finance",))
    _one_error_line(
        _cli("proposals", "approve", paying, "--approver", OTHER, "--db", postgres_url),
        "approver_not_allowed",
    )
    as_other = _cli_as(OTHER, "proposals", "approve", paying, "--approver", "root",
                       "--json", "--db", postgres_url)  # fmt: skip
    assert as_other.returncode == 0, as_other.stderr
    decided = json.loads(as_other.stdout)
    assert decided["status"] == "approved" and decided["approver_id"] == "root"
    assert decided["approver_context"]["os_user"] == OTHER
    with SQLModelProvider(postgres_url) as provider:
        record = provider.ledger.events_since(0)[-1]
    assert record.action == "approve" and record.payload["identity"] == f"{OTHER}@{HOST}"
    assert record.payload["policy_version"] == 1

    theirs = _propose(postgres_url, user=OTHER)
    _one_error_line(
        _cli_as(OTHER, "proposals", "approve", theirs, "--approver", "root", "--db", postgres_url),
        "self_approval_forbidden",
    )
    assert _status(postgres_url, theirs) is ProposalStatus.PENDING
    assert _cli("proposals", "approve", theirs, "--db", postgres_url).returncode == 0


# providers and versions ----------------------------------------------------------------------


def test_a_provider_with_another_policy_fails_and_the_stored_one_stays(ledger_url: str) -> None:
    with SQLModelProvider(ledger_url, policy=STRICT) as provider:
        provider.ledger.head()
    looser = (
        ApprovalPolicy(),
        ApprovalPolicy(forbid_self_approval=True),
        ApprovalPolicy(forbid_self_approval=True, approvers_by_domain={"finance": ["cfo", ME]}),
    )
    for given in looser:
        with SQLModelProvider(ledger_url, policy=given) as provider:
            with pytest.raises(PolicyMismatch) as caught:
                provider.ledger  # noqa: B018
        assert caught.value.code == "policy_mismatch"
        assert "supervisor policy apply" in str(caught.value.hint)
    with SQLModelProvider(ledger_url) as provider:
        first = provider.ledger.current_policy()
    assert first is not None and first.version == 1 and first.applied_by == f"{ME}@{HOST}"
    same = ApprovalPolicy(forbid_self_approval=True, approvers_by_domain={"finance": {"cfo"}})
    with SQLModelProvider(ledger_url, policy=same) as provider:
        assert provider.ledger.current_policy() == first
    with SQLModelProvider(ledger_url) as provider:  # no policy: the stored one
        ledger = provider.ledger
        assert ledger.policy == STRICT
        assert [version.version for version in ledger.policy_history()] == [1]
        mine = ledger.propose("transfer", "h", {"amount": 1}, user=ME)
        with pytest.raises(SelfApprovalForbidden):
            ledger.approve(mine.proposal_id, "not-me", context=ApproverContext(
                os_user="not-me", host="elsewhere", pid=1, via="sdk"))  # fmt: skip
        assert ledger.verify().ok


def test_policy_changes_are_versioned_and_audited(ledger_url: str) -> None:
    with SQLModelProvider(ledger_url) as provider:
        ledger = provider.ledger
        assert ledger.current_policy() is None and ledger.policy == ApprovalPolicy()
        assert ledger.apply_policy(ApprovalPolicy()).changed is False
        one = ledger.apply_policy(ApprovalPolicy(forbid_self_approval=True), reason="sox")
        two = ledger.apply_policy(STRICT, reason="cfo for finance")
        again = ledger.apply_policy(STRICT)
        assert one.changed and two.changed and not again.changed
        assert again.version == two.version
        history = ledger.policy_history()
        records = [r for r in ledger.events_since(0) if r.action == "policy_apply"]
        assert ledger.verify().ok
    assert [(v.version, v.reason) for v in history] == [(1, "sox"), (2, "cfo for finance")]
    assert [r.seq for r in records] == [v.audit_seq for v in history]
    assert all(r.actor == f"{ME}@{HOST}" and r.subject == "policy" for r in records)
    assert records[1].payload["previous_version"] == 1
    assert records[1].payload["document_hash"] == STRICT.document_hash == history[1].document_hash
    assert records[1].payload["document"] == STRICT.to_document()

    listed = _cli("policy", "history", "--json", "--db", ledger_url)
    assert listed.returncode == 0, listed.stderr
    assert [v["version"] for v in json.loads(listed.stdout)["versions"]] == [1, 2]
    shown = _cli("policy", "show", "--db", ledger_url)
    assert shown.returncode == 0, shown.stderr
    assert "v2" in shown.stdout and 'finance" = ["cfo"]' in shown.stdout


def test_a_policy_applied_from_the_cli_binds_another_processs_sdk(
    ledger_url: str, tmp_path: Path
) -> None:
    with SQLModelProvider(ledger_url) as provider:
        ledger = provider.ledger  # opened before the policy exists
        mine = ledger.propose("transfer", "h", {"amount": 1}, user=ME)
        paying = ledger.propose("transfer", "h", {"amount": 2}, user="bob", domains=["finance"])
        policy_file = tmp_path / "policy.toml"
        policy_file.write_text(STRICT_TOML)
        applied = _cli("policy", "apply", str(policy_file), "--reason", "r", "--db", ledger_url)
        assert applied.returncode == 0, applied.stderr
        assert "Applied approval policy v1" in applied.stdout
        with pytest.raises(SelfApprovalForbidden):
            ledger.approve(mine.proposal_id, "bob")
        with pytest.raises(ApproverNotAllowed):
            ledger.approve(paying.proposal_id, "cfo")
        with pytest.raises(ApproverNotAllowed):
            ledger.extend(paying.proposal_id, 60, "cfo")
        with pytest.raises(ApproverNotAllowed):
            ledger.edit(paying.proposal_id, {"amount": 1}, "cfo")
        assert ledger.get(paying.proposal_id).status is ProposalStatus.PENDING
        unchanged = _cli("policy", "apply", str(policy_file), "--db", ledger_url)
        assert "Unchanged" in unchanged.stdout
        assert [version.version for version in ledger.policy_history()] == [1]


# refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[approval]\nforbid_self_aproval = true\n", "forbid_self_aproval"),
        ("[approval]\nforbid_self_approval = 1\n", "true or false"),
        ('[approval.approvers_by_domain]\nfinance = "cfo"\n', "list of identities"),
        ('[approval.approvers_by_domain]\nfinance = ["cfo@h#ab12"]\n', "no '#instance'"),
        ('[approval.approvers_by_domain]\nfinance = ["c\u202efo"]\n', "invisible"),
        ("format = 3\n[approval]\n", "newer"),
        ("[rules]\n", "array of tables"),
        ("[approval\n", "not valid TOML"),
        ('[approval.approvers_by_domain]\nFinance = ["cfo"]\n', "'Finance' can never match"),
        ('[approval.approvers_by_domain]\n"finance*" = ["cfo"]\n', "'finance*' can never"),
        ('[approval.approvers_by_domain]\n"crm:" = []\n', "'crm:' can never match"),
    ],
)
def test_a_bad_policy_file_is_one_line_and_writes_nothing(
    sqlite_url: str, tmp_path: Path, text: str, problem: str
) -> None:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(text)
    result = _cli("policy", "apply", str(policy_file), "--db", sqlite_url)
    _one_error_line(result, "policy_invalid")
    assert problem in result.stderr
    with SQLModelProvider(sqlite_url) as provider:
        assert provider.ledger.policy_history() == []
        assert provider.ledger.head() == 0


def test_sdk_policies_are_checked_when_built() -> None:
    with pytest.raises(PolicyInvalid, match="list of identities"):
        ApprovalPolicy(approvers_by_domain={"finance": "cfo"})
    with pytest.raises(PolicyInvalid, match="true or false"):
        ApprovalPolicy(forbid_self_approval="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("domain", ["Finance", "finance*", "crm:", "fin ance", "-x", "a" * 65])
def test_a_policy_domain_no_tool_domain_can_equal_is_refused(domain: str) -> None:
    # Keys are compared exactly with tool domains (lowercase letters, digits, '.', '_', '-'):
    # a key none can equal would leave the domain it was meant for open to every approver.
    with pytest.raises(PolicyInvalid) as caught:
        ApprovalPolicy(approvers_by_domain={domain: ["cfo"]})
    assert caught.value.code == "policy_invalid"
    assert repr(domain) in str(caught.value)
    assert ApprovalPolicy(approvers_by_domain={"finance.eu_2-x": ["cfo"]})


def test_a_stored_policy_edited_in_the_database_grants_nothing(ledger_url: str) -> None:
    with SQLModelProvider(ledger_url, policy=STRICT) as provider:
        ledger = provider.ledger
        theirs = ledger.propose("transfer", "h", {"amount": 1}, user="bob")
        loosened = ApprovalPolicy().document_json()
        with provider.engine.begin() as connection:
            connection.execute(sa.text("UPDATE policy_version SET document_json = :doc"),
                               {"doc": loosened})  # fmt: skip
        with pytest.raises(PolicyInvalid) as caught:
            ledger.approve(theirs.proposal_id, "op")
        assert "does not match its hash" in str(caught.value)
        assert ledger.get(theirs.proposal_id).status is ProposalStatus.PENDING
        assert ledger.reject(theirs.proposal_id, "op", "no").status is ProposalStatus.REJECTED


def test_a_uid_chosen_in_a_user_namespace_is_not_trusted(ledger_url: str, tmp_path: Path) -> None:
    # Any user can make the kernel report any uid inside a user namespace it creates.
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "--user", "true"], capture_output=True)
    if unshare is None or probe.returncode != 0:
        unavailable(
            "no user namespaces here", in_ci="CI needs util-linux unshare and user namespaces"
        )
    other = pwd.getpwnam(OTHER)
    mapped = [unshare, "--user", f"--map-user={other.pw_uid}", f"--map-group={other.pw_gid}"]
    policy = ApprovalPolicy(forbid_self_approval=True, approvers_by_domain={"finance": [OTHER]})
    with SQLModelProvider(ledger_url, policy=policy) as provider:
        provider.ledger.head()
    paying = _propose(ledger_url, user="bob", domains=("finance",))
    mine = _propose(ledger_url, user=ME)
    for proposal_id in (paying, mine):
        forged = subprocess.run(
            [*mapped, str(SUPERVISOR), "proposals", "approve", proposal_id, "--db", ledger_url],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        _one_error_line(forged, "identity_not_verified")
        assert _status(ledger_url, proposal_id) is ProposalStatus.PENDING
    policy_file = tmp_path / "open.toml"
    policy_file.write_text("[approval]\n")
    forged_apply = subprocess.run(
        [*mapped, str(SUPERVISOR), "policy", "apply", str(policy_file), "--db", ledger_url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    _one_error_line(forged_apply, "identity_not_verified")
    open_domain = _propose(ledger_url, user=None)  # no rule applies: anyone may approve
    unruled = subprocess.run(
        [*mapped, str(SUPERVISOR), "proposals", "approve", open_domain, "--db", ledger_url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert unruled.returncode == 0, unruled.stderr
    with SQLModelProvider(ledger_url) as provider:
        assert [version.version for version in provider.ledger.policy_history()] == [1]
        record = provider.ledger.events_since(0)[-1]
    assert record.action == "approve" and "unverified" in record.payload["identity"]
