"""Reading OTLP exports with the official OpenTelemetry classes, and a real OTLP/HTTP receiver.

``decode_json`` loads an OTLP/JSON document into ``ExportTraceServiceRequest`` with
``google.protobuf.json_format`` (unknown fields refused). OTLP/JSON spells trace and span ids
as hex where the protobuf JSON mapping expects base64 (the one deviation the OTLP
specification makes), so ids are turned into base64 first. ``OtlpReceiver`` is an
``http.server`` on 127.0.0.1 in a thread that decodes each body with the same classes.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


def _base64_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: base64.b64encode(bytes.fromhex(item)).decode("ascii")
            if key in _ID_KEYS
            else _base64_ids(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_base64_ids(item) for item in value]
    return value


def decode_json(text: str) -> ExportTraceServiceRequest:
    """An OTLP/JSON document parsed by the official protobuf JSON parser."""
    request = ExportTraceServiceRequest()
    json_format.ParseDict(_base64_ids(json.loads(text)), request)
    return request


def _plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def flat(attributes: list[KeyValue] | Any) -> dict[str, Any]:
    """Attribute key -> plain Python value."""
    return {attribute.key: _plain(attribute.value) for attribute in attributes}


@dataclass(frozen=True)
class Span:
    """A decoded span, with ids as hex and attributes as a dict."""

    name: str
    trace_id: str
    span_id: str
    parent: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]]
    links: list[str]
    status: int
    message: str

    @property
    def duration_ms(self) -> float:
        return (self.end - self.start) / 1e6


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    """Every span of a decoded request; ids must have the OTLP sizes (16 and 8 bytes)."""
    found: list[Span] = []
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                assert len(span.trace_id) == 16 and len(span.span_id) == 8, span.name
                assert not span.parent_span_id or len(span.parent_span_id) == 8
                found.append(_span(span))
    return found


def _span(span: ProtoSpan) -> Span:
    return Span(
        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
        parent=span.parent_span_id.hex(), start=span.start_time_unix_nano,
        end=span.end_time_unix_nano, attributes=flat(span.attributes),
        events=[(event.name, event.time_unix_nano, flat(event.attributes))
                for event in span.events],
        links=[link.span_id.hex() for link in span.links],
        status=span.status.code, message=span.status.message,
    )  # fmt: skip


@dataclass
class Received:
    """One request the receiver got: path, headers (lower-case names), decoded body."""

    path: str
    headers: dict[str, str]
    content_type: str
    request: ExportTraceServiceRequest | None


@dataclass
class OtlpReceiver:
    """A real OTLP/HTTP traces receiver on 127.0.0.1.

    ``statuses`` are answered in turn (then 200); a 200 to a protobuf request carries
    ``partial`` as ``(rejected_spans, message)`` when given; a 3xx names ``location``.
    """

    statuses: list[int] = field(default_factory=list)
    partial: tuple[int, str] | None = None
    location: str | None = None
    received: list[Received] = field(default_factory=list)

    def __enter__(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                kind = self.headers.get("Content-Type", "")
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                decoded: ExportTraceServiceRequest | None = None
                if status == 200:
                    if kind == "application/x-protobuf":
                        decoded = ExportTraceServiceRequest.FromString(body)
                    else:
                        decoded = decode_json(body.decode("utf-8"))
                receiver.received.append(Received(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, kind, decoded,
                ))  # fmt: skip
                answer = b""
                if status == 200 and receiver.partial and kind == "application/x-protobuf":
                    response = ExportTraceServiceResponse()
                    response.partial_success.rejected_spans = receiver.partial[0]
                    response.partial_success.error_message = receiver.partial[1]
                    answer = response.SerializeToString()
                elif status != 200:
                    answer = b'{"code": 3, "message": "bad \x1b[2J request"}'
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "0")
                if 300 <= status < 400 and receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Type", kind or "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:  # what a followed redirect of a POST would send
                receiver.received.append(Received(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, "", None,
                ))  # fmt: skip
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def spans(self) -> list[Span]:
        """Every span of every request it accepted."""
        return [span for item in self.received if item.request for span in spans_of(item.request)]

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
