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
import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from delivery.errors import GitError
from delivery.git.worktrees import header_environment, mask_headers

REF_PREFIX = "refs/delivery/runs/"
POINTER_SUFFIX = ".delivery-pointer"
LARGE_ARTIFACT = 1 << 20  # artifacts over 1 MiB stay behind as a pointer


def run_ref(run_id: str) -> str:
    return REF_PREFIX + run_id


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
        self.environ = dict(environ if environ is not None else os.environ)
        if not (scratch / "HEAD").is_file():
            scratch.mkdir(parents=True, exist_ok=True)
            self._git("init", "init", "--quiet", "--bare", str(scratch), cwd=scratch.parent)

    # -- git --------------------------------------------------------------------------
    def _git(self, operation: str, *args: str, cwd: Path | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             network: bool = False, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        command = ["git", *args]
        run_env = {**self.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
        if network and self.headers:
            # the environment only: a command line (`-c`) is readable by other users
            run_env.update(header_environment(self.headers, base=run_env))
        if cwd is None:
            run_env["GIT_DIR"] = str(self.scratch)
        done = subprocess.run(command, cwd=cwd or self.scratch, input=stdin,
                              capture_output=True, env=run_env, check=False)
        if check and done.returncode != 0:
            raise GitError(operation, self.location, self._problem(done.stderr),
                           "check that the state repository exists and the token may "
                           "read and push to it")
        return done

    def _problem(self, stderr: bytes) -> str:
        text = mask_headers(stderr.decode(errors="replace"), self.headers)
        lines = [line for line in text.splitlines() if line.strip()]
        return " / ".join(lines[-4:]) or "git failed"

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

    def read_file(self, sha: str, path: str) -> bytes | None:
        done = self._git("show", "cat-file", "blob", f"{sha}:{path}", check=False)
        return done.stdout if done.returncode == 0 else None

    def extract(self, sha: str, dest: Path) -> None:
        """Write the saved run directory of commit `sha` into `dest` (files only; no links)."""
        data = self._git("archive", "archive", "--format=tar", sha).stdout
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive.getmembers():
                target = (root / member.name).resolve()
                if not target.is_relative_to(root):
                    raise GitError("extract", self.location, f"{member.name} leaves the run "
                                   "directory", "the state ref was tampered with")
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    handle = archive.extractfile(member)
                    assert handle is not None
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(handle.read())

    # -- writing ------------------------------------------------------------------------
    def commit(self, run_dir: Path, parent: str | None, message: str,
               extra: Mapping[str, bytes] | None = None,
               skip: Sequence[str] = ()) -> str:
        """A commit of `run_dir`'s files (large artifacts as pointers) plus `extra` files
        (path -> bytes), on `parent`; its sha. Nothing is pushed."""
        run_dir = run_dir.resolve()  # git runs in the scratch repository
        files: dict[str, Path] = {}
        blobs: dict[str, bytes] = {}
        for path in sorted(run_dir.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(run_dir).as_posix()
            if rel in skip or rel.endswith(".lock"):
                continue
            size = path.stat().st_size
            if rel.startswith("artifacts/") and size > LARGE_ARTIFACT:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                blobs[rel + POINTER_SUFFIX] = (f"sha256 {digest}\nsize {size}\n"
                                               "not saved: larger than the state limit\n"
                                               ).encode()
                continue
            files[rel] = path
        blobs.update(extra or {})
        index = self.scratch / f"index-{os.getpid()}-{id(self)}"
        spill = self.scratch / f"blobs-{os.getpid()}-{id(self)}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            spill.mkdir(exist_ok=True)
            for number, (rel, data) in enumerate(blobs.items()):
                files[rel] = spill / str(number)
                files[rel].write_bytes(data)
            lines = []
            if files:  # one git process for every file
                names = "".join(f"{path}\n" for path in files.values()).encode()
                shas = self._git("hash-object", "hash-object", "-w", "--stdin-paths",
                                 stdin=names).stdout.decode().split()
                lines = [f"100644 {sha}\t{rel}\n"
                         for rel, sha in zip(files, shas, strict=True)]
            index.unlink(missing_ok=True)
            self._git("update-index", "update-index", "--add", "--index-info",
                      stdin="".join(lines).encode(), env=env)
            tree = self._git("write-tree", "write-tree", env=env).stdout.decode().strip()
        finally:
            index.unlink(missing_ok=True)
            shutil.rmtree(spill, ignore_errors=True)
        args = ["commit-tree", tree, "-m", message]
        if parent:
            args += ["-p", parent]
        identity = {"GIT_AUTHOR_NAME": "delivery[bot]",
                    "GIT_AUTHOR_EMAIL": "delivery-bot@users.noreply.github.com",
                    "GIT_COMMITTER_NAME": "delivery[bot]",
                    "GIT_COMMITTER_EMAIL": "delivery-bot@users.noreply.github.com"}
        return self._git("commit-tree", *args, env=identity).stdout.decode().strip()

    def push(self, run_id: str, sha: str, expected: str | None) -> bool:
        """Move the run's ref to `sha` if it still points at `expected` (None: it must not
        exist); False when it does not (another job moved it): nothing changed."""
        ref = run_ref(run_id)
        lease = f"--force-with-lease={ref}:{expected or ''}"
        done = self._git("push", "push", "--porcelain", "--quiet", lease, self.remote,
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
