"""The run's artifact store: context values over 100 KB, one JSON file each (SPEC §3).

    <run>/artifacts/values/<key>-<16 hex>.json

File names are content-addressed (key and value hashed), so a pointer always reads the
value it was written for, even after the key is set again. A file is written under a new
random name (`O_EXCL`: never through a symlink), flushed, then renamed into place, so the
stage record that points at it never names a half-written file.
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
from delivery.store.files import make_dir, read_file, write_replacing

POINTER_PREFIX: Final = "file://"
# What offload() returns: file://<absolute dir>/values/<name>-<16 hex>.json
_POINTER = re.compile(
    r"^file://(/|[A-Za-z]:[\\/]).*[\\/]values[\\/][A-Za-z0-9_.-]+-[0-9a-f]{16}\.json$"
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_CHARS: Final = 80
_CACHE_SIZE: Final = 16
_ASCII: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_TEXT: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False)


# What the encoder writes for the characters a JSON string escapes (ensure_ascii=False:
# `"`, `\` and the C0 controls). In UTF-8 each is one byte that is never part of a
# longer character's encoding, so they can be replaced in the encoded bytes. The
# backslash first: the others add backslashes.
_SHORT_ESCAPES: Final = {8: b"\\b", 9: b"\\t", 10: b"\\n", 12: b"\\f", 13: b"\\r"}
_ESCAPES: Final = ((b"\\", b"\\\\"), (b'"', b'\\"'), *(
    (bytes([code]), _SHORT_ESCAPES.get(code, b"\\u%04x" % code)) for code in range(0x20)))


def json_string_bytes(text: str) -> bytes | None:
    """What `_TEXT.encode(text).encode()` gives (the compact JSON of a string, in UTF-8),
    made by bytes.replace (C passes at memory speed, a control character that is not
    there costs a memchr) instead of the encoder's step per character; None when `text`
    holds a lone surrogate, which UTF-8 cannot."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return None
    for byte, escaped in _ESCAPES:
        data = data.replace(byte, escaped)
    return b"".join((b'"', data, b'"'))


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
        """offload() of a string: the same file, its JSON made from the UTF-8 bytes (a
        1 MB reply per stage: three times faster than the encoder's text, then encoded)."""
        data = json_string_bytes(value)
        if data is None:  # a lone surrogate: offload() escapes it
            return self.offload(key, value)
        return self._write(key, value, None, data)

    def _write(self, key: str, value: Any, text: str | None, data: bytes | None) -> str:
        """The pointer of `value` (JSON `text`, which is `data` in UTF-8 when given),
        its file written unless it exists."""
        path = self.values_dir / self._file_name(key, text, data)
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
            value = json.loads(data.decode("utf-8"))
        except (RunStoreError, ValueError, RecursionError) as err:
            raise ArtifactError(pointer, f"cannot be read as JSON ({str(err)[:200]})") from None
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
    def _file_name(key: str, text: str | None, data: bytes | None = None) -> str:
        """`<key>-<16 hex>.json`: the hex starts the SHA-256 of key, NUL and text as UTF-8
        (surrogates passed through). `data`, when given, is `text` as UTF-8 already: the
        same bytes, hashed without another copy of the text."""
        stem = _UNSAFE.sub("_", key).strip("._")[:_NAME_CHARS] or "value"
        if data is None:
            assert text is not None
            digest = hashlib.sha256(f"{key}\0{text}".encode(errors="surrogatepass"))
        else:
            digest = hashlib.sha256(f"{key}\0".encode(errors="surrogatepass"))
            digest.update(data)
        return f"{stem}-{digest.hexdigest()[:16]}.json"

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
