"""The scripted model's HTTP layer: a standard-library threading server and its routes.

The server knows the OpenAI routes and framing (JSON bodies, chunked server-sent events, error
bodies) and the Anthropic Messages ones (``POST /v1/messages``, its ``count_tokens``, named
server-sent events, ``x-api-key``); what to answer comes from a `ScriptBackend`, so the script
logic stays testable on its own and this module stays free of it. Both wire formats play the
same script.
"""

from __future__ import annotations

import itertools
import json
import logging
import socket
import sys
import threading
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, cast

from supervisor.testing.messages_protocol import (
    count_tokens_body,
    message_body,
    message_error_body,
    message_events,
)
from supervisor.testing.protocol import (
    Refusal,
    ScriptedAnswer,
    completion_body,
    completion_chunks,
    error_body,
)
from supervisor.testing.turns import Fail

__all__ = ["ScriptBackend", "ScriptedHTTPServer"]

_log = logging.getLogger(__name__)
_MAX_BODY_BYTES = 32 * 1024 * 1024
_REDACTED_HEADERS = {"authorization": "Bearer ***", "api-key": "***"}
_CHAT_COMPLETIONS = "/v1/chat/completions"
_MESSAGES = "/v1/messages"
_COUNT_TOKENS = "/v1/messages/count_tokens"


class ScriptBackend(Protocol):
    """What the HTTP layer needs from the script: auth, the next answer, and stop waits."""

    @property
    def model_name(self) -> str:
        """The model id reported to clients."""
        ...

    def authorises(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value may use the model."""
        ...

    def take_turn(
        self, method: str, path: str, headers: Mapping[str, str], body: dict[str, Any]
    ) -> tuple[float, ScriptedAnswer | Fail | Refusal]:
        """Record a request and return (seconds to wait, what to answer)."""
        ...

    def wait_for_stop(self, seconds: float) -> bool:
        """Wait up to ``seconds``; True when the server is stopping meanwhile."""
        ...


class ScriptedHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that serves a backend and can cut keep-alive connections.

    Args:
        address: (host, port) to bind; port 0 picks a free one.
        backend: Decides every answer.
    """

    daemon_threads = True

    def __init__(self, address: tuple[str, int], backend: ScriptBackend) -> None:
        self.backend = backend
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer is normal (timeouts, retries): log it quietly."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            _log.debug("client %s went away: %r", client_address, error)
            return
        _log.exception("scripted model failed serving %s", client_address)

    def close_open_connections(self) -> None:
        """Shut down every open client connection so idle keep-alive threads end now."""
        with self._open_lock:
            open_sockets = list(self._open)
        for open_socket in open_sockets:
            try:
                open_socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    """Routes one HTTP request to the backend and writes the OpenAI-shaped answer."""

    protocol_version = "HTTP/1.1"
    # Replies are written in several small pieces; without TCP_NODELAY each exchange waits on
    # delayed ACKs (about 40 ms on Linux loopback).
    disable_nagle_algorithm = True
    server_version = "ScriptedModel/1"

    @property
    def backend(self) -> ScriptBackend:
        return cast(ScriptedHTTPServer, self.server).backend

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("scripted model: " + format, *args)

    def _send_json(self, status: int, payload: Any, extra: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str) -> None:
        """An error the client must not retry (the same request would fail the same way)."""
        self._send_json(status, error_body(status, message), {"x-should-retry": "false"})

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def _model_card(self) -> dict[str, Any]:
        name = self.backend.model_name
        return {"id": name, "object": "model", "created": 0, "owned_by": "scripted"}

    def do_GET(self) -> None:
        route = self._route()
        if not self.backend.authorises(self.headers.get("Authorization")):
            self._send_error(401, "Incorrect API key provided to the scripted model.")
        elif route == "/v1/models":
            self._send_json(200, {"object": "list", "data": [self._model_card()]})
        elif route == f"/v1/models/{self.backend.model_name}":
            self._send_json(200, self._model_card())
        else:
            self._send_error(404, f"Unknown path {route!r} on the scripted model.")

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_BODY_BYTES:
            self.close_connection = True
            self._send_error(413, "Missing, invalid or too large Content-Length.")
            return
        raw_body = self.rfile.read(length)
        route = self._route()
        if route in (_MESSAGES, _COUNT_TOKENS):
            self._messages_route(route, raw_body)
        elif route != _CHAT_COMPLETIONS:
            self._send_error(404, f"Unknown path {route!r} on the scripted model.")
        elif not self.backend.authorises(self.headers.get("Authorization")):
            self._send_error(401, "Incorrect API key provided to the scripted model.")
        else:
            self._chat_completion(raw_body)

    def _recorded_headers(self) -> dict[str, str]:
        return {
            name.lower(): _REDACTED_HEADERS.get(name.lower(), value)
            for name, value in self.headers.items()
        }

    def _messages_route(self, route: str, raw_body: bytes) -> None:
        """``POST /v1/messages`` (a turn of the script) or its ``count_tokens`` (no turn)."""
        api_key = self.headers.get("x-api-key")
        authorization = f"Bearer {api_key}" if api_key else self.headers.get("Authorization")
        if not self.backend.authorises(authorization):
            message = "Incorrect API key provided to the scripted model."
            self._send_json(401, message_error_body(401, message), {"x-should-retry": "false"})
            return
        try:
            body = json.loads(raw_body)
        except (ValueError, UnicodeDecodeError) as error:
            message = f"The request body is not valid JSON: {error}."
            self._send_json(400, message_error_body(400, message), {"x-should-retry": "false"})
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            message = "The request body must be a JSON object with a 'messages' list."
            self._send_json(400, message_error_body(400, message), {"x-should-retry": "false"})
            return
        if route == _COUNT_TOKENS:
            self._send_json(200, count_tokens_body(body))
            return
        delay, outcome = self.backend.take_turn(
            self.command, _MESSAGES, self._recorded_headers(), body
        )
        if delay > 0 and self.backend.wait_for_stop(delay):
            self.close_connection = True
            return
        if isinstance(outcome, Refusal):
            self._send_json(
                500, message_error_body(500, outcome.message), {"x-should-retry": "false"}
            )
        elif isinstance(outcome, Fail):
            extra: dict[str, str] = {}
            if outcome.retry_after is not None:
                extra["retry-after"] = str(max(1, round(outcome.retry_after)))
            body_out = message_error_body(outcome.status, outcome.error_message())
            self._send_json(outcome.status, body_out, extra)
        elif body.get("stream") is True:
            self._stream_events(
                (name, json.dumps(data, ensure_ascii=False))
                for name, data in message_events(outcome)
            )
        else:
            self._send_json(200, message_body(outcome))

    def _chat_completion(self, raw_body: bytes) -> None:
        try:
            body = json.loads(raw_body)
        except (ValueError, UnicodeDecodeError) as error:
            self._send_error(400, f"The request body is not valid JSON: {error}.")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_error(400, "The request body must be a JSON object with a 'messages' list.")
            return
        delay, outcome = self.backend.take_turn(
            self.command, _CHAT_COMPLETIONS, self._recorded_headers(), body
        )
        if delay > 0 and self.backend.wait_for_stop(delay):
            self.close_connection = True
            return
        if isinstance(outcome, Refusal):
            self._send_error(500, outcome.message)
        elif isinstance(outcome, Fail):
            # No x-should-retry header: clients apply their own rules (retry 408/409/429/5xx).
            extra: dict[str, str] = {}
            if outcome.retry_after is not None:
                extra["retry-after-ms"] = str(round(outcome.retry_after * 1000))
            self._send_json(
                outcome.status, error_body(outcome.status, outcome.error_message()), extra
            )
        elif body.get("stream") is True:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            self._stream(outcome, include_usage=include_usage)
        else:
            self._send_json(200, completion_body(outcome))

    def _stream(self, answer: ScriptedAnswer, *, include_usage: bool) -> None:
        """Send the answer as chat-completion chunks, then ``[DONE]``."""
        chunks = completion_chunks(answer, include_usage=include_usage)
        events = ((None, json.dumps(chunk, ensure_ascii=False)) for chunk in chunks)
        self._stream_events(itertools.chain(events, [(None, "[DONE]")]))

    def _stream_events(self, events: Iterable[tuple[str | None, str]]) -> None:
        """Send (event name or None, data) as server-sent events over chunked encoding."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for name, data in events:
                self._write_event(data, name)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _write_event(self, data: str, name: str | None = None) -> None:
        named = f"event: {name}\n" if name else ""
        event = f"{named}data: {data}\n\n".encode()
        self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        self.wfile.flush()
