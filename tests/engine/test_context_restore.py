"""Context.restore counts the stored keys' prefixes in one pass (`prefix_counts`): the
counts and hidden keys are those the key-by-key `_count_prefixes` builds, and a restored
context goes on changing as one built by writes does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.engine.context import Context, prefix_counts

SEGMENTS = st.sampled_from(["", "a", "b", "response", "internal", "graph", "inputs", "goal",
                            "outcome", "current_node", "s1", "0", "x y"])
KEYS = st.lists(SEGMENTS, min_size=1, max_size=4).map(".".join)


def _key_by_key(keys: list[str]) -> Context:
    context = Context()
    for key in keys:
        context._count_prefixes(key, +1)
    return context


@settings(max_examples=300, deadline=None)
@given(st.lists(KEYS, unique=True, max_size=12), st.lists(st.tuples(st.booleans(), KEYS),
                                                          max_size=6))
def test_restore_counts_prefixes_as_key_by_key_counting_does(
        keys: list[str], changes: list[tuple[bool, str]]) -> None:
    children, hidden = prefix_counts(keys)
    oracle = _key_by_key(keys)
    assert children == oracle._children and hidden == oracle._hidden
    # and a restored context changes as the other does
    restored = Context.restore({key: 1 for key in keys})
    built = Context()
    built._values = {key: 1 for key in keys}
    built._children, built._hidden = oracle._children, oracle._hidden
    for is_set, key in changes:
        for context in (restored, built):
            if is_set:
                context.set(key, 2)
            else:
                context.delete(key)
    assert restored._children == built._children and restored._hidden == built._hidden
