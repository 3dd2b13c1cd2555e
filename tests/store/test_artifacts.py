"""The artifact store encodes a value once and still names its file by the same content
address as before (SHA-256 of key, NUL and the JSON text): a run written by an earlier
version finds its values under the names it knows, and a value with a lone surrogate is
still written escaped."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.store.artifacts import ArtifactStore, json_string_bytes

# text with the characters that change the encoding: non-ASCII, astral, lone surrogates
TEXTS = st.text(alphabet=st.sampled_from(["a", "é", "→", "😀", "\ud800", "\udfff", '"', "\n"]),
                max_size=40)


def _address(key: str, value: object) -> str:
    """The content address as an earlier version computed it."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    digest = hashlib.sha256(f"{key}\0{text}".encode(errors="surrogatepass")).hexdigest()
    return digest[:16]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["response.s1", "a key", "ключ"]), TEXTS)
def test_a_value_is_named_by_its_content_address_and_reads_back(key: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(Path(tmp) / "artifacts")
        pointer = store.offload(key, {"reply": text})
        assert pointer.endswith(f"-{_address(key, {'reply': text})}.json")
        # what JSON gives back (a lone surrogate pair, escaped, reads back as one character)
        assert store.load(pointer) == json.loads(json.dumps({"reply": text}))


def test_a_value_with_a_lone_surrogate_is_written_escaped(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    pointer = store.offload("k", "half \ud800 of a pair")
    data = Path(pointer.removeprefix("file://")).read_bytes()
    assert data == b'"half \\ud800 of a pair"'


def test_a_value_is_written_as_its_compact_utf8_json(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    pointer = store.offload("k", {"text": "é → 😀"})
    data = Path(pointer.removeprefix("file://")).read_bytes()
    assert data == '{"text":"é → 😀"}'.encode()


# every character a JSON string escapes, and others around them
ESCAPED = st.text(alphabet=st.sampled_from(
    [chr(code) for code in range(0x20)] + ['"', "\\", "/", "\x7f", "a", "é", "\u2028", "😀",
                                            "\ud800"]), max_size=60)


@settings(max_examples=400, deadline=None)
@given(ESCAPED)
def test_a_strings_json_bytes_are_the_encoders(text: str) -> None:
    try:
        expected: bytes | None = json.dumps(text, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        expected = None  # a lone surrogate: offload() escapes it instead
    assert json_string_bytes(text) == expected


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["response.s1", "a key", "ключ"]), ESCAPED)
def test_offload_text_writes_what_offload_writes(key: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        old, new = ArtifactStore(Path(tmp) / "old"), ArtifactStore(Path(tmp) / "new")
        old_path = Path(old.offload(key, text).removeprefix("file://"))
        new_path = Path(new.offload_text(key, text).removeprefix("file://"))
        assert new_path.name == old_path.name
        assert new_path.read_bytes() == old_path.read_bytes()


def test_relocate_re_points_every_pointer_of_a_moved_store_and_keeps_everything_else(
        tmp_path: Path) -> None:
    old, new = ArtifactStore(tmp_path / "old"), ArtifactStore(tmp_path / "new")
    moved = old.offload("big", "x" * 10)
    new.offload("big", "x" * 10)  # the same content: the same file name here
    missing = old.offload("gone", "y")  # no such file here: left as it is
    value = {"a": moved, "b": [moved, {"c": missing}, "file://not-a-pointer", 3],
             "d": "file:/almost", "e": None, "f": "plain"}
    here = "file://" + str(new.values_dir / moved.rsplit("/", 1)[-1])
    assert new.relocate(value) == {
        "a": here, "b": [here, {"c": missing}, "file://not-a-pointer", 3],
        "d": "file:/almost", "e": None, "f": "plain"}
