"""A deterministic stand-in for a model: a real OpenAI-compatible HTTP server on loopback.

`ScriptedModel` answers ``POST /v1/chat/completions`` (plain JSON or server-sent events),
``GET /v1/models`` and the Anthropic Messages API's ``POST /v1/messages`` (see
:mod:`supervisor.testing.messages_protocol`) from one script of turns, and records every
request it was asked, so users' tests and the demo can drive the real ``openai`` client (or
anything pointed at ``OPENAI_BASE_URL``, or the Claude Code CLI pointed at
``ANTHROPIC_BASE_URL``) without a network or a GPU. It uses only the standard library's
``http.server``, so importing it stays cheap.

Run it from a subprocess with ``python -m supervisor.testing.scripted_model --script turns.json``.
"""

from __future__ import annotations

import argparse
import hmac
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

from supervisor.errors import SupervisorError
from supervisor.testing.protocol import (
    RecordedRequest,
    Refusal,
    ResolvedCall,
    ScriptedAnswer,
    prompt_tokens,
)
from supervisor.testing.server import ScriptedHTTPServer
from supervisor.testing.turns import (
    CallTools,
    Delay,
    Fail,
    Reply,
    ScriptError,
    ToolCall,
    Turn,
    load_script,
    parse_script,
)

__all__ = [
    "CallTools",
    "Delay",
    "Fail",
    "RecordedRequest",
    "Reply",
    "ScriptError",
    "ScriptSource",
    "ScriptedModel",
    "ScriptedModelNotRunning",
    "ToolCall",
    "Turn",
    "load_script",
    "main",
    "parse_script",
]

_log = logging.getLogger(__name__)

ScriptSource = Sequence[Turn] | Callable[[RecordedRequest], Turn]
"""Turns answered in order, or a callable choosing the turn for each request."""


class ScriptedModelNotRunning(SupervisorError, RuntimeError):
    """The scripted model was used before `ScriptedModel.start` or started twice."""

    code = "scripted_model_not_running"


class _ScriptPlayer:
    """Plays a script: records requests and picks each one's answer, one request at a time.

    Everything runs under one lock so request numbers, turn order and generated tool-call ids
    follow arrival order exactly, even with concurrent clients.
    """

    def __init__(self, script: ScriptSource, model_name: str, api_key: str | None) -> None:
        self.model_name = model_name
        self.api_key = api_key
        self.script: Callable[[RecordedRequest], Turn] | list[Turn]
        self.script = script if callable(script) else list(script)
        self.lock = threading.RLock()
        self.requests: list[RecordedRequest] = []
        self.turn_index = 0
        self.fails_served = 0
        self.call_counter = 0
        self.stopping = threading.Event()

    def authorises(self, authorization: str | None) -> bool:
        if self.api_key is None:
            return True
        expected = f"Bearer {self.api_key}".encode()
        return hmac.compare_digest((authorization or "").encode(), expected)

    def wait_for_stop(self, seconds: float) -> bool:
        return self.stopping.wait(seconds)

    def take_turn(
        self, method: str, path: str, headers: Mapping[str, str], body: dict[str, Any]
    ) -> tuple[float, ScriptedAnswer | Fail | Refusal]:
        with self.lock:
            request = RecordedRequest(len(self.requests) + 1, method, path, headers, body)
            self.requests.append(request)
            turn = self._pick(request)
            delay = 0.0
            while isinstance(turn, Delay):
                delay += turn.seconds
                turn = turn.then
            if isinstance(turn, Reply | CallTools):
                return delay, self._resolve(request, turn)
            return delay, turn

    def _pick(self, request: RecordedRequest) -> Turn | Refusal:
        script = self.script
        if callable(script):
            try:
                turn = script(request)
            except Exception as error:
                _log.exception("scripted model callable failed on request %d", request.number)
                return Refusal(
                    f"scripted model callable raised {type(error).__name__}: {error} "
                    f"(request {request.number})"
                )
            if not isinstance(turn, Reply | CallTools | Fail | Delay):
                return Refusal(
                    f"scripted model callable returned {type(turn).__name__}, not a turn "
                    f"(request {request.number})"
                )
            return turn
        if self.turn_index >= len(script):
            return Refusal(
                f"scripted model has no turn left for request {request.number} "
                f"(the script had {len(script)} turns)"
            )
        turn = script[self.turn_index]
        if isinstance(turn, Fail):
            self.fails_served += 1
            if self.fails_served < turn.times:
                return turn
        self.turn_index += 1
        self.fails_served = 0
        return turn

    def _resolve(self, request: RecordedRequest, turn: Reply | CallTools) -> ScriptedAnswer:
        calls: list[ResolvedCall] = []
        if isinstance(turn, CallTools):
            for call in turn.calls:
                call_id = call.id
                if call_id is None:
                    self.call_counter += 1
                    call_id = f"call_{self.call_counter}"
                calls.append(ResolvedCall(call_id, call.name, call.arguments_text()))
        return ScriptedAnswer(
            completion_id=f"chatcmpl-scripted-{request.number}",
            created=int(time.time()),
            model=self.model_name,
            content=turn.content,
            calls=calls,
            prompt_tokens=prompt_tokens(request.body),
        )


class ScriptedModel:
    """A scripted OpenAI-compatible chat model served over HTTP on loopback.

    Args:
        turns: Either a sequence of turns answered in order (a `Fail` with ``times=n`` answers
            n requests), or a callable that sees each `RecordedRequest` and returns its turn
            (called one request at a time; if it raises, that request gets HTTP 500). When a
            sequence runs out the server answers HTTP 500 "scripted model has no turn left for
            request N" with ``x-should-retry: false``, so clients fail fast instead of hanging.
        model_name: The model id reported in answers and by ``GET /v1/models``.
        host: The interface to bind; loopback by default.
        port: The port to bind; 0 picks a free one.
        api_key: When set, requests without ``Authorization: Bearer <api_key>`` get HTTP 401.

    Only authorised, well-formed chat-completion requests are recorded and consume turns.
    Thread-safe. Use it as a context manager so the server always stops.
    """

    def __init__(
        self,
        turns: ScriptSource,
        *,
        model_name: str = "scripted-model",
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
    ) -> None:
        self._player = _ScriptPlayer(turns, model_name, api_key)
        self._host = host
        self._requested_port = port
        self._server: ScriptedHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @staticmethod
    def reply(content: str) -> Reply:
        """An assistant text answer (see `Reply`)."""
        return Reply(content)

    @staticmethod
    def call_tool(name: str, arguments: dict[str, Any] | str | None = None) -> CallTools:
        """An answer with a single tool call (see `ToolCall`)."""
        return CallTools([ToolCall(name, {} if arguments is None else arguments)])

    @staticmethod
    def call_tools(*calls: ToolCall) -> CallTools:
        """An answer with parallel tool calls (see `CallTools`)."""
        return CallTools(list(calls))

    @staticmethod
    def fail(status: int, message: str = "", *, times: int = 1) -> Fail:
        """An HTTP error answer (see `Fail`)."""
        return Fail(status, message, times)

    @property
    def model_name(self) -> str:
        """The model id reported to clients."""
        return self._player.model_name

    @property
    def api_key(self) -> str | None:
        """The Bearer token clients must send, or None when any (or none) is accepted."""
        return self._player.api_key

    def start(self) -> Self:
        """Bind the port and serve in a daemon thread.

        Returns:
            The model itself, for chaining.

        Raises:
            ScriptedModelNotRunning: It was already started (a scripted model serves once).
            OSError: The address cannot be bound.
        """
        if self._server is not None:
            raise ScriptedModelNotRunning(
                "This scripted model was already started.", hint="Create a new ScriptedModel."
            )
        self._server = ScriptedHTTPServer((self._host, self._requested_port), self._player)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-model:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections and pending delays, and free the port.

        Safe to call more than once, or before `start`.
        """
        server, thread = self._server, self._thread
        if server is None:
            return
        self._player.stopping.set()
        server.shutdown()
        server.close_open_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> Self:
        if self._server is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            ScriptedModelNotRunning: The server was not started.
        """
        if self._server is None:
            raise ScriptedModelNotRunning(
                "The scripted model has no port yet.", hint="Call start() or use it in a with."
            )
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://HOST:PORT/v1``.

        Raises:
            ScriptedModelNotRunning: The server was not started.
        """
        return f"http://{self._host}:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the chat-completion requests received so far, in arrival order."""
        with self._player.lock:
            return list(self._player.requests)

    @property
    def turns_left(self) -> int | None:
        """How many turns of a list script remain unanswered (None for a callable script)."""
        with self._player.lock:
            script = self._player.script
            return None if callable(script) else len(script) - self._player.turn_index

    def env(self) -> dict[str, str]:
        """Environment variables that point an OpenAI client (or a subprocess) here.

        Returns:
            ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (the required key or ``sk-scripted``).

        Raises:
            ScriptedModelNotRunning: The server was not started.
        """
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key or "sk-scripted"}

    @property
    def anthropic_base_url(self) -> str:
        """The Anthropic base URL, ``http://HOST:PORT`` (clients add ``/v1/messages``).

        Raises:
            ScriptedModelNotRunning: The server was not started.
        """
        return f"http://{self._host}:{self.port}"

    def anthropic_env(self) -> dict[str, str]:
        """Environment variables that point an Anthropic client (the Claude Code CLI) here.

        Returns:
            ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` (the required key or
            ``sk-ant-scripted``); the client sends the key as ``x-api-key``.

        Raises:
            ScriptedModelNotRunning: The server was not started.
        """
        return {
            "ANTHROPIC_BASE_URL": self.anthropic_base_url,
            "ANTHROPIC_API_KEY": self.api_key or "sk-ant-scripted",
        }


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a JSON script until SIGTERM or SIGINT, printing the base URL as the first line.

    Args:
        argv: Command-line arguments (defaults to ``sys.argv[1:]``).

    Returns:
        The exit status: 0 after a signal, 2 for a bad script (argparse also exits 2 for bad
        arguments).
    """
    parser = argparse.ArgumentParser(
        prog="python -m supervisor.testing.scripted_model",
        description="Serve a deterministic OpenAI-compatible chat model from a JSON script.",
    )
    parser.add_argument("--script", required=True, type=Path, help="JSON list of turns")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument("--model-name", default="scripted-model", help="model id to report")
    parser.add_argument("--api-key", default=None, help="require this Bearer token")
    options = parser.parse_args(argv)
    try:
        turns = load_script(options.script)
    except ScriptError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    model = ScriptedModel(
        turns,
        model_name=options.model_name,
        host=options.host,
        port=options.port,
        api_key=options.api_key,
    )
    with model:
        print(model.base_url, flush=True)
        stop_requested.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
