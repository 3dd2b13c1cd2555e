"""Every event's `ts`: UTC to the microsecond, as datetime's isoformat writes it with `Z`
(the text of the second is remembered: the stamp must not tell that it is)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.store.eventlog import stamp_of, utc_stamp

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# from the epoch to the year 9999 (what isoformat writes with four digits)
INSTANTS = st.integers(min_value=0, max_value=253_402_300_798_999_999_999)


def _as_datetime_writes_it(nanoseconds: int) -> str:
    moment = EPOCH + timedelta(microseconds=nanoseconds // 1000)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


@settings(max_examples=400, deadline=None)
@given(st.lists(INSTANTS, min_size=1, max_size=6))
def test_a_stamp_is_what_datetime_writes_whatever_came_before(instants: list[int]) -> None:
    for nanoseconds in instants:  # seconds remembered in turn, and the same one again
        assert stamp_of(nanoseconds) == _as_datetime_writes_it(nanoseconds)
        assert stamp_of(nanoseconds + 1) == _as_datetime_writes_it(nanoseconds + 1)


def test_the_stamp_now_is_the_time_now() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    stamp = utc_stamp()
    after = datetime.now(UTC)
    assert before <= datetime.fromisoformat(stamp.replace("Z", "+00:00")) <= after
    assert stamp.endswith("Z") and len(stamp) == len("2026-12-03T10:42:45.468777Z")
