"""The OTLP protobuf encoding of an OTLP/JSON trace document, without a protobuf library.

OTLP/HTTP collectors take ``application/x-protobuf`` bodies (the default of the OpenTelemetry
exporters). This writes the protobuf wire format of ``ExportTraceServiceRequest`` directly
from the document :func:`supervisor.analysis.otlp.otlp_document` builds, field numbers as in
``opentelemetry/proto/trace/v1/trace.proto``, so exporting needs no runtime dependency; the
tests decode the bytes with the official ``opentelemetry-proto`` classes. Hex ids become bytes,
decimal-string 64-bit integers become ``fixed64``/``int64``. Only the fields the document uses
are written.
"""

from __future__ import annotations

import struct
from typing import Any

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64: two's complement, ten bytes for a negative value
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes(field: int, payload: bytes) -> bytes:
    return _tag(field, _LEN) + _varint(len(payload)) + payload


def _text(field: int, value: str | None) -> bytes:
    if not value:
        return b""
    return _bytes(field, value.encode("utf-8", "replace"))


def _uint(field: int, value: int) -> bytes:
    return _tag(field, _VARINT) + _varint(value) if value else b""


def _fixed64(field: int, value: str | int) -> bytes:
    number = int(value)
    return _tag(field, _I64) + struct.pack("<Q", number) if number else b""


def _hex(field: int, value: str | None) -> bytes:
    return _bytes(field, bytes.fromhex(value)) if value else b""


def _messages(field: int, items: list[dict[str, Any]], encode: Any) -> bytes:
    return b"".join(_bytes(field, encode(item)) for item in items)


def _any_value(value: dict[str, Any]) -> bytes:
    # A oneof member is written even when it holds its type's default (false, 0, "").
    ((kind, raw),) = value.items()
    if kind == "stringValue":
        return _bytes(1, str(raw).encode("utf-8", "replace"))
    if kind == "boolValue":
        return _tag(2, _VARINT) + _varint(1 if raw else 0)
    if kind == "intValue":
        return _tag(3, _VARINT) + _varint(int(raw))
    if kind == "doubleValue":
        return _tag(4, _I64) + struct.pack("<d", float(raw))
    raise ValueError(f"unsupported OTLP attribute value {kind}")


def _key_value(attribute: dict[str, Any]) -> bytes:
    return _text(1, attribute["key"]) + _bytes(2, _any_value(attribute["value"]))


def _attributes(field: int, item: dict[str, Any]) -> bytes:
    return _messages(field, item.get("attributes", []), _key_value)


def _event(event: dict[str, Any]) -> bytes:
    return _fixed64(1, event["timeUnixNano"]) + _text(2, event["name"]) + _attributes(3, event)


def _link(link: dict[str, Any]) -> bytes:
    return _hex(1, link["traceId"]) + _hex(2, link["spanId"]) + _attributes(4, link)


def _status(status: dict[str, Any]) -> bytes:
    return _text(2, status.get("message")) + _uint(3, int(status.get("code", 0)))


def _span(span: dict[str, Any]) -> bytes:
    return b"".join(
        (
            _hex(1, span["traceId"]),
            _hex(2, span["spanId"]),
            _hex(4, span.get("parentSpanId")),
            _text(5, span["name"]),
            _uint(6, int(span.get("kind", 0))),
            _fixed64(7, span["startTimeUnixNano"]),
            _fixed64(8, span["endTimeUnixNano"]),
            _attributes(9, span),
            _messages(11, span.get("events", []), _event),
            _messages(13, span.get("links", []), _link),
            _bytes(15, _status(span["status"])) if "status" in span else b"",
        )
    )


def _scope(scope: dict[str, Any]) -> bytes:
    return _text(1, scope.get("name")) + _text(2, scope.get("version"))


def _scope_spans(scope_spans: dict[str, Any]) -> bytes:
    return _bytes(1, _scope(scope_spans["scope"])) + _messages(2, scope_spans["spans"], _span)


def _resource_spans(resource_spans: dict[str, Any]) -> bytes:
    resource = _attributes(1, resource_spans["resource"])
    return _bytes(1, resource) + _messages(2, resource_spans["scopeSpans"], _scope_spans)


def encode_trace_request(document: dict[str, Any]) -> bytes:
    """The protobuf bytes of the OTLP/JSON ``ExportTraceServiceRequest`` ``document``."""
    return _messages(1, document["resourceSpans"], _resource_spans)


def partial_success(body: bytes) -> tuple[int, str]:
    """``(rejected_spans, error_message)`` of a protobuf ``ExportTraceServiceResponse``.

    Unknown fields are skipped; a body that is not protobuf reads as ``(0, "")``.
    """
    rejected, message = 0, ""
    for field, value in _fields(body):
        if field == 1 and isinstance(value, bytes):
            for inner, item in _fields(value):
                if inner == 1 and isinstance(item, int):
                    rejected = item
                elif inner == 2 and isinstance(item, bytes):
                    message = item.decode("utf-8", "replace")
    return rejected, message


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    found: list[tuple[int, int | bytes]] = []
    at = 0
    try:
        while at < len(data):
            key, at = _read_varint(data, at)
            field, wire = key >> 3, key & 7
            if wire == _VARINT:
                value, at = _read_varint(data, at)
                found.append((field, value))
            elif wire == _LEN:
                size, at = _read_varint(data, at)
                if at + size > len(data):
                    raise ValueError("truncated field")
                found.append((field, data[at : at + size]))
                at += size
            elif wire in (_I64, _I32):
                at += 8 if wire == _I64 else 4
            else:
                raise ValueError(f"wire type {wire}")
    except ValueError:
        return []
    return found
