"""The review's time-range inputs: an ISO time or a relative ``30m``/``2h``/``7d``."""

from __future__ import annotations

import re
from datetime import datetime

from textual.widgets import Input

from supervisor.analysis.analyzer import parse_since

_RELATIVE = re.compile(r"^\d+(?:\.\d+)?\s*[smhdw]$")


def is_relative(text: str) -> bool:
    """True for a relative bound such as ``30m`` (it depends on the anchor)."""
    return _RELATIVE.match(text.strip().lower()) is not None


def parse_bound(text: str, anchor: datetime) -> datetime | None:
    """A time-range bound: ``None`` when blank, relative bounds count back from ``anchor``.

    Raises:
        ValueError: neither an ISO-8601 time nor a relative duration.
    """
    if not text.strip():
        return None
    return parse_since(text, now=anchor)


class TimeBoundInput(Input):
    """One end of the time range; shows ``-invalid`` while its text does not parse."""

    DEFAULT_CSS = """
    TimeBoundInput {
        width: 1fr;
    }
    TimeBoundInput.-invalid {
        border: tall $error;
    }
    """
