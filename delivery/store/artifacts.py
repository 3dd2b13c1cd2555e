"""The run's artifact store: context values over 100 KB, one file each (SPEC §3).

    <run>/artifacts/values/<key>-<16 hex>.txt    a text, as UTF-8
    <run>/artifacts/values/<key>-<16 hex>.json   any other value, as compact JSON

File names are content-addressed (key and value hashed), so a pointer always reads the
value it was written for, even after the key is set again. A file is written under a new
random name (`O_EXCL`: never through a symlink), flushed, then renamed into place, so the
stage record that points at it never names a half-written file.

A text (a long reply, a log a script printed) is stored as itself: a person opens it as it
is, and neither writing nor reading it goes through JSON, whose escaping of every quote and
newline was most of what storing a 1 MB reply cost. A text UTF-8 cannot hold (a lone
surrogate) is stored as JSON, escaped. Pointers to `.json` files of texts, as earlier
versions wrote them, read as before.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any, Final

from delivery.errors import ArtifactError, RunStoreError
from delivery.store.files import make_dir, read_file, utf8, write_replacing

POINTER_PREFIX: Final = "file://"
# What offload() returns: file://<absolute dir>/values/<name>-<16 hex>.json (or .txt)
_POINTER = re.compile(
    r"^file://(/|[A-Za-z]:[\\/]).*[\\/]values[\\/][A-Za-z0-9_.-]+-[0-9a-f]{16}\.(?:json|txt)$"
)
_TEXT_SUFFIX: Final = ".txt"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_CHARS: Final = 80
_CACHE_SIZE: Final = 16
_ASCII: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_TEXT: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False)


class ArtifactStore:
    """Large context values of one run (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        self._cache: OrderedDict[Path, Any] = OrderedDict()
        self._made = False

    @property
    def values_dir(self) -> Path:
        return self.root / "values"

    def offload(self, key: str, value: Any, text: str | None = None) -> str:
        """Store `value` (whose compact JSON is `text`, if the caller has it already);
        returns its pointer.

        The text is encoded to UTF-8 once: those bytes are both hashed for the file name
        and written (a 1 MB reply used to be encoded three times, twice only to be
        hashed or checked for surrogates)."""
        if text is None:
            text = _TEXT.encode(value)
        try:
            data = text.encode()
        except UnicodeEncodeError:
            data = None  # a lone surrogate (from a reply): escaped below
        return self._write(key, value, text, data)

    def offload_text(self, key: str, value: str) -> str:
        """Store the text `value` as its UTF-8 bytes (`<key>-<16 hex>.txt`); returns its
        pointer. A lone surrogate, which UTF-8 cannot hold: offload(), escaped JSON."""
        try:
            data = utf8(value)  # a reply's bytes, encoded once for its response.md already
        except UnicodeEncodeError:
            return self.offload(key, value)
        return self._write(key, value, None, data, _TEXT_SUFFIX)

    def _write(self, key: str, value: Any, text: str | None, data: bytes | None,
               suffix: str = ".json") -> str:
        """The pointer of `value` (JSON `text`, which is `data` in UTF-8 when given; with
        the suffix `.txt`, `data` is the text itself), its file written unless it exists."""
        path = self.values_dir / self._file_name(key, text, data, suffix)
        if not os.path.lexists(path):
            if not self._made:
                try:
                    self.root.parent.mkdir(parents=True, exist_ok=True)
                except OSError as error:
                    raise RunStoreError(f"{self.root}: cannot create the artifact folder: "
                                        f"{error.strerror or error}") from None
                make_dir(str(self.root), "artifact folder")
                make_dir(str(self.values_dir), "artifact folder")
                self._made = True
            # escaped where UTF-8 cannot hold it (a lone surrogate from a reply)
            if data is None:
                data = _ASCII.encode(value).encode()
            # content-addressed: a rename lost to a power failure is rewritten next time
            write_replacing(path, data, sync_dir=False)
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
            data = read_file(path, "artifact")
            if data is None:
                raise ArtifactError(pointer, "the file does not exist")
            text = path.suffix == _TEXT_SUFFIX
            value = data.decode("utf-8") if text else json.loads(data.decode("utf-8"))
        except (RunStoreError, ValueError, RecursionError) as err:
            kind = "UTF-8 text" if path.suffix == _TEXT_SUFFIX else "JSON"
            raise ArtifactError(pointer, f"cannot be read as {kind} ({str(err)[:200]})") from None
        self._cache[path] = value
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return value

    def size_of(self, pointer: str) -> int | None:
        """Bytes of the file a pointer names, None if it cannot be found."""
        try:
            return os.lstat(self._path_of(pointer)).st_size
        except (OSError, ArtifactError):
            return None

    @staticmethod
    def is_pointer(value: Any) -> bool:
        """True for strings shaped like what offload() returns."""
        return isinstance(value, str) and _POINTER.match(value) is not None

    def relocate(self, value: Any) -> Any:
        """`value` with pointers into a moved or copied run's store re-pointed here.

        Pointers are absolute; when the run directory was moved (or restored elsewhere
        between CI jobs) they name the old place. File names are content-addressed, so the
        file of the same name here holds the same value.
        """
        if isinstance(value, str):
            # the prefix first: a resumed context holds thousands of strings, few pointers
            if not value.startswith(POINTER_PREFIX) or not self.is_pointer(value):
                return value
            here = self.values_dir / re.split(r"[\\/]", value)[-1]
            return POINTER_PREFIX + str(here) if here.is_file() else value
        if isinstance(value, dict):
            # a plain string that is no pointer kept without a call (most of a context)
            return {key: item if type(item) is str and not item.startswith(POINTER_PREFIX)
                    else self.relocate(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.relocate(item) for item in value]
        return value

    @staticmethod
    def _file_name(key: str, text: str | None, data: bytes | None = None,
                   suffix: str = ".json") -> str:
        """`<key>-<16 hex><suffix>`: the hex starts the SHA-256 of key, NUL and text as
        UTF-8 (surrogates passed through). `data`, when given, is `text` as UTF-8 already:
        the same bytes, hashed without another copy of the text."""
        stem = _UNSAFE.sub("_", key).strip("._")[:_NAME_CHARS] or "value"
        if data is None:
            assert text is not None
            digest = hashlib.sha256(f"{key}\0{text}".encode(errors="surrogatepass"))
        else:
            digest = hashlib.sha256(f"{key}\0".encode(errors="surrogatepass"))
            digest.update(data)
        return f"{stem}-{digest.hexdigest()[:16]}{suffix}"

    def _path_of(self, pointer: str) -> Path:
        if not pointer.startswith(POINTER_PREFIX):
            raise ArtifactError(pointer, "not a file:// pointer")
        path = Path(pointer[len(POINTER_PREFIX):])
        values = self.values_dir.resolve()
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError, ValueError) as err:
            raise ArtifactError(pointer, f"cannot be resolved ({err})") from None
        if not path.is_absolute() or not resolved.is_relative_to(values):
            raise ArtifactError(pointer, f"is outside the run's artifact store {values}")
        return resolved
