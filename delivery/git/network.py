"""git's network calls — fetch, push, ls-remote — out of the worktree's reach and bounded
in time (SPEC §14: "A worktree's git configuration is not trusted", "Every network call is
bounded").

- **Not the worktree's configuration.** A linked worktree shares the configuration of its
  repository (the clone cache), and an agent working in it can write `remote.*.url`,
  `pushurl`, `url.*.insteadOf` there: the run's branch, and the token with it, would go to
  another host. `-c` cannot undo an `insteadOf` (git takes the longest match, and the
  repository's own entries come first), so a network call never runs in the worktree or the
  clone: it runs in a scratch git directory made for it, whose configuration only delivery
  writes, with the clone's object store (`GIT_OBJECT_DIRECTORY`) and the URL delivery knows
  on its command line. No system or global configuration is read either (an agent can
  write `~/.gitconfig` as well): proxies and CA bundles come from the environment
  (`HTTPS_PROXY`, `GIT_SSL_CAINFO`). A fetch's remote-tracking refs are copied into the
  clone afterwards.
- **The token for that URL only**: `http.<url>.extraHeader`, handed to the one git process
  through its environment (`GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`), never a command line;
  a remote with a `header_source` (a GitHub App's token, renewed) is asked at each call.
- **Bounded**: each call ends by the remote's deadline (the stage's timeout; the git process
  and its helpers are killed together, as a process group) and stops when no byte moved for
  `LOW_SPEED_SECONDS` (`GIT_HTTP_LOW_SPEED_*`).
- **One fetch at a time per clone** (an `flock`): two resumes sharing a cache would
  otherwise update the same remote-tracking refs at once (`cannot lock ref`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from delivery.errors import GitError, GitStalled
from delivery.git.problems import describe, host_of, mask_headers
from probes.local_git import config_entries, git_environment

REMOTE = "origin"
TRACKING = f"refs/remotes/{REMOTE}/"
# a call with no stage timeout is still bounded: long enough for a large first clone
DEFAULT_SECONDS = 1800.0
LOW_SPEED_SECONDS = 60  # no byte for this long: the server stalled
_SCRATCH_CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
                   # the object store is the clone's: nothing may repack or prune it from
                   # here, where only the remote-tracking refs are known
                   "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n")
# what a caller's environment must not bring into a network call: another repository
_REPOSITORY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
                         "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                         "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


@dataclass(frozen=True)
class GitRemote:
    """How git reaches a repository: a URL plus extra HTTP headers (the token travels as a
    header, never inside the URL, a git config or any file), the name a person knows the
    token by, and the `time.monotonic()` by which its network calls must end (None: each
    call gets DEFAULT_SECONDS). `header_source`, when given, is asked for the headers at
    each network call instead (a token that is renewed while a remote is held)."""

    url: str
    http_headers: tuple[str, ...] = ()
    token_name: str = ""
    deadline: float | None = None
    timeout: float | None = None  # the seconds the deadline was set from
    header_source: Callable[[], tuple[str, ...]] | None = field(
        default=None, compare=False, repr=False)

    def current_headers(self) -> tuple[str, ...]:
        """The headers for a call made now."""
        return self.header_source() if self.header_source is not None else self.http_headers

    def within(self, seconds: float | None) -> GitRemote:
        """This remote with its calls bounded by `seconds` from now (a stage's timeout)."""
        if seconds is None:
            return self
        return replace(self, deadline=time.monotonic() + seconds, timeout=seconds)

    def bounded_like(self, other: GitRemote) -> GitRemote:
        """This remote under `other`'s deadline (the same stage)."""
        return replace(self, deadline=other.deadline, timeout=other.timeout)

    def git_environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment variables that hand the headers, for this URL only, to one git
        process (git ≥ 2.31): nothing is written to a config file, and unlike `git -c` the
        value is not on a command line other users can read. Numbered after the
        GIT_CONFIG_* entries already in `base` (default: this process's environment),
        which stay in force."""
        return header_environment(self.current_headers(), base, url=self.url)


def header_environment(headers: Sequence[str], base: Mapping[str, str] | None = None, *,
                       url: str) -> dict[str, str]:
    """`http.<url>.extraHeader` entries for one git process: git sends them only to
    requests under `url` (same scheme, host and port, path below it), so a redirect or a
    rewritten URL never carries them to another host. Entries already in `base` (the
    caller's own GIT_CONFIG_* settings) are kept."""
    return config_entries(os.environ if base is None else base,
                          [(f"http.{url}.extraHeader", header) for header in headers])


def network_environment(remote: GitRemote, base: Mapping[str, str] | None = None, *,
                        headers: Sequence[str] | None = None) -> dict[str, str]:
    """The environment of a network call to `remote`: no configuration file but the
    repository's own, no prompt, a low-speed limit, the token for `remote.url` only
    (`headers`, default the remote's current ones)."""
    env = {key: value for key, value in (os.environ if base is None else base).items()
           if key not in _REPOSITORY_VARIABLES}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""})
    env.setdefault("GIT_HTTP_LOW_SPEED_LIMIT", "1")
    env.setdefault("GIT_HTTP_LOW_SPEED_TIME", str(LOW_SPEED_SECONDS))
    sent = remote.current_headers() if headers is None else tuple(headers)
    if sent:
        env.update(header_environment(sent, env, url=remote.url))
    return env


def seconds_left(remote: GitRemote) -> float:
    if remote.deadline is None:
        return DEFAULT_SECONDS
    return max(0.0, remote.deadline - time.monotonic())


def run_bounded(command: Sequence[str], *, env: Mapping[str, str], cwd: Path,
                seconds: float, stdin: bytes | None = None
                ) -> tuple[subprocess.CompletedProcess[bytes], bool]:
    """Run `command` for at most `seconds`; (what it did, whether it was killed). The
    process runs in its own process group, killed whole at the deadline: git's transport
    helpers (`git-remote-https`, `ssh`) would otherwise hold its pipes open."""
    with subprocess.Popen(list(command), cwd=cwd, env=dict(env), start_new_session=True,
                          stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        killed = False
        try:
            out, err = process.communicate(stdin, timeout=seconds)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            out, err = process.communicate()
            killed = True
        except BaseException:
            _kill_group(process.pid)
            raise
    return subprocess.CompletedProcess(list(command), process.returncode, out, err), killed


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stalled(remote: GitRemote, what: str) -> str:
    """Why a killed network call failed, in a person's words."""
    if remote.timeout is not None:
        return (f"{what} stalled: not done within the stage's timeout of "
                f"{remote.timeout:g} s")
    return f"{what} stalled: not done within {DEFAULT_SECONDS:g} s"


def stall_fix(remote: GitRemote) -> str:
    return (f"check that {host_of(remote.url)} can be reached (or raise the node's "
            "timeout), then resume")


def run_network(remote: GitRemote, operation: str, args: Sequence[str], *, git_dir: Path,
                objects: Path | None = None, location: str, what: str, fix: str = "",
                check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """`git <args>` against `remote` with `git_dir` as the repository (its configuration
    delivery's own) and `objects` as its object store; GitError on failure (`check`) or
    when it stalls (always), its message from git's stderr with the headers blanked.
    `what` says the call in words ("git push to URL")."""
    headers = remote.current_headers()  # once: the ones sent are the ones blanked
    env = network_environment(remote, headers=headers)
    env["GIT_DIR"] = str(git_dir)
    if objects is not None:
        env["GIT_OBJECT_DIRECTORY"] = str(objects)
    done, killed = run_bounded(["git", *args], env=env, cwd=git_dir,
                               seconds=seconds_left(remote))
    if killed:
        raise GitStalled(operation, location, stalled(remote, what), stall_fix(remote))
    if check and done.returncode != 0:
        problem, better_fix = describe(done.stderr.decode(errors="replace"),
                                       headers, remote=remote.url,
                                       token_name=remote.token_name, what=what)
        error = GitStalled if problem.startswith(f"{what} stalled") else GitError
        raise error(operation, location, problem, better_fix or fix)
    return done


@contextmanager
def scratch_git_dir() -> Iterator[Path]:
    """An empty git directory whose configuration only delivery wrote."""
    path = Path(tempfile.mkdtemp(prefix="delivery-git-"))
    try:
        (path / "refs").mkdir()
        (path / "objects").mkdir()
        (path / "HEAD").write_text("ref: refs/heads/delivery\n", encoding="utf-8")
        (path / "config").write_text(_SCRATCH_CONFIG, encoding="utf-8")
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """An exclusive lock between processes and threads (fcntl; released on close)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch_lock(git_dir: Path) -> Path:
    """The lock every fetch into `git_dir` (a clone: the worktrees' common directory)
    takes: its remote-tracking refs change under it only."""
    return git_dir / "delivery-fetch.lock"


def _local(git_dir: Path, *args: str, stdin: bytes | None = None) -> str:
    """A local git command in `git_dir` (no network, no token, no hook: a
    `reference-transaction` hook of the agent's would run on every update-ref)."""
    env = git_environment(git_dir)
    env.update({"GIT_DIR": str(git_dir), "GIT_TERMINAL_PROMPT": "0"})
    done = subprocess.run(["git", *args], cwd=git_dir, env=env, input=stdin,
                          capture_output=True, check=False)
    if done.returncode != 0:
        problem, fix = describe(done.stderr.decode(errors="replace"), ())
        raise GitError(args[0], str(git_dir), problem, fix)
    return done.stdout.decode(errors="replace")


def _tracking(git_dir: Path, objects: Path | None = None) -> dict[str, str]:
    """refs/remotes/origin/* of `git_dir` (its HEAD symref aside): ref -> sha. With
    `objects`, `git_dir` is a scratch directory: read without any configuration."""
    if objects is None:
        out = _local(git_dir, "for-each-ref", "--format=%(objectname) %(refname)", TRACKING)
    else:
        out = _scratch_refs(git_dir, objects)
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, ref = line.partition(" ")
        if ref and ref != f"{TRACKING}HEAD":
            refs[ref] = sha
    return refs


def _scratch_refs(git_dir: Path, objects: Path) -> str:
    env = {key: value for key, value in os.environ.items()
           if key not in _REPOSITORY_VARIABLES}
    env.update({"GIT_DIR": str(git_dir), "GIT_OBJECT_DIRECTORY": str(objects),
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    done = subprocess.run(["git", "for-each-ref", "--format=%(objectname) %(refname)",
                           TRACKING], cwd=git_dir, env=env, capture_output=True, check=False)
    if done.returncode != 0:
        problem, fix = describe(done.stderr.decode(errors="replace"), ())
        raise GitError("for-each-ref", str(git_dir), problem, fix)
    return done.stdout.decode(errors="replace")


def fetch_into(clone: Path, remote: GitRemote, *, location: str = "") -> None:
    """Every branch of `remote` as `refs/remotes/origin/*` of `clone` (the common
    directory of the worktrees), forced updates and deletions included."""
    # git runs with its cwd in a scratch directory: a relative path would lead elsewhere
    clone = clone.absolute()
    objects = clone / "objects"
    with locked(fetch_lock(clone)), scratch_git_dir() as scratch:
        before = _tracking(clone)
        # what the clone knew: the remote sends only what it lacks
        (scratch / "packed-refs").write_text(
            "".join(f"{sha} {ref}\n" for ref, sha in sorted(before.items())),
            encoding="utf-8")
        run_network(remote, "fetch", ["fetch", "--quiet", "--prune", "--no-tags",
                                      "--no-write-fetch-head", remote.url,
                                      f"+refs/heads/*:{TRACKING}*"],
                    git_dir=scratch, objects=objects, location=location or str(clone),
                    what=f"git fetch from {remote.url}",
                    fix="check that the repository exists and can be read")
        after = _tracking(scratch, objects)
        gone = "".join(f"delete {ref}\n" for ref in before if ref not in after)
        moved = "".join(f"update {ref} {sha}\n" for ref, sha in after.items()
                        if before.get(ref) != sha)
        # deletions first, apart: a branch `a` removed and `a/b` created cannot share
        # one transaction
        for commands in (gone, moved):
            if commands:
                _local(clone, "update-ref", "--stdin", stdin=commands.encode())


def push_to(clone: Path, remote: GitRemote, refspec: str, *, lease: str | None = None,
            force: bool = False, location: str = "", fix: str = "") -> None:
    """Push `refspec` (`<sha>:<ref>`) from `clone`'s objects to `remote.url`; `lease`
    (`<ref>:<expected sha or empty>`) makes it fail when the remote moved meanwhile. A
    pushed branch is recorded as `refs/remotes/origin/<branch>` of the clone, as git does
    for a configured remote."""
    clone = clone.absolute()
    args = ["push", "--quiet", "--no-verify"]
    if lease is not None:
        args.append(f"--force-with-lease={lease}")
    if force:
        args.append("--force")
    with scratch_git_dir() as scratch:
        run_network(remote, "push", [*args, remote.url, refspec], git_dir=scratch,
                    objects=clone / "objects", location=location or str(clone),
                    what=f"git push to {remote.url}", fix=fix)
    sha, _, ref = refspec.partition(":")
    if ref.startswith("refs/heads/"):
        with locked(fetch_lock(clone)):
            _local(clone, "update-ref", TRACKING + ref[len("refs/heads/"):], sha)


__all__ = ["DEFAULT_SECONDS", "LOW_SPEED_SECONDS", "GitRemote", "fetch_into",
           "header_environment", "locked", "mask_headers", "network_environment",
           "push_to", "run_bounded", "run_network", "seconds_left"]
