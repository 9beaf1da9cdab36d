"""``supervisor mcp-gateway``: an MCP server on stdio in front of one upstream MCP server.

The client launches the gateway instead of the server. The gateway lists the upstream's tools
under their own names (input schemas and annotations unchanged) and answers each ``tools/call``
through :class:`~supervisor.mcp.gateway.McpGatewayCore`: allowed read-only calls are forwarded,
mutating ones wait for a decision in the ledger and then run at most once.

While a call waits, the gateway sends ``notifications/progress`` ("waiting for approval of
<id>") every ``progress_every`` seconds when the client gave a ``progressToken``; clients that
reset their request timeout on progress then wait as long as the approval takes. On a
2026-07-28 connection whose client answers form elicitation, a call still waiting after
``block_seconds`` is answered with ``input_required`` instead (see
:mod:`supervisor.mcp.gateway_input`) and re-sent by the client with the sealed state; the
form's answer is never an approval, which belongs to a person deciding in the ledger.

A tool-list change (the upstream's ``notifications/tools/list_changed``, or a changed listing
found when the client lists tools) re-records the contracts, invalidates grants made for the old
ones and is announced to the client as ``notifications/tools/list_changed``.

The gateway is a supervised process (kind ``mcp-gateway``) with a heartbeat; while calls wait it
is ``waiting_for_approval`` and recorded as their waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, assert_never

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from supervisor.ledger.models import ProcessStep, Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.mcp.config import McpServerConfig
from supervisor.mcp.connection import McpConnection, McpToolSpec
from supervisor.mcp.gateway import (
    DEFAULT_REPLAY_WINDOW_SECONDS,
    Answer,
    Forward,
    GatewayResult,
    McpGatewayCore,
    Step,
    Wait,
)
from supervisor.mcp.gateway_input import (
    WaitState,
    answer_of,
    can_ask,
    input_required,
    state_boundary,
)
from supervisor.runtime.host import RunStopped, SupervisedProcess, register_process, stop_on_signals
from supervisor.version import __version__

PROCESS_KIND = "mcp-gateway"
PROPOSAL_META_KEY = "supervisor/proposal_id"
DEFAULT_PROGRESS_SECONDS = 5.0
DEFAULT_BLOCK_SECONDS = 10.0
_BLOCKS: TypeAdapter[list[types.ContentBlock]] = TypeAdapter(list[types.ContentBlock])
_log = logging.getLogger(__name__)


def tool_of(spec: McpToolSpec) -> types.Tool:
    """The upstream tool as the gateway lists it: same name, description, schema, annotations."""
    annotations = (
        types.ToolAnnotations.model_validate(spec.annotations) if spec.annotations else None
    )
    return types.Tool(
        name=spec.name,
        description=spec.description or None,
        input_schema=spec.input_schema,
        annotations=annotations,
    )


def call_result(result: GatewayResult) -> types.CallToolResult:
    """A gateway answer as an MCP tool result (blocks that do not validate become text)."""
    try:
        content = _BLOCKS.validate_python(list(result.content))
    except ValidationError:
        import json

        content = [types.TextContent(type="text", text=json.dumps(list(result.content)))]
    meta = {PROPOSAL_META_KEY: result.proposal_id} if result.proposal_id else None
    return types.CallToolResult(
        content=content,
        structured_content=result.structured,
        is_error=result.is_error,
        _meta=meta,
    )


@dataclass
class GatewayServer:
    """The gateway's MCP handlers over one :class:`McpGatewayCore`.

    Args:
        core: The gate over the upstream's tools.
        process: The gateway's process row (its status and waits are recorded there).
        progress_every: Seconds between two progress notifications while a call waits.
        block_seconds: How long a call waits in one request before a client that can be asked
            (2026-07-28, form elicitation) gets ``input_required`` instead.
        decision_base_url: Base URL of the decision pages (``supervisor serve``) named in the
            ``input_required`` form, if any.
    """

    core: McpGatewayCore
    process: SupervisedProcess | None = None
    progress_every: float = DEFAULT_PROGRESS_SECONDS
    block_seconds: float = DEFAULT_BLOCK_SECONDS
    decision_base_url: str | None = None
    _session: ServerSession | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _waiting: dict[str, str] = field(default_factory=dict)
    _parked: set[str] = field(default_factory=set)
    _bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)

    def build(self) -> Server[Any]:
        """The low-level MCP server with the gateway's handlers."""
        name = f"supervisor-gateway-{self.core.config.name}"
        server: Server[Any] = Server(
            name,
            version=__version__,
            instructions=(
                f"Tools of the MCP server {self.core.config.name!r} behind the Agent Supervisor: "
                "calls that may change something wait for a human's approval and run once."
            ),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=ListenHandler(self._bus),
        )
        server.middleware.append(state_boundary(name))
        return server

    async def serve_stdio(self) -> None:
        """Serve one client on stdin/stdout until it disconnects."""
        self._loop = asyncio.get_running_loop()
        server = self.build()
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, options)

    def serving(self) -> ProcessStep:
        """The step shown while no call waits: ``serving <server>``."""
        now = self.core.ledger.clock.now()
        return ProcessStep(kind="serving", detail=self.core.config.name[:500], since=now)

    def upstream_tools_changed(self) -> None:
        """The upstream said its tools changed (called from the connection's thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._relist(force=True), loop)

    # -- handlers ----------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """Re-list the upstream (a changed listing invalidates grants) and return its tools."""
        self._session = ctx.session
        changed = await asyncio.to_thread(self.core.refresh)
        if changed:
            await self._announce()
        return types.ListToolsResult(tools=[tool_of(spec) for spec in self.core.listed()])

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Forward, or propose and wait, or answer from the ledger (see the module docstring).

        A call carrying ``requestState`` (verified by the boundary) is bound to the proposal
        the state names; a call still waiting after ``block_seconds`` on a connection that can
        be asked is answered with ``input_required``.
        """
        self._session = ctx.session
        if params.request_state is not None:
            state = WaitState.load(params.request_state)
            if state is None:  # verified by the boundary, so only a state of an older format
                raise MCPError(code=types.INVALID_PARAMS, message="Invalid or expired requestState")
            if answer_of(params.input_responses) == "stop_waiting":
                await self._unpark(params.name, state.proposal_id)
                stopped = await asyncio.to_thread(self.core.stopped_waiting, state.proposal_id)
                return call_result(stopped)
            step: Step = await asyncio.to_thread(
                self.core.resume, params.name, params.arguments, state.proposal_id,
                state.args_hash,
            )  # fmt: skip
        else:
            step = await asyncio.to_thread(self.core.begin, params.name, params.arguments)
        match step:
            case Answer(result=answer):
                return call_result(answer)
            case Forward():
                return call_result(await asyncio.to_thread(self.core.forward, step))
            case Wait():
                return await self._wait_or_ask(ctx, step)
            case _:
                assert_never(step)

    # -- internals ---------------------------------------------------------------------------

    async def _wait_or_ask(
        self, ctx: ServerRequestContext[Any], step: Wait
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Wait for the decision and finish the call; or, when this client can be asked and
        the call is still pending after ``block_seconds``, answer ``input_required``."""
        tool_name = step.tool.spec.name
        asking = can_ask(ctx.session.protocol_version, ctx.session.client_capabilities)
        proposal = await self._wait(ctx, step, self.block_seconds if asking else None)
        if proposal.status is ProposalStatus.PENDING:
            self._parked.add(proposal.proposal_id)  # still its waiter between the rounds
            await asyncio.to_thread(self._record_waits, tool_name, self._waited())
            return input_required(proposal, tool_name, self.decision_base_url)
        result = await asyncio.to_thread(self.core.finish, step.tool, proposal)
        await self._unpark(tool_name, step.proposal.proposal_id, proposal.proposal_id)
        return call_result(result)

    async def _unpark(self, tool_name: str, *proposal_ids: str) -> None:
        """The ``input_required`` exchange on these proposals is over."""
        if self._parked.intersection(proposal_ids):
            self._parked.difference_update(proposal_ids)
            await asyncio.to_thread(self._record_waits, tool_name, self._waited())

    async def _wait(
        self, ctx: ServerRequestContext[Any], step: Wait, limit: float | None
    ) -> Proposal:
        """Wait (with progress) until the call's proposal is decided, or ``limit`` seconds."""
        proposal = step.proposal
        deadline = None if limit is None else time.monotonic() + max(limit, 0.0)
        if proposal.status is ProposalStatus.PENDING:
            key = uuid.uuid4().hex
            self._waiting[key] = proposal.proposal_id
            await asyncio.to_thread(self._record_waits, step.tool.spec.name, self._waited())
            try:
                beat = 0
                while proposal.status is ProposalStatus.PENDING:
                    self._waiting[key] = proposal.proposal_id
                    with contextlib.suppress(Exception):  # a client gone mid-wait
                        await ctx.session.report_progress(
                            beat, None, f"waiting for approval of {proposal.proposal_id}"
                        )
                    beat += 1
                    pause = self.progress_every
                    if deadline is not None:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        pause = min(pause, remaining)
                    proposal = await asyncio.to_thread(self.core.wait, proposal.proposal_id, pause)
            finally:
                self._waiting.pop(key, None)
                with anyio.CancelScope(shield=True):  # also when the client cancelled the call
                    await asyncio.to_thread(self._record_waits, step.tool.spec.name, self._waited())
        return proposal

    def _waited(self) -> list[str]:
        """The proposals this gateway's calls wait on now, in a request or between the rounds
        of an ``input_required`` exchange (read on the event loop)."""
        return sorted(set(self._waiting.values()) | self._parked)

    def _record_waits(self, tool_name: str, waited: list[str]) -> None:
        process = self.process
        if process is None:
            return
        ledger: ApprovalLedger = process.ledger
        try:
            ledger.record_waiters(process.process_id, waited)
            if waited:
                process.status = "waiting_for_approval"
                step = ProcessStep(
                    kind="waiting_for_approval", detail=tool_name[:500], since=ledger.clock.now()
                )
                ledger.heartbeat(process.process_id, status=process.status, step=step)
            else:
                process.status = "running"
                ledger.heartbeat(process.process_id, status=process.status, step=self.serving())
        except Exception:  # bookkeeping must never fail a call
            _log.warning("could not record the gateway's waits", exc_info=True)

    async def _relist(self, *, force: bool) -> None:
        try:
            changed = await asyncio.to_thread(self.core.refresh)
        except Exception:
            _log.warning("re-listing the upstream's tools failed", exc_info=True)
            return
        if changed or force:
            await self._announce()

    async def _announce(self) -> None:
        """Tell the client its tools changed: to ``subscriptions/listen`` streams
        (2026-07-28) and as ``notifications/tools/list_changed`` (earlier versions)."""
        with contextlib.suppress(Exception):
            await self._bus.publish(ToolsListChanged())
        session = self._session
        if session is None or session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # no client yet (it lists the tools when it asks), or it listens
        with contextlib.suppress(Exception):
            await session.send_tool_list_changed()


def run_gateway(
    ledger: ApprovalLedger,
    config: McpServerConfig,
    *,
    command_line: str,
    replay_window_seconds: float = DEFAULT_REPLAY_WINDOW_SECONDS,
    ttl_seconds: float | None = None,
    progress_every: float = DEFAULT_PROGRESS_SECONDS,
    block_seconds: float = DEFAULT_BLOCK_SECONDS,
    decision_base_url: str | None = None,
) -> int:
    """Connect to the upstream, register the process and serve one client on stdio.

    Returns:
        The exit code: 0 when the client disconnected, 143 when stopped by a signal.

    Raises:
        McpUnavailable: the upstream could not be started or reached.
    """
    listeners: list[GatewayServer] = []  # the server exists once the upstream is listed

    def tools_changed() -> None:
        for listener in listeners:
            listener.upstream_tools_changed()

    connection = McpConnection(config, on_tools_changed=tools_changed).open()
    try:
        core = McpGatewayCore(
            ledger, config, connection,
            replay_window_seconds=replay_window_seconds, ttl_seconds=ttl_seconds,
        )  # fmt: skip
        connection.on_elicitation = core.gate.record_elicitation
        with contextlib.suppress(Exception):
            ledger.recover()  # calls a killed gateway left executing: needs_reconciliation
        core.refresh()
        process = register_process(
            ledger, command_line, f"mcp-gateway-{uuid.uuid4().hex[:12]}", kind=PROCESS_KIND
        )
        gateway = GatewayServer(core, process, progress_every, block_seconds, decision_base_url)
        ledger.heartbeat(process.process_id, step=gateway.serving())
        listeners.append(gateway)
        status, exit_code = "exited", 0
        try:
            with stop_on_signals(), process.heartbeats():
                asyncio.run(gateway.serve_stdio())
        except RunStopped:
            status, exit_code = "stopped", 143
        finally:
            process.set_status(status, exit_code)
        return exit_code
    finally:
        connection.close()
