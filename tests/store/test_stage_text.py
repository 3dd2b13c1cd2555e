"""A stage file written from the parts it is joined from (a transcript: headers, prompt,
reply) holds what the joined text written whole does: masked as a whole, its UTF-8 made
part by part, a long non-ASCII reply encoded once for its response.md and its artifact."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.redact import Redactor
from delivery.store.artifacts import ArtifactStore
from delivery.store.files import stage_bytes, utf8
from delivery.store.runstore import RunDirectory

# units repeated into parts short and long (the long ones are remembered by utf8)
UNITS = st.sampled_from(["a", "é", "→", "😀", "\ud800", "\n", "x" * 7])
PARTS = st.lists(st.tuples(UNITS, st.sampled_from([1, 5, 70_000])).map(
    lambda unit_count: unit_count[0] * unit_count[1]), max_size=5)


@settings(max_examples=120, deadline=None)
@given(PARTS, st.integers(min_value=0, max_value=4))
def test_the_parts_bytes_are_those_of_the_text_joined(parts: list[str], again: int) -> None:
    if parts:
        utf8_or_none(parts[again % len(parts)])  # a remembered part, asked for again
    assert stage_bytes(parts) == "".join(parts).encode("utf-8", "backslashreplace")


def utf8_or_none(text: str) -> bytes | None:
    try:
        return utf8(text)
    except UnicodeEncodeError:
        return None


def test_a_remembered_texts_bytes_are_reused_and_no_other_texts() -> None:
    first, other = "é" * 70_000, "è" * 70_000  # long, not ASCII, the same length
    assert utf8(first) is utf8(first)
    assert utf8(other) == other.encode()
    assert utf8(first) == first.encode()


def test_a_secret_cut_across_two_parts_is_masked(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    redactor = Redactor(["s3cr3t-value"])
    run.write_stage_text("plan", 1, "response.md",
                         ["## turn 1: reply\n\ntoken=s3cr", "3t-value\n"], redactor=redactor)
    assert run.read_stage_file("plan", 1, "response.md") == "## turn 1: reply\n\ntoken=***\n"


def test_a_transcript_and_its_reply_artifact_hold_the_reply_as_written(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "run")
    redactor = Redactor([])
    reply = redactor.clean_text("Here → there.\n" * 10_000)  # long, not ASCII
    run.write_stage_text("plan", 1, "response.md",
                         ["## turn 1: prompt\n\n", "do it", "\n", "\n", "## turn 1: reply\n\n",
                          reply, "\n"], redactor=redactor)
    pointer = run.artifacts.offload_text("response.plan", reply)
    assert Path(pointer.removeprefix("file://")).read_bytes() == reply.encode()
    assert ArtifactStore(tmp_path / "run" / "artifacts").load(pointer) == reply
    assert run.read_stage_file("plan", 1, "response.md") == (
        f"## turn 1: prompt\n\ndo it\n\n## turn 1: reply\n\n{reply}\n")
