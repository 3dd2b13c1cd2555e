"""The artifact store encodes a value once and still names its file by the same content
address as before (SHA-256 of key, NUL and the JSON text): a run written by an earlier
version finds its values under the names it knows, and a value with a lone surrogate is
still written escaped. A text is stored as itself, in UTF-8 (`.txt`), and reads back as
itself; the `.json` files earlier versions wrote for texts read as before."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.errors import ArtifactError
from delivery.store.artifacts import ArtifactStore

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


def _text_address(key: str, text: str) -> str:
    return hashlib.sha256(f"{key}\0{text}".encode()).hexdigest()[:16]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["response.s1", "a key", "ключ"]), ESCAPED)
def test_a_text_is_stored_as_its_utf8_and_reads_back_as_itself(key: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(Path(tmp) / "artifacts")
        pointer = store.offload_text(key, text)
        path = Path(pointer.removeprefix("file://"))
        assert ArtifactStore.is_pointer(pointer)
        try:
            data = text.encode()
        except UnicodeEncodeError:  # UTF-8 cannot hold a lone surrogate: escaped JSON
            assert path.name.endswith(f"-{_address(key, text)}.json")
            assert path.read_bytes() == json.dumps(text).encode()
            assert ArtifactStore(Path(tmp) / "artifacts").load(pointer) == json.loads(
                json.dumps(text))
            return
        assert path.name.endswith(f"-{_text_address(key, text)}.txt")
        assert path.read_bytes() == data
        assert ArtifactStore(Path(tmp) / "artifacts").load(pointer) == text


def test_a_text_written_as_json_by_an_earlier_version_reads_as_the_text(
        tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    pointer = store.offload("response.s1", "line one\n\"quoted\" → done")
    assert pointer.endswith(".json")  # what every text was stored as before
    assert ArtifactStore(tmp_path / "artifacts").load(pointer) == \
        'line one\n"quoted" → done'


def test_a_text_artifact_that_is_not_utf8_is_an_artifact_error(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    pointer = store.offload_text("k", "fine")
    Path(pointer.removeprefix("file://")).write_bytes(b"\xff\xfe broken")
    with pytest.raises(ArtifactError, match="cannot be read as UTF-8 text"):
        ArtifactStore(tmp_path / "artifacts").load(pointer)


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
