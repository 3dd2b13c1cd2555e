"""The run context (SPEC §3): a flat map from dotted keys to JSON values.

`context.X` and `X` name the same key. Reads follow `delivery.lang.paths`: the longest stored
key that prefixes the path is walked into (a number picks a list item, `length` counts).
A value whose JSON is over OFFLOAD_THRESHOLD bytes is written to the run's artifact store
and the map holds a `file://` pointer instead; every read resolves pointers, also when a
path walks into one. Stored values are private copies: callers never share them.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final

from delivery.errors import ArtifactError as ArtifactError
from delivery.lang.paths import MISSING, normalize_key, resolve, string_form
from delivery.redact import Redactor
from delivery.store.artifacts import POINTER_PREFIX as POINTER_PREFIX
from delivery.store.artifacts import ArtifactStore as ArtifactStore

OFFLOAD_THRESHOLD: Final = 100 * 1024  # bytes of serialized JSON

# The engine's own keys, which a preamble never lists (the goal has its own line).
# `folder.` is a foreach run's alias of its own `<f>.` keys (SPEC §8.1): listed once, as `<f>.`
HIDDEN_PREFIXES: Final = ("internal.", "graph.", "response.", "inputs.", "thread.", "current_",
                          "folder.")
HIDDEN_KEYS: Final = frozenset({"goal", "outcome", "failure_reason", "failure_class",
                                "failure_signature", "preferred_label", "last_stage",
                                "last_response", "current_node", "current_work"})


def is_hidden_key(key: str) -> bool:
    """One of the engine's own keys (HIDDEN_KEYS, HIDDEN_PREFIXES)."""
    return key in HIDDEN_KEYS or key.startswith(HIDDEN_PREFIXES)

# Values stored as they are: immutable, and exactly what a JSON round trip gives back.
_IMMUTABLE: Final = frozenset({str, int, float, bool, type(None)})
# Values that are valid JSON and short, checked by type and size alone (not float: NaN is
# refused; not any int: one past Python's digit limit cannot be written).
_SHORT_SAFE: Final = frozenset({bool, type(None)})
_SMALL_INT: Final = 10**18
# A str this long cannot reach OFFLOAD_THRESHOLD as JSON: each character is at most 6 bytes
# escaped (\uXXXX), 2 for the quotes.
_SHORT_TEXT: Final = (OFFLOAD_THRESHOLD - 2) // 6


def _size(text: str) -> int:
    """Bytes of `text` as UTF-8 (a lone surrogate counted as three)."""
    return len(text) if text.isascii() else len(text.encode(errors="surrogatepass"))


def prefix_counts(keys: Collection[str]) -> tuple[dict[str, dict[str, int]], set[str]]:
    """What Context._count_prefixes(key, +1) for each of `keys` builds (the prefix counts
    and the hidden keys), in one pass: the dots found in place rather than each key split
    and every prefix joined again — Context.restore of a 5,000-stage run's context took
    10-19 ms key by key."""
    hidden = {key for key in keys if key in HIDDEN_KEYS or key.startswith(HIDDEN_PREFIXES)}
    children: dict[str, dict[str, int]] = {}
    for key in keys:
        prefix, start = "", 0
        while True:
            dot = key.find(".", start)
            name = key[start:] if dot < 0 else key[start:dot]
            names = children.get(prefix)
            if names is None:
                names = children[prefix] = {}
            names[name] = names.get(name, 0) + 1
            if dot < 0:
                break
            prefix, start = key[:dot], dot + 1
    return children, hidden


# One encoder for every write: json.dumps with options builds a new one on each call.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


class Context:
    """The flat context of one run (or one parallel branch, see fork())."""

    def __init__(
        self, values: Mapping[str, Any] | None = None, artifacts: ArtifactStore | None = None,
        *, redactor: Redactor | None = None,
    ) -> None:
        self.artifacts = artifacts
        # Secrets never reach the context (SPEC §14): every value is redacted as it is set,
        # so the checkpoint, templates and prompts built from it are clean too.
        self.redactor = redactor
        self._values: dict[str, Any] = {}
        # keys written and deleted since take_changes(): a stage record saves only those
        self._changed: set[str] = set()
        self._deleted: set[str] = set()
        # dotted prefix -> {child name: number of keys under it}, kept up to date on every
        # write so that a template's nested view costs nothing to build
        self._children: dict[str, dict[str, int]] = {}
        # the stored keys that are the engine's own (is_hidden_key), kept with the prefix
        # counts: a preamble picks the newest other keys before every agent stage, and
        # most of the newest are the engine's (response.<node>, one per stage)
        self._hidden: set[str] = set()
        if values:
            self.update(values)

    @classmethod
    def restore(cls, stored: dict[str, Any], artifacts: ArtifactStore | None = None, *,
                redactor: Redactor | None = None) -> Context:
        """The context whose stored map is `stored` — what `stored()` gave, read back from
        the run store: plain JSON, large values already pointers. Taken over as it is (not
        copied, not re-encoded): a resume of a long run starts without a pass per key."""
        context = cls(artifacts=artifacts, redactor=redactor)
        context._values = stored
        context._children, context._hidden = prefix_counts(stored)
        return context

    # -- reading ---------------------------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        value = self.lookup(key)
        return default if value is MISSING else value

    def lookup(self, key: str) -> Any:
        """The value at a dotted path (a private copy), or paths.MISSING."""
        value = self.peek(key)
        return copy.deepcopy(value) if isinstance(value, (dict, list)) else value

    def peek(self, key: str) -> Any:
        """Like lookup() but may return stored objects themselves: do not mutate them."""
        return resolve(self._values, key, self._deref)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.peek(key) is not MISSING

    def keys(self) -> list[str]:
        return list(self._values)

    def child_names(self, prefix: str) -> list[str]:
        """The names right under `prefix` (`inputs` -> the run's input names), from the
        prefix index: no pass over the keys."""
        return list(self._children.get(prefix, {}))

    def newest_shown_keys(self, limit: int, scan: int) -> list[str]:
        """The `limit` newest keys (first written last) that are not the engine's own,
        among the `scan` newest keys, sorted: `preamble.visible_keys` of `stored()`,
        without classifying each key again."""
        # iterators in C, no bytecode per key: the engine's own keys are most of the newest
        # (a response.<node> a stage), so the whole window is usually walked
        newest = itertools.islice(reversed(self._values), scan)
        shown = itertools.filterfalse(self._hidden.__contains__, newest)
        return sorted(itertools.islice(shown, limit))

    # -- writing ---------------------------------------------------------------------

    def set(self, key: str, value: Any) -> None:
        key = normalize_key(key)
        if self.redactor is not None:
            # ...and NUL or lone surrogates (from a reply's JSON, say) would break a later
            # script's command line or a stage file: replaced by U+FFFD
            value = self.redactor.value(value, clean=True)
        kind = type(value)
        if kind in _SHORT_SAFE or (kind is str and len(value) <= _SHORT_TEXT) or (
                kind is int and -_SMALL_INT < value < _SMALL_INT):
            # valid JSON and too short to offload: most of what a stage sets (outcome,
            # failure_reason, last_stage...) needs no encoding to tell
            stored = value
        elif kind is str and self.artifacts is not None and len(value) > OFFLOAD_THRESHOLD:
            # offloaded whatever its JSON (at least a byte a character): a long reply is
            # written without the encoder's pass and without measuring it first
            stored = self.artifacts.offload_text(key, value)
        else:
            try:
                text = _dumps(value)
            except (TypeError, ValueError) as err:
                problem = f"context key {key!r}: value is not JSON-serializable ({err})"
                raise TypeError(problem) from None
            if self.artifacts is not None and _size(text) > OFFLOAD_THRESHOLD:
                # a text (its JSON over the limit for its escapes) is stored as itself
                stored = (self.artifacts.offload_text(key, value) if kind is str
                          else self.artifacts.offload(key, value, text))
            elif kind in _IMMUTABLE:
                stored = value  # nothing to copy
            else:
                stored = json.loads(text)
        if key not in self._values:
            self._count_prefixes(key, +1)
        self._values[key] = stored
        self._changed.add(key)
        self._deleted.discard(key)

    def _count_prefixes(self, key: str, change: int) -> None:
        if is_hidden_key(key):
            if change > 0:
                self._hidden.add(key)
            else:
                self._hidden.discard(key)
        segments = key.split(".")
        for cut in range(len(segments)):
            names = self._children.setdefault(".".join(segments[:cut]), {})
            names[segments[cut]] = names.get(segments[cut], 0) + change
            if names[segments[cut]] <= 0:
                del names[segments[cut]]

    def update(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            self.set(key, value)

    def delete(self, key: str) -> None:
        """Remove the stored key (exactly that key); absent keys are ignored."""
        key = normalize_key(key)
        if key in self._values:
            del self._values[key]
            self._changed.discard(key)
            self._deleted.add(key)
            self._count_prefixes(key, -1)

    # -- copies ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The stored flat map, pointers kept as pointers; JSON-serializable."""
        return copy.deepcopy(self._values)

    def stored(self) -> Mapping[str, Any]:
        """The stored flat map itself, read-only and not copied: for serialising at once."""
        return MappingProxyType(self._values)

    def take_changes(self) -> tuple[dict[str, Any], list[str]]:
        """(the keys set since the last call with their stored values, the keys deleted),
        then forget them: what a stage record holds. The values are the stored objects
        themselves (encode them at once, do not mutate them)."""
        changed = {key: self._values[key] for key in self._changed}
        deleted = sorted(self._deleted)
        self._changed.clear()
        self._deleted.clear()
        return changed, deleted

    def resolved_snapshot(self) -> dict[str, Any]:
        return _resolved(self._values, self._deref)

    def resolved_later(self) -> Callable[[], dict[str, Any]]:
        """A function returning what resolved_snapshot() returns now: the stored map is
        copied (a shallow copy: a stored value is replaced, never changed in place), the
        artifacts are read only when it is called."""
        values, deref = dict(self._values), self._deref
        return lambda: _resolved(values, deref)

    def fork(self) -> Context:
        """An independent copy sharing the artifact store (for a parallel branch)."""
        forked = Context(artifacts=self.artifacts, redactor=self.redactor)
        forked._values = copy.deepcopy(self._values)
        forked._children = {prefix: dict(names) for prefix, names in self._children.items()}
        forked._hidden = set(self._hidden)
        return forked

    def changes_since(self, snapshot: Mapping[str, Any]) -> dict[str, Any]:
        """Stored keys added or changed relative to `snapshot` (deletions not reported)."""
        return {
            key: copy.deepcopy(value)
            for key, value in self._values.items()
            if key not in snapshot or not _same(snapshot[key], value)
        }

    def _deref(self, value: Any) -> Any:
        if not ArtifactStore.is_pointer(value):
            return value
        if self.artifacts is None:
            raise ArtifactError(value, "this context has no artifact store to read it from")
        return self.artifacts.read_shared(value)


def _resolved(values: Mapping[str, Any], deref: Callable[[Any], Any]) -> dict[str, Any]:
    return {key: copy.deepcopy(deref(value)) for key, value in values.items()}


def _same(a: Any, b: Any) -> bool:
    """JSON equality: unlike ==, true differs from 1 and 1.0 from 1."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


# -- the nested view (what templates see) ----------------------------------------------

_VIEW_METHODS: Final = frozenset({"items", "keys", "values", "get"})


class ViewIndex:
    """A read-only nested view of one Context: which dotted prefixes exist, and what a
    dotted path reads as. `absent(key)` makes what a missing path reads as."""

    def __init__(self, context: Context, absent: Callable[[str], Any]) -> None:
        self.context = context
        self.absent = absent
        # prefix -> its child names (maintained by the Context on every write)
        self.children: Mapping[str, Mapping[str, int]] = context._children

    def root(self) -> ContextView:
        return ContextView(self, "", MISSING)

    def namespace(self, key: str) -> ContextView:
        return ContextView(self, key, MISSING)

    def entry(self, key: str) -> Any:
        found = self.find(key)
        return self.absent(key) if found is MISSING else found

    def find(self, key: str) -> Any:
        """A ContextView for containers and prefixes, the value for leaves, or MISSING."""
        value = self.context.peek(key)
        if value is MISSING:
            return ContextView(self, key, MISSING) if key in self.children else MISSING
        if isinstance(value, (dict, list)) or key in self.children or _json_text(value):
            return ContextView(self, key, value)
        return value


def _json_text(value: Any) -> bool:
    if not isinstance(value, str) or value[:1] not in ("[", "{"):
        return False
    try:
        return isinstance(json.loads(value), (list, dict))
    except ValueError:
        return False


class ContextView:
    """Read-only view at a dotted prefix; members are context keys (they win over the
    dict methods items/keys/values/get, which remain as a fallback). `value` is the
    stored or walked-into value, or MISSING when the prefix only starts longer keys."""

    __slots__ = ("_index", "_key", "_text", "_value")

    def __init__(self, index: ViewIndex, key: str, value: Any) -> None:
        self._index = index
        self._key = key
        self._value = value
        self._text: str | None = None

    def _find(self, segment: str) -> Any:
        if segment.startswith("-") and segment[1:].isdigit():
            data = self.data()
            if isinstance(data, list):
                segment = str(len(data) + int(segment))
        return self._index.find(f"{self._key}.{segment}" if self._key else segment)

    def member(self, segment: str) -> Any:
        found = self._find(segment)
        if found is MISSING:
            return self._index.absent(f"{self._key}.{segment}" if self._key else segment)
        return found

    def attribute(self, name: str) -> Any:
        if name in _VIEW_METHODS and self._find(name) is MISSING:
            return getattr(self, name)
        return self.member(name)

    def data(self) -> Any:
        """The plain JSON value (a JSON text parsed; a bare prefix as a nested dict)."""
        value = self._value
        if value is MISSING:
            return {name: _plain(self._find(name)) for name in self._names()}
        if isinstance(value, str) and _json_text(value):
            return json.loads(value)
        return value

    def _names(self) -> list[str]:
        return list(self._index.children.get(self._key, {}))

    def _members(self) -> Iterator[tuple[str, Any]]:
        data = self.data() if self._value is not MISSING else None
        if isinstance(data, list):
            return ((str(i), self.member(str(i))) for i in range(len(data)))
        names = list(data) if isinstance(data, dict) else self._names()
        return ((name, self.member(name)) for name in names)

    def __iter__(self) -> Iterator[Any]:
        if isinstance(self.data(), list):
            return (item for _, item in self._members())
        return (name for name, _ in self._members())

    def __reversed__(self) -> Iterator[Any]:
        everything: list[Any] = list(self)
        return iter(everything[::-1])

    def __len__(self) -> int:
        data = self.data()
        return len(data) if isinstance(data, (list, dict, str)) else len(self._names())

    def __bool__(self) -> bool:
        return bool(self.data())

    def __contains__(self, item: object) -> bool:
        return item in self.data()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ContextView):
            return bool(self.data() == other.data())
        return str(self) == other if isinstance(other, str) else bool(self.data() == other)

    __hash__ = None  # type: ignore[assignment]  # compares by value like the dict it shows

    def __str__(self) -> str:
        if self._text is None:
            self._text = text_form(self._value if isinstance(self._value, str) else self.data())
        return self._text

    __repr__ = __str__

    def keys(self) -> list[str]:
        return [name for name, _ in self._members()]

    def values(self) -> list[Any]:
        return [item for _, item in self._members()]

    def items(self) -> list[tuple[str, Any]]:
        return list(self._members())

    def get(self, name: str, default: Any = None) -> Any:
        found = self._find(str(name))
        return default if found is MISSING else found


def _plain(value: Any) -> Any:
    return value.data() if isinstance(value, ContextView) else value


def json_default(value: Any) -> Any:
    """`default=` for json.dumps: a ContextView dumps as its data."""
    if isinstance(value, ContextView):
        return value.data()
    raise TypeError(f"{type(value).__name__} is not JSON")


def text_form(value: Any) -> str:
    """How a value renders in a template: strings as-is, JSON values in JSON spelling
    (null as empty), views as their JSON; anything else through str()."""
    if isinstance(value, ContextView):
        return str(value)
    if isinstance(value, (list, dict, tuple)):
        try:
            return json.dumps(value, sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False, default=json_default)
        except (TypeError, ValueError):
            return str(value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return string_form(value)
    return str(value)
