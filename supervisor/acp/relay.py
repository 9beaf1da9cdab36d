"""The relay between an editor (ACP client) and an ACP agent: ``supervisor acp -- AGENT...``.

Every JSON-RPC line passes through unchanged, byte for byte, both ways, except the agent's
``session/request_permission`` requests: those are answered by the ledger
(:class:`~supervisor.acp.gate.AcpGate`) and never reach the editor. The relay reads what it
needs along the way: a session's ``cwd`` (``session/new`` and its response, ``session/load``),
the current ``session/prompt`` (one prompt is one assistant turn), the editor's
``session/cancel``, and the agent's ``tool_call`` updates (their title, kind and input fill in a
permission request that omits them; a ``completed`` or ``failed`` status finishes the claimed
call). Everything else, ``fs/*`` and ``terminal/*`` requests included, is the editor's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from supervisor.acp.gate import AcpGate
from supervisor.acp.permission import ToolCalls, read_ask, response_json
from supervisor.errors import CanonicalJSONError

#: Longest JSON-RPC line accepted from either side (the ACP SDK's default).
LINE_LIMIT = 50 * 1024 * 1024
INVALID_PARAMS = -32602
_log = logging.getLogger(__name__)

Sink = Callable[[bytes], Awaitable[None]]
T = TypeVar("T")


def parse(line: bytes) -> dict[str, Any] | None:
    """One JSON-RPC message, or ``None`` when the line is not a JSON object (passed on as is)."""

    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    try:
        message = json.loads(line, parse_constant=refuse)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def id_key(message: dict[str, Any]) -> str:
    """A hashable key of a message's id (ids may be numbers or strings)."""
    return json.dumps(message.get("id"), sort_keys=True)


async def in_own_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking ledger wait in a thread of its own.

    ``asyncio.to_thread``'s shared pool has a few workers; as many permission requests blocked
    on people would take them all and starve the short calls (a cancel, a status) that end
    those waits.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result = function(*args, **kwargs)
        except BaseException as error:  # handed to the awaiting task
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits
                loop.call_soon_threadsafe(settle, None, error)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=run, name="acp-decision", daemon=True).start()
    return await future


def turn_id() -> str:
    """A fresh id for one prompt (one assistant turn)."""
    return f"acp-turn-{uuid.uuid4().hex[:16]}"


@dataclass
class SessionState:
    """What the relay learned about the sessions going through it."""

    cwd: dict[str, str] = field(default_factory=dict)
    turn: dict[str, str] = field(default_factory=dict)
    tool_calls: ToolCalls = field(default_factory=ToolCalls)
    new_requests: dict[str, str] = field(default_factory=dict)  # id -> cwd asked for
    prompt_requests: dict[str, str] = field(default_factory=dict)  # id -> session


class Relay:
    """Passes lines between the editor and the agent and answers permission requests.

    Args:
        gate: The ledger side.
        to_editor: Writes one line to the editor.
        to_agent: Writes one line to the agent.
    """

    def __init__(self, gate: AcpGate, to_editor: Sink, to_agent: Sink) -> None:
        self.gate = gate
        self.to_editor = to_editor
        self.to_agent = to_agent
        self.state = SessionState()
        self.tasks: set[asyncio.Task[None]] = set()

    async def from_editor(self, line: bytes) -> None:
        """A line the editor sent: note what it says, then pass it to the agent."""
        message = parse(line)
        if message is not None:
            await self._note_editor(message)
        await self.to_agent(line)

    async def from_agent(self, line: bytes) -> None:
        """A line the agent sent: answer a permission request, pass anything else on."""
        message = parse(line)
        if message is not None:
            if message.get("method") == "session/request_permission" and "id" in message:
                task = asyncio.create_task(self._answer_permission(message))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                return
            await self._note_agent(message)
        await self.to_editor(line)

    async def _note_editor(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params")
        if not isinstance(params, dict):
            return
        session_id = params.get("sessionId")
        if method == "session/new" and "id" in message:
            cwd = params.get("cwd")
            self.state.new_requests[id_key(message)] = cwd if isinstance(cwd, str) else ""
        elif method in ("session/load", "session/resume") and isinstance(session_id, str):
            cwd = params.get("cwd")
            if isinstance(cwd, str):
                self.state.cwd[session_id] = cwd
        elif method == "session/prompt" and "id" in message and isinstance(session_id, str):
            self.state.prompt_requests[id_key(message)] = session_id
            self.state.turn[session_id] = turn_id()
            self.gate.prompt_started(session_id)
        elif method == "session/cancel" and isinstance(session_id, str):
            await asyncio.to_thread(self.gate.cancel_session, session_id)

    async def _note_agent(self, message: dict[str, Any]) -> None:
        if "method" not in message and "id" in message:  # a response to the editor
            key = id_key(message)
            result = message.get("result")
            cwd = self.state.new_requests.pop(key, None)
            if cwd is not None and isinstance(result, dict):
                session_id = result.get("sessionId")
                if isinstance(session_id, str) and cwd:
                    self.state.cwd[session_id] = cwd
            session_id = self.state.prompt_requests.pop(key, None)
            if session_id is not None:
                self.state.turn.pop(session_id, None)
            return
        params = message.get("params")
        if message.get("method") != "session/update" or not isinstance(params, dict):
            return
        session_id, update = params.get("sessionId"), params.get("update")
        if not isinstance(session_id, str) or not isinstance(update, dict):
            return
        merged = self.state.tool_calls.update(session_id, update)
        if merged is not None and merged.get("status") in ("completed", "failed"):
            call_id = str(update.get("toolCallId"))
            await asyncio.to_thread(self.gate.tool_status, session_id, call_id, merged["status"])

    async def _answer_permission(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        tool_call = params.get("toolCall") if isinstance(params, dict) else None
        call_id = tool_call.get("toolCallId") if isinstance(tool_call, dict) else None
        known = (
            self.state.tool_calls.known(session_id, call_id)
            if isinstance(session_id, str) and isinstance(call_id, str)
            else None
        )
        try:
            ask = read_ask(params, known)
            decided = await in_own_thread(
                self.gate.decide, ask, turn_id=self.state.turn.get(ask.session_id),
                cwd=self.state.cwd.get(ask.session_id),
            )  # fmt: skip
        except (ValueError, CanonicalJSONError) as error:
            _log.info("refused a permission request: %s", error)
            await self._reply(message, error={
                "code": INVALID_PARAMS, "message": "Invalid session/request_permission params",
            })  # fmt: skip
            return
        await self._reply(message, result=response_json(decided.answer))

    async def _reply(
        self,
        request: dict[str, Any],
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": request.get("id")}
        if error is not None:
            response["error"] = error
        else:
            response["result"] = result
        await self.to_agent(json.dumps(response, separators=(",", ":")).encode() + b"\n")


async def pump(reader: asyncio.StreamReader, handle: Callable[[bytes], Awaitable[None]]) -> None:
    """Hand every line ``reader`` yields to ``handle`` until end of file."""
    while True:
        try:
            line = await reader.readline()
        except (asyncio.LimitOverrunError, ValueError):
            _log.warning("dropped a line longer than %d bytes", LINE_LIMIT)
            continue
        if not line:
            return
        await handle(line)


def line_writer(writer: asyncio.StreamWriter) -> Sink:
    """A sink writing whole lines to ``writer``, one at a time."""
    lock = asyncio.Lock()

    async def write(line: bytes) -> None:
        async with lock:
            with contextlib.suppress(ConnectionError):
                writer.write(line if line.endswith(b"\n") else line + b"\n")
                await writer.drain()

    return write


async def run_relay(gate: AcpGate, argv: list[str], env: dict[str, str]) -> int:
    """Spawn the agent, relay between this process's stdio (the editor) and it, and return
    the agent's exit code once either side is gone."""
    from acp.stdio import stdio_streams

    agent = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
        limit=LINE_LIMIT,
    )  # fmt: skip
    assert agent.stdin is not None and agent.stdout is not None
    editor_in, editor_out = await stdio_streams(limit=LINE_LIMIT)
    relay = Relay(gate, line_writer(editor_out), line_writer(agent.stdin))
    editor = asyncio.create_task(pump(editor_in, relay.from_editor))
    agent_out = asyncio.create_task(pump(agent.stdout, relay.from_agent))
    try:
        done, _ = await asyncio.wait({editor, agent_out}, return_when=asyncio.FIRST_COMPLETED)
        if editor in done:  # the editor hung up: let the agent finish, as on a pipe's EOF
            with contextlib.suppress(OSError, RuntimeError):
                agent.stdin.write_eof()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(agent_out, timeout=5)
    finally:
        await asyncio.to_thread(gate.close)
        for task in (editor, agent_out, *relay.tasks):
            task.cancel()
        await _stop(agent)
    return agent.returncode if agent.returncode is not None else 1


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Wait briefly for the agent, then terminate it, then kill it."""
    for signal_it in (None, process.terminate, process.kill):
        if signal_it is not None:
            with contextlib.suppress(ProcessLookupError):
                signal_it()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), timeout=2)
            return
