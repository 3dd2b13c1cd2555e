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

What is pushed is more than the working tree: the run's own commits not on the remote
(an agent may commit, and commit again) are scanned too, each one's added lines and its
message, and so are the names of the files a change adds. Diffs are read as git stores the
files (`--no-textconv`, `--no-ext-diff`, no replace refs or grafts): a driver or a replace
ref the agent configured cannot show the scan something other than what a push sends.
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
from delivery.git.network import REMOTE
from probes.local_git import git_environment

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


# git as a push sees the objects: a replace ref or a graft the agent wrote would show the
# scan other commits than the ones sent (the push runs from a scratch directory without them)
_AS_STORED = {"GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1",
              "GIT_GRAFT_FILE": os.devnull}
# diffs of files as stored, never through a textconv or an external diff the agent set
_RAW_DIFF = ("--text", "--no-textconv", "--no-ext-diff", "--no-color", "--no-renames")


def _git(cwd: Path, operation: str, *args: str, env: Mapping[str, str] | None = None
         ) -> bytes:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False,
                          env={**git_environment(cwd), **_AS_STORED, **(env or {})})
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
    patch = _git(worktree, "diff", "diff", "--cached", *_RAW_DIFF, "-U0", "--src-prefix=a/",
                 "--dst-prefix=b/", since, env=env)
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
    return _git(worktree, "diff", "diff", "--cached", *_RAW_DIFF, "-U0", since, "--",
                f":(literal){path}",
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
        found = [_named(path, holds_secret) for path, text
                 in _added_lines(worktree, since, env, entries).items()
                 if text and holds_secret(text)]
        found += [_named(path, holds_secret) for _, new, path in entries
                  if new != "000000" and holds_secret(path)]
    found += history_secrets(worktree, since, holds_secret)
    return ChangeFindings(tuple(dict.fromkeys(found)), nested)


def _named(path: str, holds_secret: Callable[[str], bool], commit: str = "") -> str:
    """How a finding names `path` — never with a secret its name holds: then as the file
    name under its first folders that hold none."""
    where = f" (in commit {commit[:10]})" if commit else ""
    if not holds_secret(path):
        return path + where
    clean: list[str] = []
    for part in path.split("/")[:-1]:
        if holds_secret(part):
            break
        clean.append(part)
    under = f"under {'/'.join(clean)}/" if clean else "at the worktree's top"
    return f"a file name {under}{where}"


def history_secrets(worktree: Path, since: str, holds_secret: Callable[[str], bool]
                    ) -> list[str]:
    """The run's own commits that a push would send (HEAD's, on no remote-tracking branch
    and not behind `since`), as findings: a message that holds a secret, a file whose lines
    a commit adds hold one (a merge: the lines its resolution adds), a file name that does."""
    not_since = [] if since == EMPTY_TREE else [since]
    out = _git(worktree, "log", "log", "--format=%x00%H%x00%B%x00", "-p", "--cc", "-U0",
               *_RAW_DIFF, "HEAD", "--not", *not_since, f"--remotes={REMOTE}")
    fields = out.decode("utf-8", errors="replace").split("\0")
    found: list[str] = []
    for at in range(1, len(fields) - 2, 3):
        commit, message, patch = fields[at], fields[at + 1], fields[at + 2]
        if holds_secret(message):
            found.append(f"the message of commit {commit[:10]}")
        for path, added in _patch_additions(patch).items():
            if holds_secret(path) or (added and holds_secret(added)):
                found.append(_named(path, holds_secret, commit))
    return found


def _patch_additions(patch: str) -> dict[str, str]:
    """path -> the lines a patch of `git log -p --cc -U0` adds to it (a combined diff's
    lines: in the result, new to some parent)."""
    added: dict[str, list[str]] = {}
    current: list[str] | None = None
    header = False
    width = 1  # the marker columns: one, or one per parent in a combined diff
    for line in patch.split("\n"):
        if line.startswith(("diff --git ", "diff --cc ", "diff --combined ")):
            header, current = True, None
        elif header and line.startswith("+++ "):
            name = _unquoted(line[4:])
            if name != "/dev/null":
                current = added.setdefault(name.removeprefix("b/"), [])
        elif line.startswith("@@"):
            header = False
            width = len(line) - len(line.lstrip("@")) - 1
        elif not header and current is not None:
            marks = line[:width]
            if "+" in marks and "-" not in marks:
                current.append(line[width:])
    return {path: "\n".join(lines) for path, lines in added.items()}


def _unquoted(name: str) -> str:
    """A path as git's diff headers quote one with unusual characters ("b/a\\tb")."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    raw = name[1:-1].encode("latin-1", errors="replace").decode("unicode_escape")
    return raw.encode("latin-1", errors="replace").decode("utf-8", errors="replace")


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
                              env=git_environment(worktree), input=masked,
                              capture_output=True, check=True)
        _git(worktree, "update-index", "update-index", "--cacheinfo",
             f"{staged or '100644'},{done.stdout.decode().strip()},{path}", env=env)
