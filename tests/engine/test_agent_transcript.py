"""An agent stage's `response.md`: every turn, numbered, in the words it was sent (the
parts it is joined from: the store writes them, see tests/store/test_stage_text.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.engine.handlers.agent import _transcript


def _transcript_as_before(turns: list[tuple[str, str]]) -> str:
    """The transcript as it was written before it was built with one join."""
    parts = []
    for number, (role, text) in enumerate(turns, start=1):
        parts.append(f"## turn {number}: {role}\n\n{text}\n")
    return "\n".join(parts)


def test_a_transcript_numbers_its_turns() -> None:
    assert "".join(_transcript([("prompt", "do it"), ("reply", "done")])) == (
        "## turn 1: prompt\n\ndo it\n\n## turn 2: reply\n\ndone\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["prompt", "reply", "correction"]),
                          st.text(max_size=20)), max_size=6))
def test_a_transcript_is_what_it_was(turns: list[tuple[str, str]]) -> None:
    assert "".join(_transcript(turns)) == _transcript_as_before(turns)


def test_a_transcript_holds_the_reply_itself_not_a_copy() -> None:
    # the store encodes that object once for response.md and the reply's artifact
    reply = "é" * 70_000
    assert any(part is reply for part in _transcript([("prompt", "do it"), ("reply", reply)]))
