"""The driver path binds and reads ``UTCDateTime`` exactly as Core does on SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.store import direct
from supervisor.store.tables import UTCDateTime

_CORE_BIND = UTCDateTime()._cached_bind_processor(direct._DIALECT)
_CORE_RESULT = UTCDateTime()._cached_result_processor(direct._DIALECT, None)
_offsets = st.integers(min_value=-23 * 60, max_value=23 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


_EARLIEST = datetime(1, 1, 2)  # noqa: DTZ001 (hypothesis bounds are naive; offsets added)
_LATEST = datetime(9999, 12, 30)  # noqa: DTZ001


@given(st.datetimes(min_value=_EARLIEST, max_value=_LATEST, timezones=_offsets))
def test_a_datetime_is_bound_and_read_back_as_core_does(value: datetime) -> None:
    assert _CORE_BIND is not None and _CORE_RESULT is not None
    text = direct._utc_text(value)
    assert text == _CORE_BIND(value)
    back, core = direct._utc_datetime(text), _CORE_RESULT(text)
    assert core is not None
    assert back == core == value
    assert back.tzinfo is UTC and core.utcoffset() == timedelta(0)


@pytest.mark.parametrize("text", ["2026-12-05 09:30:00", "2026-12-05", "2026-12-05T09:30:00+02:00"])
def test_other_stored_forms_read_as_core_reads_them(text: str) -> None:
    assert _CORE_RESULT is not None
    core = _CORE_RESULT(text)
    assert core is not None
    assert direct._utc_datetime(text) == core
    assert direct._utc_datetime(text).utcoffset() == core.utcoffset()


def test_a_naive_datetime_is_refused_as_core_refuses_it() -> None:
    assert _CORE_BIND is not None
    with pytest.raises(ValueError, match="timezone-aware"):
        direct._utc_text(datetime(2026, 12, 5))  # noqa: DTZ001
    with pytest.raises(ValueError, match="timezone-aware"):
        _CORE_BIND(datetime(2026, 12, 5))  # noqa: DTZ001


def test_the_hot_statements_use_the_one_call_processors() -> None:
    from supervisor.store import repository

    statement = direct.DirectStatement(repository._SELECT_PROPOSAL)
    assert direct._utc_datetime in [process for _, process in statement._results]
