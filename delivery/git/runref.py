"""A run's state as commits on `refs/delivery/runs/<run_id>` of a state repository (SPEC §13).

Each save is a commit whose tree is the run directory (large artifacts replaced by a pointer
file) and whose parent is the previous save; the ref moves only by compare-and-swap
(`git push --force-with-lease=<ref>:<expected>`), so of two jobs saving on the same parent
one wins and the other learns it lost (`push` returns False) and changes nothing.

The remote is a URL (`https://github.com/o/n.git`, a token reaching git only as an
`http.extraHeader` in the environment of the one git process, never on its command line)
or a local path (a bare repository), so the whole protocol runs offline in tests. A
scratch bare repository (one per state remote, in the clone cache) holds the objects.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import tarfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from delivery.errors import GitError
from delivery.git.network import GitRemote, network_environment, run_bounded, seconds_left
from delivery.git.network import stalled as stalled_reason
from delivery.git.problems import describe
from delivery.git.runtree import POINTER_SUFFIX, RunTree, join_parts, write_object

__all__ = ["POINTER_SUFFIX", "RunRef", "Saved", "is_run_id", "run_ref"]

REF_PREFIX = "refs/delivery/runs/"
LARGE_ARTIFACT = 1 << 20  # artifacts over 1 MiB stay behind as a pointer
FILE_LIMIT = 16 << 20  # any other file over 16 MiB too (a stage's huge stdout)
TOTAL_LIMIT = 256 << 20  # a saved run larger than this is refused when fetched
SMALL_FILE = 1 << 20  # the ref's own small files (claim, status) read whole
_TAMPERED = "the state ref was tampered with; restart the run or restore the ref"


def run_ref(run_id: str) -> str:
    return REF_PREFIX + run_id


# what a run id may be: what new_run_id makes (`20261201T023317Z-27320f`) and any other
# name that is one valid ref component (no `..`, no `.lock` or `.` at its end, no `:`)
_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def is_run_id(text: str) -> bool:
    """Whether `text` can name a run (and so its ref): a marker in a PR body is text anyone
    may write, and `run=..` or `x.lock` would otherwise reach git as an invalid refspec."""
    return bool(_RUN_ID.fullmatch(text)) and ".." not in text \
        and not text.endswith((".lock", "."))


_IDENTITY = "delivery[bot] <delivery-bot@users.noreply.github.com>"


def _skipped(rel: str, skip: Sequence[str]) -> bool:
    """Not saved: a lock file, a name in `skip`, or a file under a `skip` directory."""
    return rel.endswith(".lock") or rel in skip or any(
        name.endswith("/") and rel.startswith(name) for name in skip)


@dataclass(frozen=True)
class Saved:
    sha: str
    parent: str | None


class RunRef:
    """The state remote of runs and a scratch repository to build commits in."""

    def __init__(self, remote: str, scratch: Path, headers: Sequence[str] = (),
                 environ: Mapping[str, str] | None = None) -> None:
        self.remote = remote
        self.scratch = scratch
        self.headers = tuple(headers)
        self._remote = GitRemote(remote, self.headers)
        self.environ = dict(environ if environ is not None else os.environ)
        self._trees: dict[Path, RunTree] = {}  # the run directories this object saved
        self.last_scans = 0  # folders the last commit listed
        self._pointers: dict[tuple[str, int, int, int], bytes] = {}
        if not (scratch / "HEAD").is_file():
            scratch.mkdir(parents=True, exist_ok=True)
            self._git("init", "init", "--quiet", "--bare", str(scratch), cwd=scratch.parent)

    # -- git --------------------------------------------------------------------------
    def _git(self, operation: str, *args: str, cwd: Path | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             network: bool = False, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        command = ["git", *args]
        run_env = {**self.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
        if network:
            # no configuration file but the scratch repository's, the token for the state
            # remote's URL only, and bounded in time (delivery.git.network)
            run_env = network_environment(self._remote, run_env)
        if cwd is None:
            run_env["GIT_DIR"] = str(self.scratch)
        if network:
            done, killed = run_bounded(command, env=run_env, cwd=cwd or self.scratch,
                                       stdin=stdin, seconds=seconds_left(self._remote))
            if killed:
                raise GitError(operation, self.location,
                               stalled_reason(self._remote, f"git {operation}"),
                               "check that the state repository can be reached, then resume")
        else:
            done = subprocess.run(command, cwd=cwd or self.scratch, input=stdin,
                                  capture_output=True, env=run_env, check=False)
        if check and done.returncode != 0:
            problem, fix = self._explained(done.stderr)
            raise GitError(operation, self.location, problem,
                           fix or "check that the state repository exists and the token "
                           "may read and push to it")
        return done

    def _explained(self, stderr: bytes) -> tuple[str, str]:
        return describe(stderr.decode(errors="replace"), self.headers, remote=self.remote,
                        what="git")

    def _problem(self, stderr: bytes) -> str:
        return self._explained(stderr)[0]

    @property
    def location(self) -> str:
        return self.remote

    # -- reading ------------------------------------------------------------------------
    def list_runs(self) -> dict[str, str]:
        """run id -> the sha its ref points at, on the remote."""
        out = self._git("ls-remote", "ls-remote", "--refs", self.remote, REF_PREFIX + "*",
                        network=True).stdout.decode()
        runs: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            if ref.startswith(REF_PREFIX):
                runs[ref[len(REF_PREFIX):]] = sha
        return runs

    def fetch(self, run_ids: Sequence[str]) -> dict[str, str]:
        """Fetch the runs' refs into the scratch repository; run id -> sha (absent: no ref)."""
        found: dict[str, str] = {}
        for run_id in run_ids:
            ref = run_ref(run_id)
            done = self._git("fetch", "fetch", "--quiet", "--no-tags", self.remote,
                             f"+{ref}:{ref}", network=True, check=False)
            if done.returncode != 0:
                if b"couldn't find remote ref" in done.stderr.lower():
                    self._git("update-ref", "update-ref", "-d", ref, check=False)
                    continue
                raise GitError("fetch", self.location, self._problem(done.stderr),
                               "check that the state repository exists and can be read")
            found[run_id] = self._git("rev-parse", "rev-parse", ref).stdout.decode().strip()
        return found

    def fetch_all(self) -> dict[str, str]:
        """Fetch every run's ref; run id -> sha."""
        heads = self.list_runs()
        if heads:
            self._git("fetch", "fetch", "--quiet", "--no-tags", self.remote,
                      f"+{REF_PREFIX}*:{REF_PREFIX}*", network=True)
        return heads

    def read_file(self, sha: str, path: str, limit: int = SMALL_FILE) -> bytes | None:
        """The blob at `path` of commit `sha`, or None when there is none; a blob larger
        than `limit` is never loaded (GitError: the ref was tampered with)."""
        done = self._git("show", "cat-file", "-s", f"{sha}:{path}", check=False)
        if done.returncode != 0:
            return None
        size = int(done.stdout.strip() or 0)
        if size > limit:
            raise GitError("read", self.location, f"{path} on the state ref is {size} "
                           f"bytes, over the limit of {limit}", _TAMPERED)
        done = self._git("show", "cat-file", "blob", f"{sha}:{path}", check=False)
        return done.stdout if done.returncode == 0 else None

    def extract(self, sha: str, dest: Path) -> None:
        """Write the saved run directory of commit `sha` into `dest` (files only; no links),
        streamed: no file is held in memory whole, and a file over FILE_LIMIT (or a tree
        over TOTAL_LIMIT) is refused before it is written."""
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        env = {**self.environ, "GIT_DIR": str(self.scratch)}
        with subprocess.Popen(["git", "archive", "--format=tar", sha], cwd=self.scratch,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env) as proc:
            assert proc.stdout is not None
            try:
                self._unpack(proc.stdout, root)
                join_parts(root, limit=FILE_LIMIT)
            except (tarfile.TarError, OSError, ValueError) as err:
                raise GitError("extract", self.location, f"the saved run cannot be read: "
                               f"{err}", _TAMPERED) from None
            finally:
                proc.kill()
                proc.communicate()

    def _unpack(self, stream: IO[bytes], root: Path) -> None:
        total = 0
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                target = (root / member.name).resolve()
                if not target.is_relative_to(root):
                    raise GitError("extract", self.location, f"{member.name} leaves the run "
                                   "directory", _TAMPERED)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if not member.isfile():
                    continue  # links are never followed nor made
                total += member.size
                if member.size > FILE_LIMIT or total > TOTAL_LIMIT:
                    raise GitError("extract", self.location, f"{member.name} is "
                                   f"{member.size} bytes (the run {total} so far), over the "
                                   f"state limit of {FILE_LIMIT} per file and {TOTAL_LIMIT} "
                                   "per run", _TAMPERED)
                handle = archive.extractfile(member)
                if handle is None:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with target.open("wb") as out:
                    shutil.copyfileobj(handle, out, 1 << 20)

    # -- writing ------------------------------------------------------------------------
    def commit(self, run_dir: Path, parent: str | None, message: str,
               extra: Mapping[str, bytes] | None = None,
               skip: Sequence[str] = (), settle: Iterable[str] = ()) -> str:
        """A commit of `run_dir`'s files (large files as pointers, the event log in parts)
        plus `extra` files (path -> bytes), on `parent`; its sha. Nothing is pushed.

        Incremental (`RunTree`): this object remembers the run directory's files and
        trees, so a save hashes only what changed and lists only the folders not
        `settle`d yet (a stage's folder once its stage is over). `skip` names files
        (`name`) or directories (`name/`) not saved."""
        run_dir = run_dir.resolve()
        tree = self._trees.get(run_dir)
        if tree is None or tree.skip != tuple(skip):
            tree = RunTree(run_dir, self.scratch / "objects",
                           lambda rel, info: self._pointer(run_dir, rel, info),
                           lambda rel: _skipped(rel, skip), skip=tuple(skip))
            self._trees[run_dir] = tree
        root = tree.save(extra or {}, settle)
        self.last_scans = tree.scans
        stamp = f"{int(time.time())} +0000"
        body = f"tree {root}\n" + (f"parent {parent}\n" if parent else "")
        body += f"author {_IDENTITY} {stamp}\ncommitter {_IDENTITY} {stamp}\n\n{message}\n"
        return write_object(self.scratch / "objects", "commit", body.encode())

    def _pointer(self, run_dir: Path, rel: str, info: os.stat_result) -> bytes | None:
        """The pointer file saved instead of `rel` when it is large (artifacts over
        LARGE_ARTIFACT, any other file over FILE_LIMIT; the run's own records over it are
        refused: the run could not be resumed without them); None for a file saved as it
        is. Digests are cached by stat: a large file is read once, streamed."""
        path = run_dir / rel
        limit = LARGE_ARTIFACT if rel.startswith("artifacts/") else FILE_LIMIT
        if info.st_size <= limit or not stat.S_ISREG(info.st_mode):
            return None
        if "/" not in rel:
            raise GitError("save", self.location, f"the run's {rel} is {info.st_size} "
                           f"bytes, over the state limit of {FILE_LIMIT}",
                           "the run is too large for event mode")
        stamp = (rel, info.st_size, info.st_mtime_ns, info.st_ino)
        pointer = self._pointers.get(stamp)
        if pointer is None:
            with path.open("rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
            pointer = (f"sha256 {digest}\nsize {info.st_size}\n"
                       "not saved: larger than the state limit\n").encode()
            self._pointers[stamp] = pointer
        return pointer

    def push(self, run_id: str, sha: str, expected: str | None) -> bool:
        """Move the run's ref to `sha` if it still points at `expected` (None: it must not
        exist); False when it does not (another job moved it): nothing changed."""
        return self.push_ref(run_ref(run_id), sha, expected)

    def fetch_ref(self, ref: str) -> str | None:
        """Fetch one ref of the state remote (a fan-out's chunk) into the scratch
        repository; its sha, None when the remote has none."""
        done = self._git("fetch", "fetch", "--quiet", "--no-tags", self.remote,
                         f"+{ref}:{ref}", network=True, check=False)
        if done.returncode != 0:
            if b"couldn't find remote ref" in done.stderr.lower():
                self._git("update-ref", "update-ref", "-d", ref, check=False)
                return None
            raise GitError("fetch", self.location, self._problem(done.stderr),
                           "check that the state repository exists and can be read")
        return self._git("rev-parse", "rev-parse", ref).stdout.decode().strip()

    def file_names(self, sha: str) -> list[str]:
        """The paths of the files of commit `sha` (a chunk's results)."""
        out = self._git("ls-tree", "ls-tree", "-r", "--name-only", "-z", sha).stdout
        return [name.decode(errors="replace") for name in out.split(b"\0") if name]

    def push_ref(self, ref: str, sha: str, expected: str | None) -> bool:
        """`push` for any ref of the state remote."""
        lease = f"--force-with-lease={ref}:{expected or ''}"
        # sparse reachability: pack-objects walks only the paths this save changed, not
        # every tree of the run behind the remote's tip (that walk grew with the run:
        # state_saves measured last/first 1.3-1.46 without it, 0.9-1.16 with it)
        done = self._git("push", "-c", "pack.useSparse=true", "push", "--porcelain",
                         "--quiet", lease, self.remote,
                         f"{sha}:{ref}", network=True, check=False)
        if done.returncode == 0:
            return True
        out = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        # the lease failed on our side (stale info) or the remote's ref moved between its
        # advertisement and the update (receive-pack checks the old value under its lock)
        lost = ("stale info", "fetch first", "non-fast-forward", "failed to update ref",
                "cannot lock ref", "failed to lock")
        if any(reason in out for reason in lost):
            return False
        raise GitError("push", self.location, self._problem(done.stderr),
                       "check that the token may push to the state repository")
