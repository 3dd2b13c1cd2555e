"""The read-key cover's shortcuts (a written key whose first segment no read shares, a key
already found unread) give the masks its full table walk gives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from delivery.validation.availability import FREE, _Cover

SEGMENTS = st.sampled_from(["a", "b", "pr", "state", "web", "x1", "response", "failed"])
KEYS = st.lists(SEGMENTS, min_size=1, max_size=4).map(".".join)
WRITTEN = st.one_of(KEYS, KEYS.map(lambda key: f"*.{key}"), st.just(FREE))


@given(st.lists(KEYS, max_size=12, unique=True), st.lists(WRITTEN, max_size=12))
def test_masks_are_the_table_walks(reads: list[str], written: list[str]) -> None:
    cover = _Cover([FREE, *reads])
    for key in written * 2:  # the second time through, the unread ones are remembered
        assert cover.mask(key) == cover._mask(key)
    expected = 0
    for key in written:
        expected |= cover._mask(key)
    assert cover.masks(written) == expected
