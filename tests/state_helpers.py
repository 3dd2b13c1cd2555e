"""Shared pieces for tests of the state ref (`--state`, SPEC §13) with a local bare
repository as the state remote: a run started on it, and files planted on its ref as
anyone who can push to the state repository could."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.git.runref import RunRef
from delivery.state.remote import RemoteState, StateRunStores

WAITING = """
digraph W {
  graph [goal="wait"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  tick [shape=parallelogram, script="true"]
  w [type=wait, interval="60s"]
  start -> tick -> w -> tick
  w -> exit [condition="outcome=failed"]
}
"""


def bare(path: Path) -> Path:
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    return path


def state_at(state_repo: Path, home: Path, now: float | None = None) -> RemoteState:
    """The state remote as a job on the machine `home` sees it."""
    return RemoteState(RunRef(str(state_repo), home / "cache" / "state.git"), str(state_repo),
                       (lambda: now) if now is not None else time.time)


def started(tmp_path: Path, state_repo: Path, text: str = WAITING,
            workspace: Path | None = None, agent: str = "") -> RunOutcome:
    """A run started on the state remote (it pauses at its wait)."""
    home = workspace or tmp_path / "starter"
    home.mkdir(exist_ok=True)
    flow = home / "flow.dot"
    flow.write_text(text, encoding="utf-8")
    stores = StateRunStores(state_at(state_repo, home).session("", "starter"))
    return start_run(RunRequest(workflow=flow, workspace=home, agent=agent),
                     World(stores=stores))


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True,
                          check=True).stdout.decode().strip()


def head(state_repo: Path, run_id: str) -> str:
    return git(state_repo, "rev-parse", f"refs/delivery/runs/{run_id}")


def plant(state_repo: Path, run_id: str, files: Mapping[str, bytes | Path | str]) -> str:
    """A commit on the run's ref with `files` (path -> content, a file to take it from, or
    the sha of a blob already in the repository) added to its tree; the new head."""
    ref = f"refs/delivery/runs/{run_id}"
    index = state_repo / "plant-index"
    env_index = {"GIT_INDEX_FILE": str(index)}
    parent = git(state_repo, "rev-parse", ref)
    subprocess.run(["git", "read-tree", parent], cwd=state_repo, check=True,
                   env={**_env(), **env_index})
    hashed: dict[Path, str] = {}
    for name, content in files.items():
        if isinstance(content, str):
            sha = content
        elif isinstance(content, Path):  # a large file is hashed once, whatever its paths
            sha = hashed.get(content) or git(state_repo, "hash-object", "-w", str(content))
            hashed[content] = sha
        else:
            sha = git(state_repo, "hash-object", "-w", "--stdin", stdin=content)
        subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{sha},{name}"],
                       cwd=state_repo, check=True, env={**_env(), **env_index})
    tree = subprocess.run(["git", "write-tree"], cwd=state_repo, capture_output=True,
                          check=True, env={**_env(), **env_index}).stdout.decode().strip()
    index.unlink()
    commit = git(state_repo, "commit-tree", tree, "-p", parent, "-m", "planted")
    git(state_repo, "update-ref", ref, commit, parent)
    return commit


def saved_log(repo: Path, ref: str) -> str:
    """The event log saved at `ref` (in fixed parts under `events.jsonl.parts/`), whole."""
    parts = git(repo, "ls-tree", "--name-only", f"{ref}:events.jsonl.parts").split()
    return "".join(subprocess.run(["git", "cat-file", "blob",
                                   f"{ref}:events.jsonl.parts/{name}"], cwd=repo,
                                  capture_output=True, text=True, check=True).stdout
                   for name in parts)


def huge_blob(state_repo: Path, size: int, chunk: int = 1 << 20) -> str:
    """A blob of `size` bytes written into `state_repo` by `git hash-object --stdin` from a
    generated stream (never a file on disk, never whole in this process); its sha."""
    with subprocess.Popen(["git", "hash-object", "-w", "--stdin"], cwd=state_repo,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        line = b"a stage's endless output, planted on the state ref\n"
        block = (line * (chunk // len(line) + 1))[:chunk]
        for _ in range(size // chunk):
            proc.stdin.write(block)
        proc.stdin.write(block[:size % chunk])
        proc.stdin.close()
        sha = proc.stdout.read().decode().strip()
    assert proc.returncode == 0 and len(sha) == 40
    return sha


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
