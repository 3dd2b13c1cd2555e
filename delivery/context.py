"""The run context (SPEC §3): a flat map from dotted keys to JSON values.

`context.X` and `X` name the same key. Reads follow `delivery.paths`: the longest stored
key that prefixes the path is walked into (a number picks a list item, `length` counts).
A value whose JSON is over OFFLOAD_THRESHOLD bytes is written to the run's artifact store
and the map holds a `file://` pointer instead; every read resolves pointers, also when a
path walks into one. Stored values are private copies: callers never share them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from delivery.errors import RunError
from delivery.paths import MISSING, normalize_key, walk

OFFLOAD_THRESHOLD: Final = 100 * 1024  # bytes of serialized JSON

POINTER_PREFIX: Final = "file://"
# What offload() returns: file://<absolute dir>/values/<name>-<16 hex>.json
_POINTER = re.compile(
    r"^file://(/|[A-Za-z]:[\\/]).*[\\/]values[\\/][A-Za-z0-9_.-]+-[0-9a-f]{16}\.json$"
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_CHARS: Final = 80
_CACHE_SIZE: Final = 16


class ArtifactError(RunError):
    """An artifact pointer cannot be read: outside the store, missing or not JSON."""

    def __init__(self, pointer: str, problem: str) -> None:
        self.pointer = pointer
        self.problem = problem
        super().__init__(f"artifact {pointer}: {problem}")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class ArtifactStore:
    """Large context values, one JSON file each under `<root>/values/`.

    File names are content-addressed (key and value hashed), so a pointer always reads
    the value it was written for, even after the key is set again.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        self._cache: OrderedDict[Path, Any] = OrderedDict()

    @property
    def values_dir(self) -> Path:
        return self.root / "values"

    def offload(self, key: str, value: Any) -> str:
        text = _dumps(value)
        path = self.values_dir / self._file_name(key, text)
        if not path.exists():
            self.values_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.values_dir, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return POINTER_PREFIX + str(path)

    def load(self, pointer: str) -> Any:
        """The value a pointer names (a fresh copy)."""
        return copy.deepcopy(self.read_shared(pointer))

    def read_shared(self, pointer: str) -> Any:
        """Like load() but returns the cached object itself: callers must not mutate it."""
        path = self._path_of(pointer)
        if path in self._cache:
            self._cache.move_to_end(path)
            return self._cache[path]
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ArtifactError(pointer, "the file does not exist") from None
        except (OSError, ValueError) as err:
            raise ArtifactError(pointer, f"cannot be read as JSON ({err})") from None
        self._cache[path] = value
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return value

    @staticmethod
    def is_pointer(value: Any) -> bool:
        """True for strings shaped like what offload() returns."""
        return isinstance(value, str) and _POINTER.match(value) is not None

    @staticmethod
    def _file_name(key: str, text: str) -> str:
        stem = _UNSAFE.sub("_", key).strip("._")[:_NAME_CHARS] or "value"
        digest = hashlib.sha256(f"{key}\0{text}".encode()).hexdigest()[:16]
        return f"{stem}-{digest}.json"

    def _path_of(self, pointer: str) -> Path:
        if not pointer.startswith(POINTER_PREFIX):
            raise ArtifactError(pointer, "not a file:// pointer")
        path = Path(pointer[len(POINTER_PREFIX) :])
        values = self.values_dir.resolve()
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError) as err:
            raise ArtifactError(pointer, f"cannot be resolved ({err})") from None
        if not path.is_absolute() or not resolved.is_relative_to(values):
            raise ArtifactError(pointer, f"is outside the run's artifact store {values}")
        return resolved


class Context:
    """The flat context of one run (or one parallel branch, see fork())."""

    def __init__(
        self, values: Mapping[str, Any] | None = None, artifacts: ArtifactStore | None = None
    ) -> None:
        self.artifacts = artifacts
        self._values: dict[str, Any] = {}
        if values:
            self.update(values)

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
        key = normalize_key(key)
        if key in self._values:
            return self._deref(self._values[key])
        segments = key.split(".")
        for cut in range(len(segments) - 1, 0, -1):
            prefix = ".".join(segments[:cut])
            if prefix in self._values:
                return walk(self._deref(self._values[prefix]), segments[cut:])
        return MISSING

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.peek(key) is not MISSING

    def keys(self) -> list[str]:
        return list(self._values)

    # -- writing ---------------------------------------------------------------------

    def set(self, key: str, value: Any) -> None:
        key = normalize_key(key)
        try:
            text = _dumps(value)
        except (TypeError, ValueError) as err:
            problem = f"context key {key!r}: value is not JSON-serializable ({err})"
            raise TypeError(problem) from None
        if self.artifacts is not None and len(text.encode()) > OFFLOAD_THRESHOLD:
            self._values[key] = self.artifacts.offload(key, value)
        else:
            self._values[key] = json.loads(text)

    def update(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            self.set(key, value)

    def delete(self, key: str) -> None:
        """Remove the stored key (exactly that key); absent keys are ignored."""
        self._values.pop(normalize_key(key), None)

    # -- copies ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The stored flat map, pointers kept as pointers; JSON-serializable."""
        return copy.deepcopy(self._values)

    def resolved_snapshot(self) -> dict[str, Any]:
        return {key: copy.deepcopy(self._deref(value)) for key, value in self._values.items()}

    def fork(self) -> Context:
        """An independent copy sharing the artifact store (for a parallel branch)."""
        forked = Context(artifacts=self.artifacts)
        forked._values = copy.deepcopy(self._values)
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


def _same(a: Any, b: Any) -> bool:
    """JSON equality: unlike ==, true differs from 1 and 1.0 from 1."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
