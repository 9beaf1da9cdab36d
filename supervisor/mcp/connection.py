"""A synchronous handle on one MCP server over the official ``mcp`` client (stdio or HTTP).

The runtime calls tools synchronously; the ``mcp`` client is async. Each connection owns an
event loop on a daemon thread: one task holds the client session open (its context is entered
and left in that task), and calls are submitted to the loop and awaited with a timeout.
Elicitations from the server are always declined: they are reported as information and never
count as approval (approval belongs to a human deciding in the ledger).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import weakref
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext

from supervisor.errors import SupervisorError
from supervisor.mcp.config import McpServerConfig
from supervisor.version import __version__

T = TypeVar("T")
_OPEN: weakref.WeakSet[McpConnection] = weakref.WeakSet()


class McpUnavailable(SupervisorError, ConnectionError):
    """The MCP server could not be reached, or stopped answering."""

    code = "mcp_unavailable"


@dataclass(frozen=True)
class McpToolSpec:
    """One tool as the server lists it (plain data; no ``mcp`` types leak out)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class McpCallResult:
    """What one ``tools/call`` returned."""

    structured: Any
    texts: tuple[str, ...]
    other_blocks: tuple[str, ...]
    is_error: bool
    blocks: tuple[dict[str, Any], ...] = ()
    """Every content block as JSON data, in order (what a gateway forwards unchanged)."""


@dataclass(frozen=True)
class ElicitationNotice:
    """An elicitation the server sent during a call; declined, kept as information only."""

    server: str
    tool: str | None
    message: str
    mode: str
    requested_fields: tuple[str, ...]
    at: datetime


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class McpConnection:
    """A long-lived session with one MCP server, usable from synchronous code.

    Args:
        config: Which server and how to reach it.
        on_elicitation: Called (from the connection's thread) with each declined elicitation.
        on_tools_changed: Called (from the connection's thread) when the server sends
            ``notifications/tools/list_changed``.
    """

    def __init__(
        self,
        config: McpServerConfig,
        *,
        on_elicitation: Callable[[ElicitationNotice], None] | None = None,
        on_tools_changed: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.on_elicitation = on_elicitation
        self.on_tools_changed = on_tools_changed
        self.elicitations: list[ElicitationNotice] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Client | None = None
        self._closing: asyncio.Event | None = None
        self._holder: asyncio.Future[None] | None = None
        self._calling: str | None = None

    def __repr__(self) -> str:
        state = "open" if self._client is not None else "closed"
        return f"<McpConnection {self.config.name} {self.config.transport} {state}>"

    # -- lifecycle -------------------------------------------------------------------------

    def open(self) -> McpConnection:
        """Connect (idempotent).

        Raises:
            McpUnavailable: the server could not be started or reached.
        """
        with self._lock:
            if self._client is not None:
                return self
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name=f"mcp-{self.config.name}", daemon=True
                )
                self._thread.start()
            try:
                self._client = self._submit(self._enter(), self.config.timeout_seconds + 10)
            except McpUnavailable:
                raise
            _OPEN.add(self)
            return self

    def close(self) -> None:
        """End the session (stops a stdio server) and the connection's thread."""
        with self._lock:
            loop, closing, holder = self._loop, self._closing, self._holder
            self._client = None
            self._loop = None
            if loop is None:
                return
            if closing is not None:
                loop.call_soon_threadsafe(closing.set)
            if holder is not None:
                try:
                    asyncio.run_coroutine_threadsafe(_wait(holder), loop).result(timeout=10)
                except Exception:  # closing must not raise on a dead server
                    pass
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=10)
            _OPEN.discard(self)

    def __enter__(self) -> McpConnection:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------

    def list_tools(self) -> list[McpToolSpec]:
        """Every tool the server lists now (all pages, never from a cache).

        Raises:
            McpUnavailable: the server is unreachable or did not answer in time.
        """
        client = self.open()._require_client()
        return self._submit(_list_tools(client), self.config.timeout_seconds + 5)

    def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> McpCallResult:
        """Send one ``tools/call``; never retried (a mutation may already have happened).

        Raises:
            McpUnavailable: the server is unreachable or did not answer in time.
        """
        client = self.open()._require_client()
        return self._submit(
            self._call_tool(client, name, arguments, meta), self.config.timeout_seconds + 5
        )

    # -- internals -------------------------------------------------------------------------

    def _require_client(self) -> Client:
        client = self._client
        if client is None:
            raise McpUnavailable(f"MCP server {self.config.name!r} is not connected.")
        return client

    def _submit(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        loop = self._loop
        if loop is None:
            coroutine.close()
            raise McpUnavailable(f"MCP server {self.config.name!r} is closed.")
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise McpUnavailable(
                f"MCP server {self.config.name!r} did not answer within {timeout:.0f} s.",
                hint="Check the server, or raise timeout_seconds in its configuration.",
                reason_code="mcp_timeout",
            ) from None
        except McpUnavailable:
            raise
        except BaseException as exc:  # transport errors arrive as groups
            leaf = _first_leaf(exc)
            if self._holder is not None and self._holder.done():
                self._client = None  # the session ended; the next request reconnects
            raise McpUnavailable(
                f"MCP server {self.config.name!r} failed: {type(leaf).__name__}: {leaf}",
                hint=f"Check that the server runs and speaks MCP over {self.config.transport}.",
                reason_code="mcp_unavailable",
            ) from None

    async def _enter(self) -> Client:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._holder = asyncio.ensure_future(self._hold(ready, self._closing))
        return await ready

    async def _hold(self, ready: asyncio.Future[Client], closing: asyncio.Event) -> None:
        try:
            async with self._make_client() as client:
                ready.set_result(client)
                if self.on_tools_changed is None:
                    await closing.wait()
                    return
                async with anyio.create_task_group() as group:
                    group.start_soon(self._listen, client)
                    await closing.wait()
                    group.cancel_scope.cancel()
        except BaseException as exc:  # reported to whoever waits on ready
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
        finally:
            self._client = None

    def _make_client(self) -> Client:
        config = self.config
        server: StdioServerParameters | str
        if config.command is not None:
            server = StdioServerParameters(
                command=config.command[0],
                args=list(config.command[1:]),
                env=dict(config.env) or None,
                cwd=config.cwd,
            )
        else:
            assert config.url is not None
            server = config.url
        return Client(
            server,
            read_timeout_seconds=config.timeout_seconds,
            elicitation_callback=self._decline_elicitation,
            message_handler=self._on_message,
            client_info=types.Implementation(name="agent-supervisor", version=__version__),
            cache=None,
        )

    async def _listen(self, client: Client) -> None:
        """Follow tool-list changes on a 2026-07-28 connection (``subscriptions/listen``);
        earlier ones send ``notifications/tools/list_changed`` to :meth:`_on_message`."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._tools_changed()
        except Exception:  # not supported or the stream dropped: notifications still arrive
            return

    def _tools_changed(self) -> None:
        if self.on_tools_changed is not None:
            try:
                self.on_tools_changed()
            except Exception:  # a failing observer must not end the session
                pass

    async def _on_message(self, message: Any) -> None:
        """Tell ``on_tools_changed`` about a tool-list change; other messages are ignored."""
        if isinstance(message, types.ToolListChangedNotification):
            self._tools_changed()

    async def _decline_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """Decline every elicitation: a server's question is never a human's approval."""
        schema = getattr(params, "requested_schema", None) or {}
        properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
        notice = ElicitationNotice(
            server=self.config.name,
            tool=self._calling,
            message=str(getattr(params, "message", ""))[:500],
            mode=str(getattr(params, "mode", "form") or "form"),
            requested_fields=tuple(sorted(str(key) for key in properties)),
            at=datetime.now(UTC),
        )
        self.elicitations.append(notice)
        if self.on_elicitation is not None:
            try:
                self.on_elicitation(notice)
            except Exception:  # a failing observer must not accept anything
                pass
        return types.ElicitResult(action="decline")

    async def _call_tool(
        self, client: Client, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None
    ) -> McpCallResult:
        self._calling = name
        try:
            result = await client.call_tool(name, arguments, meta=meta)  # type: ignore[arg-type]
        finally:
            self._calling = None
        texts: list[str] = []
        others: list[str] = []
        for block in result.content:
            if isinstance(block, types.TextContent):
                texts.append(block.text)
            else:
                others.append(str(getattr(block, "type", type(block).__name__)))
        return McpCallResult(
            structured=result.structured_content,
            texts=tuple(texts),
            other_blocks=tuple(others),
            is_error=bool(result.is_error),
            blocks=tuple(
                block.model_dump(mode="json", by_alias=True, exclude_none=True)
                for block in result.content
            ),
        )


async def _wait(future: asyncio.Future[None]) -> None:
    await asyncio.wait([future], timeout=10)


async def _list_tools(client: Client) -> list[McpToolSpec]:
    specs: list[McpToolSpec] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        for tool in page.tools:
            annotations = (
                tool.annotations.model_dump(mode="json", exclude_none=True)
                if tool.annotations is not None
                else {}
            )
            read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
            specs.append(
                McpToolSpec(
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema),
                    read_only=read_only,
                    annotations=annotations,
                )
            )
        cursor = page.next_cursor
        if not cursor:
            return specs


@atexit.register
def _close_open_connections() -> None:
    for connection in list(_OPEN):
        connection.close()
