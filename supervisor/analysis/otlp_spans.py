"""The OTLP/JSON building blocks: ids, timestamps, attribute values and one span.

Ids are derived (SHA-256 of their parts, cut to 32 or 16 lowercase hex digits), so exporting
the same ledger twice gives the same ids. 64-bit integers are decimal strings, as the OTLP/JSON
mapping of ``fixed64``/``int64`` requires.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2


def nanos(moment: datetime) -> str:
    """``moment`` as decimal-string nanoseconds since the Unix epoch."""
    return str(int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000)


def hex_id(*parts: object, digits: int) -> str:
    """A stable id of ``digits`` hex digits derived from ``parts``."""
    text = "\x1f".join(str(part) for part in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP ``KeyValue`` list of ``values``, leaving out ``None``."""
    return [
        {"key": key, "value": _value(value)} for key, value in values.items() if value is not None
    ]


def span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start: datetime,
    end: datetime,
    values: dict[str, Any],
    *,
    kind: int = SPAN_KIND_INTERNAL,
    status: tuple[int, str | None] = (STATUS_UNSET, None),
    events: list[dict[str, Any]] | None = None,
    links: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One OTLP/JSON span (its end is never before its start)."""
    built: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": nanos(start),
        "endTimeUnixNano": nanos(max(start, end)),
        "attributes": attributes(values),
    }
    if parent:
        built["parentSpanId"] = parent
    if events:
        built["events"] = events
    if links:
        built["links"] = links
    code, message = status
    built["status"] = {"code": code, **({"message": message} if message else {})}
    return built
