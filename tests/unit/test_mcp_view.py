"""The read-only MCP view's redaction: keys and sizes by default, values only after redaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.mcp.server import proposal_view

NOW = datetime(2030, 1, 1, tzinfo=UTC)
SEED = "legal winner thank year wave sausage worth useful legal winner thank yellow"


def _proposal(arguments: dict[str, object]) -> Proposal:
    return Proposal(
        proposal_id="p1", tool_name="t", tool_schema_hash="0" * 64, arguments=arguments,
        args_hash="1" * 64, status=ProposalStatus.PENDING, created_at=NOW, updated_at=NOW,
        expires_at=NOW + timedelta(hours=1),
    )  # fmt: skip


SHAPES = [
    ("private key", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq\n-----END PRIVATE KEY-----",
     "MIIEvQIBADANBgkq"),
    ("x-api-key header", "curl -H 'X-Api-Key: 7f3a9c1e55d2'", "7f3a9c1e55d2"),
    ("cookie header", "Cookie: sid=Qm9vLz81; lang=en", "Qm9vLz81"),
    ("authorization header", "Authorization: Basic YWxpY2U6czNjcmV0", "YWxpY2U6czNjcmV0"),
    ("pin", "card PIN: 4821", "4821"),
    ("otp", "your one-time code 739102", "739102"),
    ("iban", "wire to GB82 WEST 1234 5698 7654 32", "5698 7654"),
    ("seed phrase", f"backup words {SEED}", "sausage worth useful"),
    ("the password is", "fyi the password is Tr0ub4dor&3", "Tr0ub4dor&3"),
]  # fmt: skip


@pytest.mark.parametrize(("shape", "text", "secret"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_secret_shape_is_redacted_when_values_are_shown(
    shape: str, text: str, secret: str
) -> None:
    view = proposal_view(_proposal({"note": text, "nested": [{"memo": text}]}), show_values=True)
    assert view["arguments_mode"] == "redacted_values"
    assert secret not in str(view["arguments"]), shape
    assert "[REDACTED]" in view["arguments"]["note"]


@pytest.mark.parametrize("key", ["pin", "otp_code", "iban", "seed_phrase", "x-api-key", "cookie"])
def test_values_under_secret_keys_are_redacted(key: str) -> None:
    view = proposal_view(_proposal({key: "1234-not-a-shape"}), show_values=True)
    assert view["arguments"] == {key: "[REDACTED]"}


def test_by_default_no_value_is_shown_at_all() -> None:
    arguments = {"note": "codeword: mauve-falcon", "amount": 12.5, "count": 3, "ok": True,
                 "tags": ["a", "b"], "none": None, "to": {"iban_like": "XX00 1234"}}  # fmt: skip
    view = proposal_view(_proposal(arguments))
    assert view["arguments_mode"] == "keys_and_sizes"
    assert view["arguments"] == {
        "note": "<string: 22 chars>", "amount": "<number>", "count": "<integer>",
        "ok": "<boolean>", "tags": "<array: 2 items>", "none": "<null>",
        "to": {"iban_like": "<string: 9 chars>"},
    }  # fmt: skip


def test_the_view_says_when_the_waiting_process_is_gone() -> None:
    from supervisor.ledger.models import ProcessRecord, ProposalWaiter

    proposal = _proposal({"to": "a@b.c"})
    assert proposal_view(proposal)["orphaned"] is False
    assert proposal_view(proposal)["waiter"] is None  # nobody recorded as waiting
    process = ProcessRecord(
        process_id="run-1", kind="agent_run", pid=42, host="build-host", status="lost",
        started_at=NOW, heartbeat_at=NOW, lost_at=NOW + timedelta(seconds=60),
    )  # fmt: skip
    gone = ProposalWaiter(proposal_id="p1", process_id="run-1", since=NOW, process=process,
                          alive=False)  # fmt: skip
    view = proposal_view(proposal, waiter=gone)
    assert view["orphaned"] is True
    assert view["waiter"] == {"process_id": "run-1", "alive": False, "process_status": "lost",
                              "gone_since": (NOW + timedelta(seconds=60)).isoformat()}  # fmt: skip
    alive = gone.model_copy(update={"alive": True, "process": None})
    assert proposal_view(proposal, waiter=alive)["orphaned"] is False
    decided = proposal.model_copy(update={"status": ProposalStatus.REJECTED})
    assert proposal_view(decided, waiter=gone)["orphaned"] is False  # nothing left to wait on
