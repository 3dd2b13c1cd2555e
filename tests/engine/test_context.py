"""The run context (SPEC §3): dotted reads, artifact offload, forks, snapshots."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.engine.context import OFFLOAD_THRESHOLD, ArtifactError, ArtifactStore, Context
from delivery.errors import RunError
from delivery.lang.conditions import parse_condition
from delivery.lang.paths import MISSING

BIG_TEXT = "x" * (OFFLOAD_THRESHOLD + 1)


def big_list() -> list[dict[str, Any]]:
    return [{"name": f"item-{i}", "body": "y" * 1000} for i in range(120)]


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "run" / "artifacts")


# -- reading -------------------------------------------------------------------------


def test_get_reads_a_stored_dotted_key() -> None:
    assert Context({"pr.state": "open"}).get("pr.state") == "open"


def test_get_accepts_the_context_prefix() -> None:
    assert Context({"pr.state": "open"}).get("context.pr.state") == "open"


def test_get_walks_into_a_list_by_index() -> None:
    context = Context({"issues": [{"title": "A"}, {"title": "B"}]})
    assert context.get("issues.1.title") == "B"


def test_length_counts_list_items_and_string_characters() -> None:
    context = Context({"issues": [1, 2, 3], "name": "abcd"})
    assert (context.get("issues.length"), context.get("name.length")) == (3, 4)


def test_get_walks_into_a_json_text_value() -> None:
    assert Context({"review": '{"findings": [{"severity": "high"}]}'}).get(
        "review.findings.0.severity"
    ) == "high"


def test_get_returns_the_default_for_an_absent_key() -> None:
    assert Context({"a": 1}).get("b.c", "fallback") == "fallback"


def test_lookup_returns_missing_for_an_absent_key() -> None:
    assert Context({"issues": [1]}).lookup("issues.5") is MISSING


def test_lookup_returns_a_stored_null_as_none() -> None:
    assert Context({"nothing": None}).lookup("nothing") is None


def test_contains_is_true_for_paths_into_values() -> None:
    context = Context({"issues": [{"title": "A"}]})
    assert "issues.0.title" in context
    assert "issues.1" not in context


def test_conditions_evaluate_against_lookup() -> None:
    context = Context({"pr.state": "MERGED", "issues": [1, 2]})
    assert parse_condition("context.pr.state = MERGED && issues.length > 1").evaluate(
        context.lookup
    )


def test_an_exact_key_wins_over_walking_into_a_shorter_key() -> None:
    context = Context({"pr": {"state": "draft"}, "pr.state": "open"})
    assert context.get("pr.state") == "open"


# -- writing -------------------------------------------------------------------------


def test_set_stores_under_the_key_without_the_context_prefix() -> None:
    context = Context()
    context.set("context.outcome", "succeeded")
    assert context.keys() == ["outcome"]


def test_set_rejects_a_value_that_is_not_json_naming_the_key() -> None:
    with pytest.raises(TypeError, match=r"'bad\.key'"):
        Context().set("bad.key", {1, 2})


def test_set_rejects_nan() -> None:
    with pytest.raises(TypeError, match="'ratio'"):
        Context().set("ratio", float("nan"))


def test_set_keeps_a_private_copy_of_the_value() -> None:
    value = {"list": [1]}
    context = Context({"v": value})
    value["list"].append(2)
    assert context.get("v") == {"list": [1]}


def test_get_returns_a_copy_that_callers_may_mutate() -> None:
    context = Context({"v": [1]})
    context.get("v").append(2)
    assert context.get("v") == [1]


def test_update_sets_every_key() -> None:
    context = Context()
    context.update({"a": 1, "b.c": "x"})
    assert (context.get("a"), context.get("b.c")) == (1, "x")


def test_delete_removes_exactly_that_key() -> None:
    context = Context({"pr": "x", "pr.state": "open"})
    context.delete("pr")
    assert context.keys() == ["pr.state"]


def test_delete_of_an_absent_key_is_ignored() -> None:
    context = Context({"a": 1})
    context.delete("nope")
    assert context.keys() == ["a"]


# -- artifact offload ----------------------------------------------------------------


def test_store_directory_is_created_only_when_a_value_is_offloaded(
    store: ArtifactStore,
) -> None:
    Context({"small": "x"}, artifacts=store)
    assert not store.root.exists()


def test_a_value_over_the_threshold_is_stored_as_a_pointer(store: ArtifactStore) -> None:
    context = Context({"log": BIG_TEXT}, artifacts=store)
    pointer = context.snapshot()["log"]
    assert ArtifactStore.is_pointer(pointer)
    path = Path(pointer.removeprefix("file://"))
    assert path.is_file() and path.is_relative_to(store.root / "values")
    assert path.read_text(encoding="utf-8") == BIG_TEXT  # a text, stored as itself


def test_a_value_at_the_threshold_stays_inline(store: ArtifactStore) -> None:
    exact = "x" * (OFFLOAD_THRESHOLD - 2)  # plus two quote characters
    context = Context({"log": exact}, artifacts=store)
    assert context.snapshot()["log"] == exact


def test_without_a_store_large_values_stay_inline() -> None:
    assert Context({"log": BIG_TEXT}).snapshot()["log"] == BIG_TEXT


def test_get_reads_an_offloaded_value_transparently(store: ArtifactStore) -> None:
    assert Context({"log": BIG_TEXT}, artifacts=store).get("log") == BIG_TEXT


def test_paths_walk_into_an_offloaded_value(store: ArtifactStore) -> None:
    context = Context({"items": big_list()}, artifacts=store)
    assert context.get("items.7.name") == "item-7"
    assert context.get("items.length") == 120


@pytest.mark.parametrize("key", ["../../x", "/etc/passwd", "a/../../../b", "..", "\\..\\x", ""])
def test_an_artifact_file_name_never_escapes_the_store(store: ArtifactStore, key: str) -> None:
    pointer = store.offload(key, BIG_TEXT)
    path = Path(pointer.removeprefix("file://")).resolve()
    assert path.parent == (store.root / "values").resolve()
    assert store.load(pointer) == BIG_TEXT


def test_keys_that_sanitize_alike_get_different_files(store: ArtifactStore) -> None:
    assert store.offload("a/b", 1) != store.offload("a_b", 1)


def test_setting_a_key_again_keeps_the_old_pointer_readable(store: ArtifactStore) -> None:
    context = Context({"log": BIG_TEXT}, artifacts=store)
    old = context.snapshot()["log"]
    context.set("log", BIG_TEXT + "more")
    assert context.snapshot()["log"] != old
    assert store.load(old) == BIG_TEXT


@pytest.mark.parametrize(
    "pointer",
    ["file:///etc/passwd", "file://{root}/values/../../escape.json", "file://relative/x.json"],
)
def test_loading_a_pointer_outside_the_store_fails(store: ArtifactStore, pointer: str) -> None:
    store.offload("k", BIG_TEXT)
    with pytest.raises(ArtifactError, match="outside"):
        store.load(pointer.format(root=store.root))


def test_loading_a_missing_artifact_fails_as_a_run_error(store: ArtifactStore) -> None:
    pointer = store.offload("k", BIG_TEXT)
    Path(pointer.removeprefix("file://")).unlink()
    store_again = ArtifactStore(store.root)
    with pytest.raises(RunError, match="does not exist"):
        store_again.load(pointer)


def test_a_forged_pointer_in_the_context_is_refused(store: ArtifactStore, tmp_path: Path) -> None:
    forged = f"file://{tmp_path}/elsewhere/values/x-0123456789abcdef.json"
    context = Context({"stolen": forged}, artifacts=store)
    with pytest.raises(ArtifactError):
        context.get("stolen")


def test_a_plain_string_starting_with_file_is_not_a_pointer() -> None:
    assert Context({"url": "file:///etc/passwd"}).get("url") == "file:///etc/passwd"
    assert not ArtifactStore.is_pointer(42)


def test_loaded_values_are_fresh_copies(store: ArtifactStore) -> None:
    pointer = store.offload("items", big_list())
    store.load(pointer).clear()
    assert len(store.load(pointer)) == 120


# -- snapshots and forks -------------------------------------------------------------


def test_snapshot_round_trips_through_json(store: ArtifactStore) -> None:
    context = Context({"a": 1, "b.c": [True, None, "s"], "log": BIG_TEXT}, artifacts=store)
    restored = Context(json.loads(json.dumps(context.snapshot())), artifacts=store)
    assert restored.snapshot() == context.snapshot()
    assert restored.get("log") == BIG_TEXT


def test_snapshot_is_a_copy() -> None:
    context = Context({"v": [1]})
    context.snapshot()["v"].append(2)
    assert context.get("v") == [1]


def test_resolved_snapshot_replaces_pointers_with_values(store: ArtifactStore) -> None:
    context = Context({"a": 1, "log": BIG_TEXT}, artifacts=store)
    assert context.resolved_snapshot() == {"a": 1, "log": BIG_TEXT}


def test_resolved_later_is_the_snapshot_of_when_it_was_asked(store: ArtifactStore) -> None:
    context = Context({"a": 1, "log": BIG_TEXT, "gone": "soon"}, artifacts=store)
    later = context.resolved_later()
    context.set("a", 2)
    context.set("log", "short")
    context.delete("gone")
    assert later() == {"a": 1, "log": BIG_TEXT, "gone": "soon"}


def test_resolved_later_reads_the_store_only_when_called(store: ArtifactStore) -> None:
    context = Context({"log": BIG_TEXT}, artifacts=store)
    later = context.resolved_later()
    for path in store.values_dir.iterdir():
        path.write_text("rewritten", encoding="utf-8")  # what a read now finds
    assert later() == {"log": "rewritten"}


def test_a_forks_writes_do_not_leak_back() -> None:
    parent = Context({"a": 1, "nested": {"list": [1]}})
    child = parent.fork()
    child.set("a", 2)
    child.set("b", 3)
    child.delete("nested")
    assert parent.snapshot() == {"a": 1, "nested": {"list": [1]}}


def test_parent_writes_after_a_fork_do_not_reach_the_fork() -> None:
    parent = Context({"a": 1})
    child = parent.fork()
    parent.set("a", 5)
    assert child.get("a") == 1


def test_a_fork_shares_the_artifact_store(store: ArtifactStore) -> None:
    parent = Context({"log": BIG_TEXT}, artifacts=store)
    child = parent.fork()
    assert child.artifacts is store
    assert child.get("log") == BIG_TEXT


def test_changes_since_reports_added_and_changed_keys() -> None:
    context = Context({"same": 1, "changed": "old", "gone": 0})
    before = context.snapshot()
    context.update({"changed": "new", "added": [1]})
    context.delete("gone")
    assert context.changes_since(before) == {"changed": "new", "added": [1]}


def test_changes_since_tells_true_from_one() -> None:
    context = Context({"flag": 1})
    before = context.snapshot()
    context.set("flag", True)
    assert context.changes_since(before) == {"flag": True}


def test_changes_since_sees_a_new_offloaded_value(store: ArtifactStore) -> None:
    context = Context({"log": BIG_TEXT}, artifacts=store)
    before = context.snapshot()
    context.set("log", BIG_TEXT + "!")
    changed = context.changes_since(before)
    assert list(changed) == ["log"] and ArtifactStore.is_pointer(changed["log"])


_JSON_LEAVES = (st.none() | st.booleans() | st.integers() | st.floats()
                | st.integers(min_value=-(10**40), max_value=10**40) | st.text(max_size=40))
_VALUES = st.recursive(_JSON_LEAVES, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES)
def test_set_stores_what_a_json_round_trip_gives_and_refuses_what_json_cannot_hold(
        value: Any) -> None:
    # short scalars skip the encoding: they must end exactly as the encoded path does
    context = Context()
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        with pytest.raises(TypeError, match="not JSON-serializable"):
            context.set("k", value)
        assert "k" not in context.stored()
        return
    context.set("k", value)
    stored = context.stored()["k"]
    assert stored == json.loads(text) and type(stored) is type(json.loads(text))


def test_a_long_text_is_still_offloaded(store: ArtifactStore) -> None:
    context = Context(artifacts=store)
    context.set("big", "\u00e9" * (OFFLOAD_THRESHOLD // 2 + 1))  # 2 bytes a character
    assert ArtifactStore.is_pointer(context.stored()["big"])


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "é", "😀", '"', "\\", "\n", "\x00", "\x1f",
                                         "\ud800"]), min_size=1, max_size=8),
       st.integers(min_value=OFFLOAD_THRESHOLD - 8, max_value=OFFLOAD_THRESHOLD + 8))
def test_a_long_text_is_offloaded_when_its_json_is_over_the_threshold(unit: str,
                                                                      length: int) -> None:
    # the JSON's size decides (escapes count), and the text is stored as itself
    text = (unit * (length // len(unit) + 1))[:length]
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(Path(tmp) / "artifacts")
        context = Context(artifacts=store)
        context.set("big", text)
        stored = context.stored()["big"]
        encoded = json.dumps(text, ensure_ascii=False, separators=(",", ":"))
        if len(encoded.encode(errors="surrogatepass")) > OFFLOAD_THRESHOLD:
            assert stored == ArtifactStore(Path(tmp) / "oracle").offload_text(
                "big", text).replace("/oracle/", "/artifacts/")
            assert context.get("big") == json.loads(encoded)
        else:
            assert stored == text

