"""JSON text kept up to date as a value changes, so saving it costs a join, not an encode.

The checkpoint is rewritten after every stage and holds maps that grow with the run
(the context, the last outcome and the attempts of every node, the path). Encoding them
whole each time made a run's checkpoint cost grow with the square of its length. These
containers keep the JSON text of each member next to the member, re-encoded only when
that member is written; `json()` joins the texts.

    RawJSON      a str that already is JSON text; `encode` inserts it unchanged
    JsonMembers  the member texts of an object, kept beside its values
    JsonObject   a dict (str keys) that keeps its members' JSON
    JsonArray    a list that keeps its items' JSON
    encode       JSON text of a value that may hold the three above

All text is ASCII (non-ASCII characters are escaped), as `json.dumps` writes by default.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, SupportsIndex, TypeVar

V = TypeVar("V")

_encoder = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class RawJSON(str):
    """Text that already is JSON; `encode` inserts it as it is."""

    __slots__ = ()


def dumps(value: Any) -> str:
    """Compact, ASCII-only JSON text of a plain value (RawJSON and the containers too)."""
    if isinstance(value, RawJSON):
        return str(value)
    if isinstance(value, (JsonObject, JsonArray)):
        return value.json()
    return _encoder.encode(value)


def encode(value: Any) -> str:
    """JSON text of `value`; dicts are walked so that the containers inside are joined."""
    if isinstance(value, dict) and not isinstance(value, JsonObject):
        return "{" + ",".join(f"{_encoder.encode(str(k))}:{encode(v)}"
                              for k, v in value.items()) + "}"
    return dumps(value)


def ascii_json(text: str, value: Any) -> str:
    """`text` (the JSON of `value`, possibly with raw non-ASCII) as ASCII-only JSON."""
    return text if text.isascii() else _encoder.encode(value)


class JsonMembers:
    """The `"key":value` texts of an object's members, in insertion order, as dicts
    order their keys. A list, not a dict's values: joining a list costs half as much."""

    __slots__ = ("_holes", "_index", "_texts")

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self._texts: list[str] = []  # "" where a member was deleted
        self._holes = 0  # deleted members, dropped at the next json()

    def set(self, key: str, text: str) -> None:
        """Set the member `key` to `text` (the value's JSON)."""
        member = f"{_encoder.encode(key)}:{text}"
        position = self._index.get(key)
        if position is None:
            self._index[key] = len(self._texts)
            self._texts.append(member)
        else:
            self._texts[position] = member

    def delete(self, key: str) -> None:
        position = self._index.pop(key, None)
        if position is not None:
            self._texts[position] = ""
            self._holes += 1

    def clear(self) -> None:
        self._index.clear()
        self._texts.clear()
        self._holes = 0

    def copy(self) -> JsonMembers:
        twin = JsonMembers()
        twin._index = dict(self._index)
        twin._texts = list(self._texts)
        twin._holes = self._holes
        return twin

    def json(self) -> RawJSON:
        if self._holes:  # the index lists the live keys in the order of their positions
            self._texts = [self._texts[position] for position in self._index.values()]
            self._index = {key: position for position, key in enumerate(self._index)}
            self._holes = 0
        return RawJSON("{" + ",".join(self._texts) + "}")


class JsonObject(dict[str, V]):
    """A dict with str keys that keeps the `"key":value` JSON of each member.

    A real dict (reads cost what dict reads cost, `json.dumps` takes it); every method
    that writes is overridden to keep the texts in step.
    """

    __slots__ = ("_members",)

    def __init__(self, values: Mapping[str, V] | Iterable[tuple[str, V]] = (), /) -> None:
        super().__init__()
        self._members = JsonMembers()
        self.update(values)

    def __setitem__(self, key: str, value: V) -> None:
        if not isinstance(key, str):
            raise TypeError(f"JSON object keys are strings, not {type(key).__name__}")
        self._members.set(key, dumps(value))
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._members.delete(key)

    def update(self, *args: Any, **kwargs: V) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> JsonObject[V]:  # type: ignore[override,misc]
        self.update(other)
        return self

    def setdefault(self, key: str, default: V = None) -> V:  # type: ignore[assignment]
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key: str, *default: Any) -> Any:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, V]:
        key, value = super().popitem()
        self._members.delete(key)
        return key, value

    def clear(self) -> None:
        super().clear()
        self._members.clear()

    def copy(self) -> JsonObject[V]:
        twin: JsonObject[V] = JsonObject()
        dict.update(twin, self)
        twin._members = self._members.copy()
        return twin

    def __repr__(self) -> str:
        return f"JsonObject({dict(self)!r})"

    def json(self) -> RawJSON:
        return self._members.json()


class JsonArray(list[V]):
    """A list that keeps the JSON text of each item; every method that writes is
    overridden to keep the texts in step."""

    __slots__ = ("_texts",)

    def __init__(self, items: Iterable[V] = (), /) -> None:
        super().__init__(items)
        self._texts: list[str] = [dumps(item) for item in self]

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        self._resync()

    def __delitem__(self, index: Any) -> None:
        super().__delitem__(index)
        self._resync()

    def append(self, value: V) -> None:
        super().append(value)
        self._texts.append(dumps(value))

    def extend(self, values: Iterable[V]) -> None:
        items = list(values)
        super().extend(items)
        self._texts.extend(dumps(item) for item in items)

    def __iadd__(self, values: Iterable[V]) -> JsonArray[V]:  # type: ignore[override,misc]
        self.extend(values)
        return self

    def __imul__(self, count: SupportsIndex) -> JsonArray[V]:
        super().__imul__(count)
        self._resync()
        return self

    def insert(self, index: SupportsIndex, value: V) -> None:
        super().insert(index, value)
        self._texts.insert(index, dumps(value))

    def pop(self, index: SupportsIndex = -1) -> V:
        value = super().pop(index)
        self._texts.pop(index)
        return value

    def remove(self, value: V) -> None:
        super().remove(value)
        self._resync()

    def clear(self) -> None:
        super().clear()
        self._texts.clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        super().sort(*args, **kwargs)
        self._resync()

    def reverse(self) -> None:
        super().reverse()
        self._texts.reverse()

    def _resync(self) -> None:
        """After an edit by index or slice: rare (a paused run cuts its path back)."""
        self._texts = [dumps(item) for item in self]

    def __repr__(self) -> str:
        return f"JsonArray({list(self)!r})"

    def json(self) -> RawJSON:
        return RawJSON("[" + ",".join(self._texts) + "]")
