"""Shared pieces for the tests of people on the run's PR branches (SPEC §7.1 "People on
the branch win") on both forges: a `Place` (the local forge's bare repositories, or the
fake GitHub) with the same repositories, a way to run a workflow there with an observer
between stages, and the scripted person of `delivery.testing.person`."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import FakeClock, write_flow
from git_helpers import make_remote

from delivery.agents.base import AgentBackend, SessionRequest, TurnSink
from delivery.agents.replay import ReplayBackend
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.forges.local import LocalForge
from delivery.lang.model import Node
from delivery.testing.github import FakeGitHub
from delivery.testing.person import (
    IDENTITY,
    GitHubPeople,
    LocalPeople,
    People,
    read_file,
    ref_sha,
)

BRANCH = "delivery/t-19"
TICKET = "https://tracker.example/browse/T-19"
FILES = {"app.py": "print('hello')\n", "shared.txt": "greeting: hello\n"}


@dataclass
class Place:
    """Where the repositories and PRs live, for one test."""

    kind: str  # local | github
    root: Path
    repos: dict[str, str]  # folder -> repository (a path, or owner/name)
    people: People
    github: FakeGitHub | None = None
    forge: LocalForge | None = None
    runs: int = 0

    def git_dir(self, folder: str) -> Path:
        return self.people.git_dir(self.repos[folder])

    def read(self, folder: str, path: str, ref: str = f"refs/heads/{BRANCH}") -> str | None:
        return read_file(self.git_dir(folder), ref, path)

    def head(self, folder: str, ref: str = f"refs/heads/{BRANCH}") -> str:
        return ref_sha(self.git_dir(folder), ref)

    def pulls(self, folder: str) -> list[tuple[int, str]]:
        return [(view.number, view.state)
                for view in self.people.pulls(self.repos[folder], BRANCH)]

    def world(self, agent: AgentBackend | None = None) -> World:
        environ = {**os.environ, **(self.github.env() if self.github else {})}
        return World(agent=agent or ReplayBackend({}), clock=FakeClock(),
                     git_cache=self.root / "cache", environ=environ, forge=self.forge)

    def run(self, dot: str, *, observer: Progress | None = None,
            agent: AgentBackend | None = None, workflow: Path | None = None,
            inputs: Mapping[str, str] | None = None) -> RunOutcome:
        """A run in this place; every run of a test shares the workspace and the branch
        (a second run on the same ticket)."""
        self.runs += 1
        workspace = self.root / "ws"
        workspace.mkdir(exist_ok=True)
        flows = self.root / f"flow{self.runs}"
        flows.mkdir(exist_ok=True)
        path = workflow or write_flow(flows, dot)
        request = RunRequest(workflow=path, inputs=dict(inputs or {"ticket": TICKET}),
                             workspace=workspace, run_dir=self.root / f"run{self.runs}",
                             repos=dict(self.repos), branch=BRANCH,
                             forge="github" if self.github else "local")
        return start_run(request, self.world(agent), observer=observer)


def make_place(kind: str, root: Path, folders: tuple[str, ...] = ("web",),
               files: Mapping[str, str] | None = None) -> Iterator[Place]:
    root.mkdir(parents=True, exist_ok=True)
    files = dict(files or FILES)
    if kind == "local":
        (root / "remotes").mkdir()
        repos = {folder: str(make_remote(root / "remotes", folder, files))
                 for folder in folders}
        forge = LocalForge()
        yield Place(kind, root, repos, LocalPeople(forge), forge=forge)
        return
    with FakeGitHub() as github:
        repos = {}
        for folder in folders:
            github.create_repo(f"octo/{folder}", files=files)
            repos[folder] = f"octo/{folder}"
        yield Place(kind, root, repos, GitHubPeople(github), github=github)


@pytest.fixture(params=["local", "github"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """The same repository `web` on the local forge and on the fake GitHub."""
    yield from make_place(request.param, tmp_path / request.param)


@dataclass
class Between(Progress):
    """An observer that calls `actions[node_id]` after that stage (each once)."""

    actions: dict[str, Callable[[], None]] = field(default_factory=dict)

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        action = self.actions.pop(node.id, None)
        if action is not None:
            action()


def bundled_deliver() -> Path:
    """The bundled workflows/deliver.dot, as installed."""
    return Path(__file__).resolve().parent.parent / "workflows" / "deliver.dot"


def _sh(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=check, env={**os.environ, **IDENTITY})


def merge_base_in(worktree: Path, base: str = "main") -> list[str]:
    """What a repair agent does about a conflict with the base: merge it in (uncommitted:
    publishing commits) and resolve each conflicting file keeping both sides' lines; the
    files it resolved."""
    if _sh(worktree, "merge-base", "--is-ancestor", f"origin/{base}", "HEAD",
           check=False).returncode == 0:
        return []
    merged = _sh(worktree, "merge", "--no-edit", "--no-commit", "--no-ff", f"origin/{base}",
                 check=False)
    if merged.returncode == 0:
        return []
    resolved = _sh(worktree, "diff", "--name-only", "--diff-filter=U").stdout.split()
    for name in resolved:
        with tempfile.TemporaryDirectory(prefix="resolve-") as scratch:
            sides = []
            for stage in ("2", "1", "3"):  # ours, the merge base, theirs
                side = Path(scratch) / stage
                shown = _sh(worktree, "show", f":{stage}:{name}", check=False)
                side.write_text(shown.stdout if shown.returncode == 0 else "",
                                encoding="utf-8")
                sides.append(str(side))
            union = subprocess.run(["git", "merge-file", "-p", "--union", *sides],
                                   capture_output=True, text=True, check=False)
            (worktree / name).write_text(union.stdout, encoding="utf-8")
        _sh(worktree, "add", name)
    return resolved


def _reply(summary: str, **updates: object) -> str:
    return f"{summary}\n\n" + json.dumps({"context_updates": {"summary": summary, **updates}})


def thread_answers(prompt: str, repair: int) -> dict[str, dict[str, object]]:
    """An answer, resolving it, to every thread in deliver.dot's repair prompt: each
    `## <folder>: …` heading is followed by that folder's `pr.raw` (JSON)."""
    answers: dict[str, dict[str, object]] = {}
    lines = prompt.splitlines()
    for index, line in enumerate(lines[:-1]):
        if not line.startswith("## ") or ":" not in line:
            continue
        folder = line[3:].split(":", 1)[0].strip()
        try:
            raw = json.loads(lines[index + 1])
        except ValueError:
            continue
        for thread in raw.get("threads", []) if isinstance(raw, dict) else []:
            if isinstance(thread, dict) and thread.get("id"):
                answers[f"{folder}:{thread['id']}"] = {
                    "reply": f"Answered in answers.txt (repair {repair}).", "resolve": True}
    return answers


@dataclass
class RepairingAgent:
    """An editing agent for deliver.dot that never runs out of turns: implement changes
    `app.py`, the first line of `shared.txt` and adds `creds.txt` in every folder; each
    repair merges the base in where it moved (resolving conflicts keeping both sides) and
    answers the feedback with a new line in `answers.txt`. Prompts are kept."""

    name: str = "repairing"
    prompts: list[tuple[str, str]] = field(default_factory=list)
    repairs: int = 0

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> _Session:
        return _Session(self, node_id, workspace)

    def save_state(self) -> dict[str, Any]:
        return {"repairs": self.repairs}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        self.repairs = int(state.get("repairs", 0))

    def turn(self, node_id: str, workspace: Path, prompt: str) -> str:
        self.prompts.append((node_id, prompt))
        folders = sorted(p for p in workspace.iterdir() if (p / ".git").exists())
        if node_id == "scope":
            return json.dumps({"context_updates": {"scope": {
                "type": "leaf", "ticket": TICKET, "parent": None}}})
        if node_id == "plan":
            return json.dumps({"context_updates": {"plan": "change every folder"}})
        if node_id == "implement":
            for folder in folders:
                (folder / "app.py").write_text("print('hello, people')\n", encoding="utf-8")
                shared = ["greeting: hello, people" if line.startswith("greeting:") else line
                          for line in (folder / "shared.txt").read_text(
                              encoding="utf-8").splitlines()]
                (folder / "shared.txt").write_text("\n".join(shared) + "\n", encoding="utf-8")
                (folder / "creds.txt").write_text("token=not-a-secret\n", encoding="utf-8")
            return _reply("Changed the greeting everywhere.")
        if node_id == "repair":
            self.repairs += 1
            for folder in folders:
                merge_base_in(folder)
                with (folder / "answers.txt").open("a", encoding="utf-8") as out:
                    out.write(f"answer {self.repairs}\n")
            return _reply(f"Repair {self.repairs}: merged the base, answered the review.",
                          answers=thread_answers(prompt, self.repairs))
        return _reply(f"{node_id}: nothing to do.")


@dataclass
class _Session:
    agent: RepairingAgent
    node_id: str
    workspace: Path

    def send(self, message: str, sink: TurnSink | None = None) -> str:
        node_id = sink.node_id if sink is not None and sink.node_id else self.node_id
        return self.agent.turn(node_id, self.workspace, message)
