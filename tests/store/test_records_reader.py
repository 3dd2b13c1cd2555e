"""A stage record read in one pass (`records._as_written`) is the record the checking reader
gives, and whatever the fast pass does not take is left to that reader (which names the
wrong field): old and new agree on every input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.errors import RunStoreError
from delivery.store.records import RunStatus, StageRecord, _as_written

SCALARS = (st.none() | st.booleans() | st.integers(-2, 5) | st.floats(allow_nan=False)
           | st.text(max_size=4))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=5)
NAMES = st.text(max_size=3)
# each field: as a stage writes it, or (less often) any JSON value
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "next_node": st.none() | NAMES,
    "steps": st.integers(0, 9),
    "status": st.sampled_from([s.value for s in RunStatus]),
    "failure_reason": st.text(max_size=4),
    "path_from": st.integers(0, 9),
    "path_add": st.lists(NAMES, max_size=3),
    "outcomes": st.dictionaries(NAMES, NAMES, max_size=2),
    "attempts": st.dictionaries(NAMES, st.integers(0, 3), max_size=2),
    "answers_used": st.none() | st.dictionaries(NAMES, st.integers(0, 3), max_size=2),
    "context_set": st.dictionaries(NAMES, JSON, max_size=2),
    "context_deleted": st.lists(NAMES, max_size=2),
    "agent_patch": st.none() | st.dictionaries(NAMES, JSON, max_size=2),
    "agent_state": st.none() | st.dictionaries(NAMES, JSON, max_size=2),
    "usage": st.none() | st.dictionaries(NAMES, st.integers(0, 9), max_size=2),
    "agent_states": st.none() | st.dictionaries(NAMES, JSON, max_size=2),
}


@st.composite
def events(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 30)) == 0:
        return draw(JSON)  # not even an object
    event: dict[str, Any] = {"seq": 3, "ts": "t", "type": "state", "prev": "0" * 64}
    for name, written in FIELDS.items():
        choice = draw(st.integers(0, 9))
        if choice == 0:
            continue  # left out
        event[name] = draw(JSON) if choice == 1 else draw(written)
    return event


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(events())
def test_the_one_pass_reader_agrees_with_the_checking_reader(event: Any) -> None:
    try:
        expected: StageRecord | None = StageRecord._read(event, "line 3")
    except RunStoreError:
        expected = None
    fast = _as_written(event)
    if expected is None:
        assert fast is None  # left to the reader, which says what is wrong
    elif fast is not None:
        assert fast == expected
        assert type(fast.status) is RunStatus
    got = StageRecord.from_fields(event, "line 3") if expected is not None else None
    assert got == expected


def test_a_record_as_a_stage_writes_it_takes_the_one_pass_reader() -> None:
    record = StageRecord(next_node="b", steps=2, status=RunStatus.RUNNING, failure_reason="",
                         path_from=1, path_add=["a"], outcomes={"a": "succeeded"},
                         attempts={"a": 1}, answers_used=None, context_set={"k": [1]},
                         context_deleted=["old"], usage={"input": 3})
    assert _as_written(record.to_fields()) == record
