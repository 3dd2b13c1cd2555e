"""Shared pieces for the tests of people on the run's PR branches (SPEC §7.1 "People on
the branch win") on both forges: a `Place` (the local forge's bare repositories, or the
fake GitHub) with the same repositories, a way to run a workflow there with an observer
between stages, and the scripted person of `delivery.testing.person`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow
from git_helpers import make_remote

from delivery.agents.base import AgentBackend
from delivery.agents.replay import ReplayBackend
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.forges.local import LocalForge
from delivery.lang.model import Node
from delivery.testing.github import FakeGitHub
from delivery.testing.person import GitHubPeople, LocalPeople, People, read_file, ref_sha

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
