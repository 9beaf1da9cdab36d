"""The gateway's ``input_required`` pieces: state, who can be asked, what an answer means."""

from __future__ import annotations

import mcp_types as types

from supervisor.mcp.gateway_input import WAIT_INPUT_KEY, WaitState, answer_of, can_ask


def test_wait_state_round_trips_and_refuses_anything_else() -> None:
    state = WaitState("p-1", "ab" * 32)
    assert WaitState.load(state.dump()) == state
    for plaintext in ("", "not json", "[]", '{"v": 2, "proposal_id": "p", "args_hash": "h"}',
                      '{"v": 1, "proposal_id": 3, "args_hash": "h"}'):  # fmt: skip
        assert WaitState.load(plaintext) is None


def test_only_a_2026_07_28_client_that_answers_forms_is_asked() -> None:
    form = types.ClientCapabilities(
        elicitation=types.ElicitationCapability(form=types.FormElicitationCapability())
    )
    bare = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    url_only = types.ClientCapabilities(
        elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability())
    )
    assert can_ask("2026-07-28", form) and can_ask("2026-07-28", bare)
    assert not can_ask("2026-07-28", url_only)
    assert not can_ask("2026-07-28", types.ClientCapabilities())
    assert not can_ask("2026-07-28", None)
    assert not can_ask("2025-11-25", form)


def test_only_decline_or_cancel_stops_waiting_and_nothing_approves() -> None:
    def answer(action: str | None) -> str:
        if action is None:
            return answer_of(None)
        result = types.ElicitResult.model_validate({"action": action, "content": {"ok": True}})
        return answer_of({WAIT_INPUT_KEY: result})

    assert answer("decline") == answer("cancel") == "stop_waiting"
    assert answer("accept") == answer(None) == "check_again"
