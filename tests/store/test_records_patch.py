"""Resume applies agent-state patches in place (`patch_in_place`): the same state as the
RFC 7396 merge (`merge_patch`) the records were written for, without copying the state
once per record."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.store.records import RunState, RunStatus, StageRecord, merge_patch, patch_in_place

KEYS = st.sampled_from(["cursors", "a", "b", "s1", "s2", "session"])
LEAVES = st.one_of(st.none(), st.integers(0, 3), st.text(max_size=3), st.booleans())
VALUES = st.recursive(LEAVES, lambda inner: st.dictionaries(KEYS, inner, max_size=4),
                      max_leaves=12)
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=4)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(OBJECTS, st.lists(OBJECTS, max_size=4))
def test_patching_in_place_gives_what_merging_gives(start: dict[str, Any],
                                                    patches: list[dict[str, Any]]) -> None:
    expected: Any = copy.deepcopy(start)
    for patch in patches:
        expected = merge_patch(expected, patch)
    got = copy.deepcopy(start)
    kept = copy.deepcopy(patches)
    for patch in patches:
        patch_in_place(got, patch)
    assert got == expected
    assert patches == kept  # the records' patches are not changed


def record(steps: int, patch: dict[str, Any]) -> StageRecord:
    return StageRecord(next_node=f"s{steps + 1}", steps=steps, status=RunStatus.RUNNING,
                       failure_reason="", path_from=steps - 1, path_add=[f"s{steps}"],
                       outcomes={}, attempts={}, answers_used=None, context_set={},
                       context_deleted=[], agent_patch=patch)


def test_a_resume_replays_cursor_patches_into_the_saved_cursors() -> None:
    state = RunState(run_id="r", next_node="s2", context={}, initial={}, path=["s1"],
                     agent_state={"cursors": {"s1": 1}})
    state.apply(record(2, {"cursors": {"s2": 1}}))
    state.apply(record(3, {"cursors": {"s3": 2, "s1": None}}))
    assert state.agent_state == {"cursors": {"s2": 1, "s3": 2}}
    assert state.path == ["s1", "s2", "s3"]
