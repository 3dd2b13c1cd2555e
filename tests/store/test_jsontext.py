"""The JSON-keeping containers: their text always equals a fresh encode of their value."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from delivery._jsontext import JsonArray, JsonObject, RawJSON, encode
from delivery.engine.context import ArtifactStore, Context


def fresh(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_an_object_keeps_its_text_through_every_kind_of_write() -> None:
    obj: JsonObject[Any] = JsonObject({"a": 1})
    obj["b"] = "two"
    obj["a"] = [1, {"x": None}]
    obj.update({"c": 3.5}, d=True)
    obj |= {"e": "é"}
    obj.setdefault("f", 0)
    obj.setdefault("a", "ignored")
    assert obj.pop("c") == 3.5
    assert obj.pop("missing", "default") == "default"
    del obj["b"]
    obj.popitem()
    assert json.loads(obj.json()) == fresh(dict(obj)) == {"a": [1, {"x": None}], "d": True,
                                                          "e": "é"}


def test_an_object_is_a_dict_that_json_dumps_accepts() -> None:
    obj: JsonObject[int] = JsonObject({"n": 1})
    assert isinstance(obj, dict)
    assert obj == {"n": 1}
    assert json.dumps(obj) == '{"n": 1}'


def test_a_copy_is_independent() -> None:
    obj: JsonObject[int] = JsonObject({"n": 1})
    twin = obj.copy()
    twin["n"] = 2
    assert (obj.json(), twin.json()) == ('{"n":1}', '{"n":2}')


def test_cleared_object_is_empty_json() -> None:
    obj: JsonObject[int] = JsonObject({"n": 1})
    obj.clear()
    assert obj.json() == "{}"


def test_a_non_string_key_is_refused() -> None:
    with pytest.raises(TypeError, match="keys are strings"):
        JsonObject()[1] = 2  # type: ignore[index]


def test_an_array_keeps_its_text_through_every_kind_of_write() -> None:
    arr: JsonArray[Any] = JsonArray(["a", "b"])
    arr.append("c")
    arr.extend(["d", "e"])
    arr += ["f"]
    arr.insert(0, "z")
    arr[1] = "A"
    arr[2:4] = ["x"]
    del arr[0]
    arr.remove("x")
    assert arr.pop() == "f"
    arr.reverse()
    arr.sort()
    arr *= 2
    assert json.loads(arr.json()) == list(arr) == ["A", "d", "e", "A", "d", "e"]
    arr[:] = arr[:1]
    assert arr.json() == '["A"]'
    arr.clear()
    assert arr.json() == "[]"


def test_random_edits_never_let_the_text_drift() -> None:
    rng = random.Random(7)
    obj: JsonObject[Any] = JsonObject()
    arr: JsonArray[Any] = JsonArray()
    for _ in range(2000):
        key = f"k{rng.randrange(30)}"
        value = rng.choice([rng.random(), "ü" * rng.randrange(3), [rng.randrange(9)], None])
        operation = rng.randrange(4)
        if operation == 0:
            obj[key] = value
            arr.append(value)
        elif operation == 1:
            obj.pop(key, None)
            if arr:
                del arr[rng.randrange(len(arr))]
        elif operation == 2:
            obj.setdefault(key, value)
            arr.insert(rng.randrange(len(arr) + 1), value)
        elif arr:
            arr[rng.randrange(len(arr))] = value
    assert json.loads(obj.json()) == fresh(dict(obj))
    assert json.loads(arr.json()) == fresh(list(arr))


def test_encode_joins_the_containers_and_inserts_raw_text() -> None:
    data = {"raw": RawJSON('{"already":"json"}'), "obj": JsonObject({"a": 1}),
            "arr": JsonArray(["x"]), "nested": {"plain": [1, 2], "inner": JsonObject()}}
    assert json.loads(encode(data)) == {"raw": {"already": "json"}, "obj": {"a": 1},
                                        "arr": ["x"], "nested": {"plain": [1, 2], "inner": {}}}


def test_encoded_text_is_ascii_even_for_non_ascii_and_lone_surrogates() -> None:
    data = {"obj": JsonObject({"name": "Zoë \ud800"}), "arr": JsonArray(["日本"])}
    text = encode(data)
    assert text.isascii()
    assert json.loads(text) == {"obj": {"name": "Zoë \ud800"}, "arr": ["日本"]}


def test_context_json_matches_its_snapshot_after_sets_deletes_and_forks(tmp_path: Path) -> None:
    context = Context({"goal": "g", "a.b": [1, 2]}, ArtifactStore(tmp_path))
    context.set("text", "naïve \ud83d")
    context.set("big", "x" * 200_000)  # offloaded: the snapshot holds the pointer
    context.set("a.b", {"c": 1})
    context.delete("goal")
    branch = context.fork()
    branch.set("only.in.branch", 1)
    assert json.loads(context.stored_json()) == context.snapshot()
    assert json.loads(branch.stored_json()) == branch.snapshot()
    assert context.stored_json().isascii()
    assert "only.in.branch" not in context.snapshot()


def test_a_large_value_with_a_lone_surrogate_is_offloaded_and_read_back(tmp_path: Path) -> None:
    context = Context(artifacts=ArtifactStore(tmp_path))
    value = "\ud800" + "y" * 200_000  # a reply's JSON may carry one (json.loads allows it)
    context.set("reply", value)
    assert ArtifactStore.is_pointer(context.snapshot()["reply"])
    assert context.get("reply") == value


def test_members_deleted_and_set_again_keep_dict_order() -> None:
    obj: JsonObject[int] = JsonObject({k: n for n, k in enumerate("abcdef")})
    del obj["b"]
    del obj["d"]
    obj["b"] = 9  # back at the end, as in a dict
    obj["a"] = 7  # in place
    assert obj.json() == '{"a":7,"c":2,"e":4,"f":5,"b":9}'
    del obj["f"]
    obj["g"] = 1
    assert json.loads(obj.json()) == dict(obj) and list(json.loads(obj.json())) == list(obj)
