"""A run directory as git trees, kept in memory between saves (SPEC §13: a save of the state
ref costs the same early and late in a run).

A save used to run `ls-files`, `update-index` and `write-tree` (three git processes whose
index reads and file stats grow with the run) and re-hash the whole event log. Here one
object per run directory remembers, for every file, its stat and blob, and for every
directory its tree; a save

- lists the run directory's root and the directories not yet *settled* (a stage's folder
  is settled once the store says its stage is over: nothing writes there again), so the
  folders of the 300 stages before are neither listed nor stat'ed;
- hashes only files whose stat changed, and writes the trees above them only;
- stores an append-only file (the event log) as fixed parts of `PART_SIZE` bytes under
  `<name>.parts/`: a closed part never changes, so a save hashes and a push sends only the
  open one, however long the log is (`join_parts` puts the file back together on fetch).

Objects are written as loose objects by Python (git's own format), so a commit starts no
git process at all; only the push does.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import stat
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PARTS_SUFFIX = ".parts"
POINTER_SUFFIX = ".delivery-pointer"
PART_SIZE = 16 << 10
APPEND_ONLY = ("events.jsonl",)  # top-level files only ever appended to
# a file changed this close to its scan may change again within the same mtime tick
# (git's "racily clean" entries): it is hashed again at the next save
_RACY_NS = 50_000_000
FILE_MODE = "100644"
TREE_MODE = "40000"

Stamp = tuple[int, int, int]  # size, mtime_ns, inode


def write_object(objects: Path, kind: str, data: bytes) -> str:
    """A loose object under `objects` (zlib of `<kind> <size>\\0<data>`, named by its
    SHA-1); its name. Written whole or not at all. Plain os calls: a save writes a dozen
    objects, and pathlib's objects cost more than the writes."""
    raw = f"{kind} {len(data)}\0".encode() + data
    sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
    folder = os.path.join(objects, sha[:2])
    path = os.path.join(folder, sha[2:])
    if not os.path.exists(path):
        spare = os.path.join(folder, f"tmp-{os.getpid()}-{sha[2:]}")
        try:
            handle = open(spare, "wb")  # noqa: SIM115 - closed below, made once per object
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            handle = open(spare, "wb")  # noqa: SIM115
        with handle:
            handle.write(zlib.compress(raw, 1))
        os.replace(spare, path)
    return sha


def _tree_key(name: str, mode: str) -> bytes:
    # git sorts a tree's entries by name, a subtree's name as if it ended in "/"
    return (name + "/" if mode == TREE_MODE else name).encode(errors="surrogateescape")


@dataclass
class _Parts:
    stamp: tuple[int, int]  # inode, device: the same file, only appended to
    closed: list[str] = field(default_factory=list)  # blob shas of the full parts


@dataclass
class RunTree:
    """The trees of one run directory, updated save by save."""

    root: Path
    objects: Path
    # large file -> the pointer saved instead (None: saved as it is)
    pointer: Callable[[str, os.stat_result], bytes | None]
    skipped: Callable[[str], bool]
    skip: tuple[str, ...] = ()  # what `skipped` was made from
    files: dict[str, tuple[Stamp | None, str]] = field(default_factory=dict)
    dirs: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    trees: dict[str, str] = field(default_factory=dict)  # directory -> its last tree
    dirty: set[str] = field(default_factory=set)  # directories whose tree must be written
    order: dict[str, list[str]] = field(default_factory=dict)  # their entries, sorted
    pieces: dict[str, dict[str, bytes]] = field(default_factory=dict)  # entries, encoded
    # folder -> the names of its directories never listed again
    settled_names: dict[str, set[str]] = field(default_factory=dict)
    extras: set[str] = field(default_factory=set)  # paths given as bytes at the last save
    parts: dict[str, _Parts] = field(default_factory=dict)
    unsettled: set[str] = field(default_factory=set)  # to settle once no file is racy
    scans: int = 0  # directories listed by the last save (benchmarks and tests read it)

    def save(self, extra: Mapping[str, bytes], settle: Iterable[str] = ()) -> str:
        """The tree of the run directory plus `extra` (path -> bytes) now; `settle`:
        directories (relative) whose files are final, listed once more and then no more."""
        self.scans = 0
        start = time.time_ns()
        settle = {name.strip("/") for name in settle if name.strip("/")} | self.unsettled
        for name in settle:  # listed once more, with the folders above them
            self._unsettle(name)
            for parent in _parents(name):
                self._unsettle(parent)
        self._scan("", start, settle)
        self.unsettled = {name for name in settle if not self._is_settled(name)
                          and (self.root / name).is_dir()}
        for rel in self.extras - set(extra):
            self._drop(rel)
        for rel, data in extra.items():
            self._set(rel, FILE_MODE, write_object(self.objects, "blob", data))
        self.extras = set(extra)
        return self._write_trees()

    # -- reading the directory ------------------------------------------------------------
    def _scan(self, folder: str, start: int, settle: set[str]) -> bool:
        """List `folder` and what is not settled under it; True when it may be settled
        (its files are final and none is racy, or it holds only settled folders). The
        settled names of a folder are set aside in C (set difference): a save's Python
        work is for what is new or still open, not for the run's past stages."""
        self.scans += 1
        final = folder in settle or _under(folder, settle)
        quiet = True  # no file changed too recently to trust
        files = folders = 0
        open_folders = False
        path = os.path.join(self.root, folder) if folder else str(self.root)
        try:
            present = set(os.listdir(path))
        except OSError:
            present = set()
        seen = self.settled_names.get(folder, set()) & present
        for name in present - seen:
            rel = f"{folder}/{name}" if folder else name
            try:
                info = os.lstat(os.path.join(path, name))
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if self.skipped(rel + "/"):
                    continue
                seen.add(name)
                folders += 1
                if self._scan(rel, start, settle):
                    self._settle(rel)
                else:
                    open_folders = True
            elif stat.S_ISREG(info.st_mode) and not self.skipped(rel):
                tree_name, racy = self._file(rel, info, start)
                seen.add(tree_name)
                files += 1
                quiet = quiet and not racy
            # links and other kinds are never saved (a fetch never makes them either)
        for name in set(self.dirs.get(folder, {})) - seen:
            rel = f"{folder}/{name}" if folder else name
            if rel not in self.extras and not _is_extra_dir(rel, self.extras):
                self._drop(rel)
        if not folder:
            return False  # the root is listed at every save
        if final:  # a stage's folder once its stage is over
            return quiet and not open_folders
        # a node's folder holding only settled attempts (an empty one may still fill up)
        return files == 0 and folders > 0 and not open_folders

    def _settle(self, rel: str) -> None:
        folder, _, name = rel.rpartition("/")
        self.settled_names.setdefault(folder, set()).add(name)

    def _unsettle(self, rel: str) -> None:
        folder, _, name = rel.rpartition("/")
        self.settled_names.get(folder, set()).discard(name)

    def _is_settled(self, rel: str) -> bool:
        folder, _, name = rel.rpartition("/")
        return name in self.settled_names.get(folder, ())

    def _file(self, rel: str, info: os.stat_result, start: int) -> tuple[str, bool]:
        """Record one file (or its pointer, or its parts): the name it has in the tree,
        and whether it is racy (changed too recently to trust its stat next time)."""
        stamp: Stamp = (info.st_size, info.st_mtime_ns, info.st_ino)
        base = rel.rpartition("/")[2]
        if rel in APPEND_ONLY:
            self.pointer(rel, info)  # a run's own record over the limit is refused
            self._parted(rel, info)
            return base + PARTS_SUFFIX, True
        known = self.files.get(rel)
        if known is not None and known[0] == stamp:
            return (base + POINTER_SUFFIX if known[1] != rel else base), False
        racy = start - info.st_mtime_ns < _RACY_NS
        pointer = self.pointer(rel, info)
        if pointer is not None:
            self._drop(rel)
            self._set(rel + POINTER_SUFFIX, FILE_MODE,
                      write_object(self.objects, "blob", pointer))
            self.files[rel] = (None if racy else stamp, rel + POINTER_SUFFIX)
            return base + POINTER_SUFFIX, racy
        try:
            data = (self.root / rel).read_bytes()
        except OSError:
            return base, True
        if known is not None and known[1] != rel:  # it was large, now it is not
            self._drop(known[1])
        self._set(rel, FILE_MODE, write_object(self.objects, "blob", data))
        self.files[rel] = (None if racy else stamp, rel)
        return base, racy

    def _parted(self, rel: str, info: os.stat_result) -> None:
        """An append-only file as `<rel>.parts/<n>`: only the open part is read."""
        folder = rel + PARTS_SUFFIX
        parts = self.parts.get(rel)
        if parts is None or parts.stamp != (info.st_ino, info.st_dev) \
                or len(parts.closed) * PART_SIZE > info.st_size:
            for name in list(self.dirs.get(folder, {})):  # rewritten: start over
                self._drop(f"{folder}/{name}")
            parts = self.parts[rel] = _Parts((info.st_ino, info.st_dev))
        with (self.root / rel).open("rb") as handle:
            handle.seek(len(parts.closed) * PART_SIZE)
            while True:
                chunk = handle.read(PART_SIZE)
                number = len(parts.closed)
                if not chunk:
                    self._drop(f"{folder}/{number:06d}")
                    break
                sha = write_object(self.objects, "blob", chunk)
                self._set(f"{folder}/{number:06d}", FILE_MODE, sha)
                if len(chunk) < PART_SIZE:
                    self._drop(f"{folder}/{number + 1:06d}")
                    break
                parts.closed.append(sha)

    # -- the trees ------------------------------------------------------------------------
    def _set(self, rel: str, mode: str, sha: str) -> None:
        folder, _, name = rel.rpartition("/")
        entries = self.dirs.setdefault(folder, {})
        known = entries.get(name)
        if known == (mode, sha) or (mode == TREE_MODE and known is not None):
            return  # a subtree's sha is set when its folder is written
        entries[name] = (mode, sha)
        if known is None:  # a new name: into its place, not the whole folder sorted again
            order = self.order.get(folder)
            if order is not None:
                bisect.insort(order, name, key=lambda item: _tree_key(item, entries[item][0]))
        self.pieces.setdefault(folder, {})[name] = _piece(mode, name, sha)
        self._dirty(folder)
        if folder:
            self._set(folder, TREE_MODE, "")

    def _drop(self, rel: str) -> None:
        folder, _, name = rel.rpartition("/")
        entries = self.dirs.get(folder)
        if entries is None or name not in entries:
            return
        mode, _ = entries.pop(name)
        self.pieces.get(folder, {}).pop(name, None)
        self.order.pop(folder, None)
        self._dirty(folder)
        if mode == TREE_MODE:  # rare (a folder removed): the whole maps are walked
            prefix = rel + "/"
            for inner in [key for key in self.dirs if key == rel or key.startswith(prefix)]:
                del self.dirs[inner]
                self.pieces.pop(inner, None)
                self.order.pop(inner, None)
                self.dirty.discard(inner)
            for inner in [key for key in self.files if key.startswith(prefix)]:
                del self.files[inner]
            self._unsettle(rel)
            for inner in [key for key in self.settled_names if key == rel
                          or key.startswith(prefix)]:
                del self.settled_names[inner]
        else:
            self.files.pop(rel, None)
        if folder and not entries:  # git keeps no empty trees
            self._drop(folder)

    def _dirty(self, folder: str) -> None:
        if folder in self.dirty:
            return  # and so are the folders above it
        self.dirty.add(folder)
        self.dirty.update(_parents(folder))
        self.dirty.add("")

    def _write_trees(self) -> str:
        """Write the trees of the folders that changed, deepest first (each one's sha goes
        into its parent's entry); the root's sha. Untouched folders cost nothing."""
        for folder in sorted(self.dirty, key=lambda name: name.count("/") if name else -1,
                             reverse=True):
            entries = self.dirs.get(folder)
            if entries is None and folder:
                continue  # dropped since it was marked
            entries = entries or {}
            order = self.order.get(folder)
            if order is None:
                order = self.order[folder] = sorted(
                    entries, key=lambda name: _tree_key(name, entries[name][0]))
            pieces = self.pieces.get(folder, {})
            sha = write_object(self.objects, "tree", b"".join(pieces[name] for name in order))
            self.trees[folder] = sha
            if folder:
                parent, _, base = folder.rpartition("/")
                self.dirs[parent][base] = (TREE_MODE, sha)
                self.pieces[parent][base] = _piece(TREE_MODE, base, sha)
        self.dirty.clear()
        return self.trees.get("") or write_object(self.objects, "tree", b"")


def _piece(mode: str, name: str, sha: str) -> bytes:
    """One tree entry as git writes it (a subtree not written yet has no sha: a
    placeholder, replaced before its parent is written)."""
    binary = bytes.fromhex(sha) if sha else b"\0" * 20
    return mode.encode() + b" " + name.encode(errors="surrogateescape") + b"\0" + binary


def _parents(rel: str) -> list[str]:
    """"a/b/c" -> ["a/b", "a"] (not the root)."""
    parts = rel.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts) - 1, 0, -1)]


def _under(rel: str, folders: set[str]) -> bool:
    return any(rel.startswith(name + "/") for name in folders)


def _is_extra_dir(rel: str, extras: set[str]) -> bool:
    prefix = rel + "/"
    return any(name.startswith(prefix) for name in extras)


def join_parts(root: Path, names: Sequence[str] = APPEND_ONLY, *, limit: int) -> None:
    """Put each append-only file of a fetched run directory back together from its
    parts (a save made before parts existed holds the file itself: left as it is);
    ValueError when one would be larger than `limit` bytes."""
    for rel in names:
        folder = root / (rel + PARTS_SUFFIX)
        if not folder.is_dir() or folder.is_symlink():
            continue
        pieces = sorted(path for path in folder.iterdir()
                        if path.is_file() and not path.is_symlink() and path.name.isdigit())
        if sum(piece.stat().st_size for piece in pieces) > limit:
            raise ValueError(f"{rel} is over the state limit of {limit} bytes")
        spare = root / (rel + ".joining")
        with spare.open("wb") as out:
            for piece in pieces:
                with piece.open("rb") as handle:
                    while block := handle.read(1 << 20):
                        out.write(block)
        os.replace(spare, root / rel)
        for piece in folder.iterdir():
            piece.unlink()
        folder.rmdir()
