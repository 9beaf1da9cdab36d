"""The scripted model is a real OpenAI-compatible server: the official client drives it here.

Every test talks HTTP over loopback with ``openai.OpenAI`` (or raw ``urllib`` for what the client
cannot send) and stops its server through the ``serve`` fixture or a ``with`` block.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

import supervisor.testing.scripted_model as scripted_model_module
from supervisor.testing.scripted_model import (
    CallTools,
    Delay,
    Fail,
    RecordedRequest,
    Reply,
    ScriptedModel,
    ScriptedModelNotRunning,
    ScriptError,
    ToolCall,
    Turn,
    main,
    parse_script,
)

Serve = Callable[..., ScriptedModel]

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]
WEATHER_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TIME_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Start scripted models for a test and always stop them afterwards."""
    started: list[ScriptedModel] = []

    def start(turns: Any, **options: Any) -> ScriptedModel:
        model = ScriptedModel(turns, **options).start()
        started.append(model)
        return model

    yield start
    for model in started:
        model.stop()


def client_for(
    model: ScriptedModel, *, api_key: str = "sk-test", retries: int = 0
) -> openai.OpenAI:
    """An official client pointed at the model, with a short timeout so nothing can hang."""
    return openai.OpenAI(
        base_url=model.base_url, api_key=api_key, max_retries=retries, timeout=10.0
    )


def raw_request(
    url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """Send a request the official client would refuse to build; returns (status, JSON body)."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_plain_reply_is_a_complete_chat_completion(serve: Serve) -> None:
    model = serve([Reply("Hello from the script.")], model_name="demo-model")
    with client_for(model) as client:
        completion = client.chat.completions.create(model="anything", messages=HELLO)

    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hello from the script."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert completion.model == "demo-model"
    assert completion.object == "chat.completion"
    assert completion.id == "chatcmpl-scripted-1"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 6  # 22 characters / 4, rounded up
    assert completion.usage.prompt_tokens > 0
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert model.turns_left == 0


def test_single_tool_call_carries_json_arguments(serve: Serve) -> None:
    model = serve([ScriptedModel.call_tool("get_weather", {"city": "Paris"})])
    with client_for(model) as client:
        completion = client.chat.completions.create(model="m", messages=HELLO, tools=[WEATHER_TOOL])

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.type == "function"
    assert call.id == "call_1"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_parallel_tool_calls_keep_order_ids_and_verbatim_arguments(serve: Serve) -> None:
    model = serve(
        [
            CallTools(
                [
                    ToolCall("get_weather", {"city": "Oslo"}),
                    ToolCall("get_time", {}, id="call_fixed"),
                    ToolCall("get_weather", '{"city": "Lima"'),  # malformed on purpose
                ]
            ),
            CallTools([ToolCall("get_time")]),
        ]
    )
    with client_for(model) as client:
        first = client.chat.completions.create(model="m", messages=HELLO)
        second = client.chat.completions.create(model="m", messages=HELLO)

    calls = first.choices[0].message.tool_calls
    assert calls is not None
    assert [(c.id, c.function.name) for c in calls if c.type == "function"] == [
        ("call_1", "get_weather"),
        ("call_fixed", "get_time"),
        ("call_2", "get_weather"),
    ]
    assert [c.function.arguments for c in calls if c.type == "function"] == [
        '{"city":"Oslo"}',
        "{}",
        '{"city": "Lima"',
    ]
    later_calls = second.choices[0].message.tool_calls
    assert later_calls is not None
    assert [c.id for c in later_calls] == ["call_3"]  # ids stay unique across the run


def test_streamed_text_arrives_in_fragments_and_reassembles(serve: Serve) -> None:
    text = "Streaming works: several fragments, one answer."
    model = serve([Reply(text)])
    with client_for(model) as client:
        stream = client.chat.completions.create(
            model="m", messages=HELLO, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)

    content_pieces = [
        chunk.choices[0].delta.content
        for chunk in chunks
        if chunk.choices and chunk.choices[0].delta.content
    ]
    assert len(content_pieces) > 2
    assert "".join(content_pieces) == text
    assert chunks[0].choices[0].delta.role == "assistant"
    finish_reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finish_reasons[-1] == "stop"
    assert all(reason is None for reason in finish_reasons[:-1])
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == (len(text) + 3) // 4
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_streamed_tool_calls_reassemble_from_raw_chunks(serve: Serve) -> None:
    arguments = {"city": "Buenos Aires", "units": "metric"}
    model = serve([CallTools([ToolCall("get_weather", arguments), ToolCall("get_time", {})])])
    with client_for(model) as client:
        chunks = list(
            client.chat.completions.create(
                model="m", messages=HELLO, tools=[WEATHER_TOOL, TIME_TOOL], stream=True
            )
        )

    assembled: dict[int, dict[str, str]] = {}
    argument_fragments = 0
    for chunk in chunks:
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = assembled.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                call["id"] = delta.id
            if delta.function and delta.function.name:
                call["name"] = delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
                argument_fragments += 1
    assert assembled[0]["id"] == "call_1"
    assert assembled[0]["name"] == "get_weather"
    assert json.loads(assembled[0]["arguments"]) == arguments
    assert assembled[1] == {"id": "call_2", "name": "get_time", "arguments": "{}"}
    assert argument_fragments > 3  # arguments really are split across chunks
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].usage is None  # usage chunk only on request


def test_stream_helper_builds_the_final_completion(serve: Serve) -> None:
    model = serve([CallTools([ToolCall("get_weather", {"city": "Kyoto"})]), Reply("It is sunny.")])
    with client_for(model) as client:
        with client.chat.completions.stream(
            model="m", messages=HELLO, tools=[WEATHER_TOOL]
        ) as stream:
            event_types = [event.type for event in stream]
            tool_completion = stream.get_final_completion()
        with client.chat.completions.stream(model="m", messages=HELLO) as stream:
            text_deltas = [event.delta for event in stream if event.type == "content.delta"]
            text_completion = stream.get_final_completion()

    assert "tool_calls.function.arguments.done" in event_types
    tool_calls = tool_completion.choices[0].message.tool_calls
    assert tool_calls is not None
    assert tool_calls[0].function.name == "get_weather"
    assert json.loads(tool_calls[0].function.arguments) == {"city": "Kyoto"}
    assert tool_completion.choices[0].finish_reason == "tool_calls"
    assert len(text_deltas) >= 2
    assert text_completion.choices[0].message.content == "It is sunny."


async def test_async_client_streams_and_completes(serve: Serve) -> None:
    model = serve([Reply("async text"), ScriptedModel.call_tool("get_time")])
    async with openai.AsyncOpenAI(
        base_url=model.base_url, api_key="sk-test", max_retries=0, timeout=10.0
    ) as client:
        stream = await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        pieces = [chunk.choices[0].delta.content or "" async for chunk in stream]
        completion = await client.chat.completions.create(model="m", messages=HELLO)

    assert "".join(pieces) == "async text"
    assert completion.choices[0].finish_reason == "tool_calls"


def test_requests_are_recorded_with_tools_and_a_redacted_key(serve: Serve) -> None:
    model = serve([Reply("ok")])
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
    ]
    with client_for(model, api_key="sk-very-secret") as client:
        client.chat.completions.create(
            model="gpt-test", messages=messages, tools=[WEATHER_TOOL, TIME_TOOL]
        )

    [request] = model.requests
    assert request.number == 1
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.model == "gpt-test"
    assert request.stream is False
    assert request.messages == messages
    assert request.tools == [WEATHER_TOOL, TIME_TOOL]
    assert request.tool_names == ["get_weather", "get_time"]
    assert request.headers["authorization"] == "Bearer ***"
    assert "sk-very-secret" not in json.dumps(dict(request.headers))
    assert request.headers["content-type"] == "application/json"


def test_exhausted_script_fails_fast_with_a_clear_message(serve: Serve) -> None:
    model = serve([Reply("only one")])
    with client_for(model, retries=2) as client:
        client.chat.completions.create(model="m", messages=HELLO)
        started = time.monotonic()
        with pytest.raises(openai.InternalServerError, match="no turn left for request 2"):
            client.chat.completions.create(model="m", messages=HELLO)
        elapsed = time.monotonic() - started

    assert elapsed < 1.0  # a retry would back off for at least 1.1 s in total
    assert len(model.requests) == 2  # the refused request is recorded too
    assert model.turns_left == 0


def test_transient_503_is_retried_by_the_client(serve: Serve) -> None:
    model = serve([Fail(503, times=1), Reply("recovered")])
    with client_for(model, retries=2) as client:
        completion = client.chat.completions.create(model="m", messages=HELLO)

    assert completion.choices[0].message.content == "recovered"
    assert len(model.requests) == 2
    assert [r.headers["x-stainless-retry-count"] for r in model.requests] == ["0", "1"]


def test_fail_times_and_retry_after_bound_the_retries(serve: Serve) -> None:
    model = serve([Fail(429, "slow down", times=2, retry_after=0.01), Reply("late")])
    with client_for(model, retries=1) as client:
        with pytest.raises(openai.RateLimitError) as raised:
            client.chat.completions.create(model="m", messages=HELLO)
        assert raised.value.status_code == 429
        assert raised.value.body == {
            "message": "slow down",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
        # Both failures are spent, so the next call gets the reply.
        completion = client.chat.completions.create(model="m", messages=HELLO)
    assert completion.choices[0].message.content == "late"
    assert len(model.requests) == 3


def test_callable_script_sees_each_request(serve: Serve) -> None:
    def script(request: RecordedRequest) -> Turn:
        last = request.messages[-1]
        if last["role"] == "tool":
            return Reply(f"The tool said {last['content']}.")
        if "get_weather" in request.tool_names:
            return ScriptedModel.call_tool("get_weather", {"city": last["content"]})
        return Reply(f"echo: {last['content']}")

    model = serve(script)
    with client_for(model) as client:
        first = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Rome"}], tools=[WEATHER_TOOL]
        )
        tool_calls = first.choices[0].message.tool_calls
        assert tool_calls is not None
        call_id = tool_calls[0].id
        follow_up: list[ChatCompletionMessageParam] = [
            {"role": "user", "content": "Rome"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "21C"},
        ]
        second = client.chat.completions.create(model="m", messages=follow_up)
        third = client.chat.completions.create(model="m", messages=HELLO)

    assert tool_calls[0].type == "function"
    assert json.loads(tool_calls[0].function.arguments) == {"city": "Rome"}
    assert second.choices[0].message.content == "The tool said 21C."
    assert third.choices[0].message.content == "echo: hello"
    assert model.turns_left is None


def test_callable_that_raises_answers_500_naming_the_error(serve: Serve) -> None:
    def script(request: RecordedRequest) -> Turn:
        raise LookupError("no answer for this prompt")

    model = serve(script)
    with client_for(model, retries=2) as client:
        with pytest.raises(openai.InternalServerError, match="LookupError: no answer"):
            client.chat.completions.create(model="m", messages=HELLO)
    assert len(model.requests) == 1


def test_api_key_is_enforced_when_configured(serve: Serve) -> None:
    model = serve([Reply("authorised")], api_key="sk-right")
    with client_for(model, api_key="sk-wrong", retries=2) as client:
        with pytest.raises(openai.AuthenticationError, match="Incorrect API key"):
            client.chat.completions.create(model="m", messages=HELLO)
    status, body = raw_request(
        f"{model.base_url}/chat/completions",
        data=json.dumps({"model": "m", "messages": []}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert status == 401
    assert body["error"]["code"] == "invalid_api_key"
    assert model.requests == []  # refused requests do not consume turns

    with client_for(model, api_key="sk-right") as client:
        completion = client.chat.completions.create(model="m", messages=HELLO)
    assert completion.choices[0].message.content == "authorised"
    assert model.env() == {"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "sk-right"}


def test_models_endpoint_unknown_paths_and_malformed_json(serve: Serve) -> None:
    model = serve([Reply("unused")], model_name="scripted-demo")
    with client_for(model) as client:
        assert [m.id for m in client.models.list()] == ["scripted-demo"]

    status, body = raw_request(f"{model.base_url}/embeddings", data=b"{}")
    assert status == 404
    assert "Unknown path" in body["error"]["message"]
    status, body = raw_request(f"{model.base_url}/chat/completions", data=b"{not json")
    assert status == 400
    assert set(body["error"]) == {"message", "type", "param", "code"}
    status, body = raw_request(f"{model.base_url}/chat/completions", data=b'{"model": "m"}')
    assert status == 400
    assert "messages" in body["error"]["message"]
    assert model.requests == []
    assert model.turns_left == 1


def test_concurrent_clients_each_get_one_turn(serve: Serve) -> None:
    model = serve([Reply(f"answer {n}") for n in range(8)])
    answers: list[str | None] = []
    answers_lock = threading.Lock()

    def ask() -> None:
        with client_for(model) as client:
            completion = client.chat.completions.create(model="m", messages=HELLO)
        with answers_lock:
            answers.append(completion.choices[0].message.content)

    workers = [threading.Thread(target=ask) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=10)

    assert sorted(a or "" for a in answers) == [f"answer {n}" for n in range(8)]
    assert [r.number for r in model.requests] == list(range(1, 9))


def test_stop_cuts_a_pending_delay_and_frees_the_port() -> None:
    errors: list[BaseException] = []
    with ScriptedModel([Delay(30, Reply("too late"))]) as model:
        base_url = model.base_url

        def ask() -> None:
            try:
                with client_for(model) as client:
                    client.chat.completions.create(model="m", messages=HELLO)
            except openai.APIError as error:
                errors.append(error)

        asker = threading.Thread(target=ask)
        asker.start()
        deadline = time.monotonic() + 5
        while not model.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
    assert time.monotonic() - started < 2
    asker.join(timeout=5)
    assert not asker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], openai.APIConnectionError)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{base_url}/models", timeout=2)


def test_lifecycle_errors_are_typed() -> None:
    model = ScriptedModel([])
    with pytest.raises(ScriptedModelNotRunning):
        _ = model.base_url
    model.stop()  # harmless before start
    with model:
        with pytest.raises(ScriptedModelNotRunning):
            model.start()
    with pytest.raises(ScriptedModelNotRunning):
        model.start()


def test_json_script_parses_every_turn_kind() -> None:
    turns = parse_script(
        json.dumps(
            [
                {"reply": "hi"},
                {"tool_calls": [{"name": "f", "arguments": {"a": 1}, "id": "call_x"}]},
                {"tool_calls": [{"name": "g", "arguments": "{broken"}], "content": "calling"},
                {"fail": 503, "message": "busy", "times": 2, "retry_after": 0.5},
                {"delay": 0.25, "then": {"reply": "late"}},
            ]
        )
    )
    assert turns == [
        Reply("hi"),
        CallTools([ToolCall("f", {"a": 1}, "call_x")]),
        CallTools([ToolCall("g", "{broken")], content="calling"),
        Fail(503, "busy", times=2, retry_after=0.5),
        Delay(0.25, Reply("late")),
    ]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('{"reply": "hi"}', "valid array"),
        ('[{"reply": "hi", "fail": 500}]', "exactly one of the keys"),
        ('[{"reply": 3}]', "at 0/reply: Input should be a valid string"),
        ('[{"fail": 200}]', "greater than or equal to 400"),
        ('[{"fail": "503"}]', "valid integer"),
        ('[{"tool_calls": [{"name": "f", "argumentz": {}}]}]', "Extra inputs"),
        ('[{"delay": 1, "then": {"nope": 1}}]', "at 0/delay/then"),
        ("[{reply: hi}]", "Invalid JSON"),
    ],
)
def test_json_script_is_parsed_strictly(text: str, complaint: str) -> None:
    with pytest.raises(ScriptError, match="not a valid scripted-model script") as raised:
        parse_script(text)
    assert complaint in str(raised.value)
    assert raised.value.code == "invalid_model_script"


@pytest.mark.parametrize(
    ("build", "complaint"),
    [
        (lambda: Fail(200), "at status: Input should be greater than or equal to 400"),
        (lambda: Fail(503, times=0), "at times: Input should be greater than or equal to 1"),
        (lambda: ToolCall(""), "at name: String should have at least 1 character"),
        (lambda: CallTools([]), "at calls: List should have at least 1 item"),
        (lambda: Delay(-1, Reply("late")), "at seconds: Input should be greater than or equal"),
        (lambda: Delay(1, "late"), "at then: a turn is Reply, CallTools, Fail or Delay"),  # type: ignore[arg-type]
        (lambda: Reply(3), "at content: Input should be a valid string"),  # type: ignore[arg-type]
    ],
)
def test_turns_built_in_python_follow_the_script_rules(
    build: Callable[[], object], complaint: str
) -> None:
    with pytest.raises(ScriptError, match="is not a valid turn") as raised:
        build()
    assert complaint in str(raised.value)
    assert raised.value.code == "invalid_model_script"


def test_cli_rejects_a_bad_script_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script_path = tmp_path / "bad.json"
    script_path.write_text('[{"say": "hi"}]')
    assert main(["--script", str(script_path)]) == 2
    assert f"error: {script_path} is not a valid scripted-model script" in capsys.readouterr().err
    assert main(["--script", str(tmp_path / "missing.json")]) == 2
    assert "Cannot read the script" in capsys.readouterr().err


def test_cli_serves_a_script_from_a_subprocess(tmp_path: Path) -> None:
    script_path = tmp_path / "turns.json"
    script_path.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
                {"reply": "Cold."},
            ]
        )
    )
    repo_root = Path(scripted_model_module.__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo_root), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor.testing.scripted_model", "--script", str(script_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0) as client:
            first = client.chat.completions.create(model="m", messages=HELLO)
            second = client.chat.completions.create(model="m", messages=HELLO)
        tool_calls = first.choices[0].message.tool_calls
        assert tool_calls is not None and tool_calls[0].id == "call_1"
        assert second.choices[0].message.content == "Cold."
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
