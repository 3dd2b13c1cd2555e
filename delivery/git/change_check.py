"""What a folder's change may not carry to its remote (SPEC §14): a known secret value or a
token-shaped string ("No secret in a change"), and a nested git repository an agent made
inside the worktree (`git init`, a clone), which `git add` would record as a gitlink to a
commit no remote has — the agent's files silently dropped.

    found = scan_change(worktree, since, holds_secret)   # before publish commits
    found.secret_files, found.nested

The change is the working tree as it is (local commits, staged, unstaged and untracked files;
ignored files are not work) against `since`, a commit the remote has: the tree is built in
a scratch index, so the worktree's own index is not touched. Only the lines the change adds
are scanned for secrets (a token-shaped fixture already on the branch is not the run's), and
the file is named, never the value.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from delivery.errors import GitError

GITLINK = "160000"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree: `since` of nothing
_DIFF_HEADER = b"\ndiff --git "


@dataclass(frozen=True)
class ChangeFindings:
    secret_files: tuple[str, ...] = ()  # files whose added lines hold a secret
    nested: tuple[str, ...] = ()  # nested repositories (new gitlinks no .gitmodules names)

    @property
    def clean(self) -> bool:
        return not self.secret_files and not self.nested


def _git(cwd: Path, operation: str, *args: str, env: Mapping[str, str] | None = None
         ) -> bytes:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})})
    if done.returncode != 0:
        lines = [line for line in done.stderr.decode(errors="replace").splitlines()
                 if line.strip()]
        raise GitError(operation, str(cwd), " / ".join(lines[-3:]) or "git failed")
    return done.stdout


@contextmanager
def scratch_index(worktree: Path) -> Iterator[dict[str, str]]:
    """The environment of a copy of the worktree's index holding everything in it (`git add
    -A` there), for as long as the block runs: the worktree's own index is untouched."""
    with tempfile.TemporaryDirectory(prefix="delivery-change-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(worktree, "read-tree", "read-tree", "HEAD", env=env)
        _git(worktree, "add", "add", "-A", env=env)
        yield env


def changed_entries(worktree: Path, since: str, env: Mapping[str, str]
                    ) -> list[tuple[str, str, str]]:
    """(old mode, new mode, path) of every path the scratch index changes against `since`."""
    raw = _git(worktree, "diff", "diff", "--cached", "--raw", "-z", "--no-renames",
               "--no-abbrev", since, env=env)
    fields = raw.split(b"\0")
    entries = []
    for at in range(0, len(fields) - 1, 2):
        meta = fields[at].decode(errors="replace").lstrip(":").split()
        if len(meta) >= 2:
            entries.append((meta[0], meta[1], os.fsdecode(fields[at + 1])))
    return entries


def _added_lines(worktree: Path, since: str, env: Mapping[str, str],
                 entries: list[tuple[str, str, str]]) -> dict[str, str]:
    """path -> the lines the change adds to it (binary files read as text); `entries`: the
    change's changed_entries."""
    patch = _git(worktree, "diff", "diff", "--cached", "--text", "-U0", "--no-renames",
                 "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", since,
                 env=env)
    # one `diff --git` section per raw entry, in the same order (content lines start with
    # + - or a space, so a header is never content)
    sections = ("\n" + patch.decode("utf-8", errors="replace")).split(
        _DIFF_HEADER.decode())[1:]
    added: dict[str, str] = {}
    if len(sections) != len(entries):  # never expected: read each file's lines instead
        sections = [_one_file(worktree, since, path, env) for _, _, path in entries]
    for (_, new_mode, path), section in zip(entries, sections, strict=True):
        if new_mode in ("000000", GITLINK):
            continue  # deleted, or a nested repository (reported apart)
        body = section.split("\n@@", 1)
        if len(body) == 2:
            added[path] = "\n".join(line[1:] for line in body[1].split("\n")
                                    if line.startswith("+"))
    return added


def _one_file(worktree: Path, since: str, path: str, env: Mapping[str, str]) -> str:
    return _git(worktree, "diff", "diff", "--cached", "--text", "-U0", "--no-color",
                "--no-ext-diff", since, "--", f":(literal){path}",
                env=env).decode("utf-8", errors="replace")


def _declared_submodules(worktree: Path) -> set[str]:
    if not (worktree / ".gitmodules").is_file():
        return set()
    done = subprocess.run(["git", "config", "--file", ".gitmodules", "--get-regexp",
                           r"^submodule\..*\.path$"], cwd=worktree, capture_output=True,
                          check=False)
    return {line.split(" ", 1)[1] for line in done.stdout.decode(errors="replace").splitlines()
            if " " in line}


def untracked_repositories(worktree: Path) -> tuple[str, ...]:
    """Untracked, not ignored directories that are git repositories of their own (git lists
    each as `path/` and does not look inside; `git add` would fail on one without a commit
    and record a gitlink for the others)."""
    out = _git(worktree, "ls-files", "ls-files", "-z", "--others", "--exclude-standard")
    return tuple(name.rstrip("/") for name in os.fsdecode(out).split("\0")
                 if name.endswith("/"))


def secret_files(worktree: Path, since: str, env: Mapping[str, str],
                 holds_secret: Callable[[str], bool]) -> tuple[str, ...]:
    """The files of the index `env` names whose lines added since `since` hold a secret."""
    entries = changed_entries(worktree, since, env)
    return tuple(path for path, text in _added_lines(worktree, since, env, entries).items()
                 if text and holds_secret(text))


def scan_change(worktree: Path, since: str, holds_secret: Callable[[str], bool]
                ) -> ChangeFindings:
    """What the worktree's change against `since` may not carry (see the module doc)."""
    untracked = untracked_repositories(worktree)
    if untracked:  # the change cannot even be staged: that is the finding
        return ChangeFindings(nested=untracked)
    with scratch_index(worktree) as env:
        entries = changed_entries(worktree, since, env)
        declared = _declared_submodules(worktree)
        nested = tuple(path for old, new, path in entries
                       if new == GITLINK and old != GITLINK and path not in declared)
        secret = tuple(path for path, text in _added_lines(worktree, since, env,
                                                           entries).items()
                       if text and holds_secret(text))
    return ChangeFindings(secret, nested)


def mask_in_index(worktree: Path, paths: tuple[str, ...], env: Mapping[str, str],
                  mask: Callable[[str], str]) -> None:
    """Each of `paths` in the index `env` names replaced by its content masked by `mask`
    (read as UTF-8, other bytes kept as they are): the worktree's files are not touched."""
    for path in paths:
        staged = _git(worktree, "ls-files", "ls-files", "-s", "-z", "--",
                      f":(literal){path}", env=env).decode(errors="replace").split(" ", 1)[0]
        data = _git(worktree, "cat-file", "cat-file", "blob", f":{path}", env=env)
        masked = mask(data.decode("utf-8", "surrogateescape")).encode("utf-8",
                                                                      "surrogateescape")
        done = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=worktree,
                              input=masked, capture_output=True, check=True)
        _git(worktree, "update-index", "update-index", "--cacheinfo",
             f"{staged or '100644'},{done.stdout.decode().strip()},{path}", env=env)
