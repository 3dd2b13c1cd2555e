"""Shared by the change-set write tests (issue 37 item 1): N repositories on the fake GitHub
with a CI check (it fails while `app.py` holds BUG), a small workflow over their folders
run through the real engine, and the fake's recorded writes mapped to the objects they
changed (a PR, an issue), so that a test can say how many objects one change touched."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from change_set_helpers import shipping_flow
from engine_helpers import FakeClock, write_flow

from delivery.agents.base import AgentBackend
from delivery.agents.replay import ReplayBackend
from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.lang.model import Node
from delivery.testing.github import CheckRule, FakeGitHub, RecordedRequest, Tree
from delivery.testing.two_repos import bundled_workflow

BRANCH = "delivery/T-9"
MARKER = "<!-- delivery:change-set"


def _passes(tree: Tree) -> bool:
    return "BUG" not in (tree.read("app.py") or "")


def folders(n: int) -> list[str]:
    return [f"f{i}" for i in range(n)]


def make_repos(github: FakeGitHub, n: int, *, held: bool = False) -> dict[str, str]:
    """`octo/r<i>` for folder `f<i>`, each with the `ci` check (`held`: still running)."""
    repos = {}
    for i, folder in enumerate(folders(n)):
        name = f"octo/r{i}"
        github.create_repo(name, files={"app.py": "print(0)\n"},
                           check_rules=(CheckRule("ci", predicate=_passes),))
        github.hold_checks(name, held)
        repos[folder] = name
    return repos


def change_flow(n: int, *, bug: str = "", graph: str = "", change: str = "") -> str:
    """Worktrees, a change in every folder (`bug`: the folder whose change fails CI;
    `change`: the change stage's attributes instead of the script), publish, a probe."""
    names = folders(n)
    script = "; ".join(f"printf '{'BUG' if f == bug else f'print({i + 1})'}\\\\n' > {f}/app.py"
                       for i, f in enumerate(names))
    return shipping_flow(change or f'shape=parallelogram, script="{script}"', graph=graph,
                         folders=tuple(names), goal="Change every folder")


def probe_flow(n: int) -> str:
    """One probe of every folder's PR (the run's branch), nothing else."""
    return f"""
digraph D {{
  graph [goal="Look", inputs="ticket", folders="{','.join(folders(n))}"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  look [type=probe, probe="pr,threads"]
  start -> look -> exit
}}
"""


@dataclass
class After(Progress):
    """Does `act()` once the stage `node` finished: a person or CI acting mid-run."""

    node: str
    act: Callable[[], None]

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.id == self.node:
            self.act()


def run_on(github: FakeGitHub, root: Path, dot: str, name: str, repos: dict[str, str], *,
           ticket: str = "T-9", progress: Progress | None = None,
           agent: AgentBackend | None = None) -> RunOutcome:
    """A fresh run of `dot` (its own run directory) on the run's branch."""
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    request = RunRequest(workflow=write_flow(root, dot, f"{name}.dot"),
                         inputs={"ticket": ticket}, workspace=workspace,
                         run_dir=root / name, repos=dict(repos), branch=BRANCH)
    world = World(agent=agent or ReplayBackend({}), clock=FakeClock(),
                  git_cache=root / "cache", environ={**os.environ, **github.env()})
    return start_run(request, world, observer=progress)


def api_writes(github: FakeGitHub, since: int = 0) -> list[RecordedRequest]:
    """The content-creating requests (REST writes, GraphQL mutations) after request
    number `since`; git pushes are not among them."""
    chosen = {id(r) for r in github.requests[since:]}
    return [r for r in github.write_requests()
            if id(r) in chosen and r.path.startswith("/api/")]


_REPO = r"/api/v3/repos/(?P<repo>[^/]+/[^/]+)"


def written_objects(github: FakeGitHub, writes: Iterable[RecordedRequest]) -> set[str]:
    """What each write changed, as `owner/name#N` (a PR or an issue): a comment by the
    issue it is on, a status by the PR whose head it is on; else the request's path."""
    objects: set[str] = set()
    for request in writes:
        objects.add(_object(github, request.path))
    return objects


def _object(github: FakeGitHub, path: str) -> str:
    if match := re.fullmatch(_REPO + r"/issues/comments/(?P<id>\d+)", path):
        repo = github.repository(match["repo"])
        return f"{match['repo']}#{repo.comments[int(match['id'])].number}"
    if match := re.fullmatch(_REPO + r"/(?:issues|pulls)/(?P<n>\d+)(?:/.*)?", path):
        return f"{match['repo']}#{match['n']}"
    if match := re.fullmatch(_REPO + r"/statuses/(?P<sha>[0-9a-f]{40})", path):
        repo = github.repository(match["repo"])
        numbers = [n for n, pr in repo.pulls.items() if pr.last_head_sha == match["sha"]]
        return f"{match['repo']}#{numbers[0]}" if numbers else path
    return path


def sticky(github: FakeGitHub, repository: str, number: int) -> list[str]:
    """The bodies of the change set's sticky comments on issue or PR `number`."""
    return [c.body for c in github.repository(repository).comments.values()
            if c.number == number and MARKER in c.body]


# -- the bundled deliver.dot over N repositories, CI finishing at different times --------
@dataclass
class Measure:
    """What a whole delivery wrote: content-creating requests and their bytes."""

    status: str
    reason: str
    writes: int
    bytes: int
    repairs: int


@dataclass
class StaggeredCi(Progress):
    """CI held everywhere; after each probe a third of the repositories' CI finishes."""

    github: FakeGitHub
    repos: list[str]
    released: int = 0

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.id != "observe" or self.released >= len(self.repos):
            return
        step = -(-len(self.repos) // 3)
        for repository in self.repos[self.released:self.released + step]:
            self.github.hold_checks(repository, False)
        self.released += step


def _reply(**updates: object) -> str:
    return "Done.\n\n" + json.dumps({"context_updates": {"summary": "done", **updates}})


def deliver_n(github: FakeGitHub, root: Path, n: int, *, broken: str = "f1") -> Measure:
    """The bundled deliver.dot over `n` repositories: `broken`'s change fails its CI and
    is repaired once; every PR merges. Writes are the fake's content-creating requests."""
    repos = make_repos(github, n, held=True)
    scope = {"type": "goal", "goal": "Change every folder"}
    change = {f"{f}/app.py": ("BUG\n" if f == broken else f"print({i + 1})\n")
              for i, f in enumerate(folders(n))}
    agent = ScriptedAgent({
        "scope": [ScriptedTurn(json.dumps({"context_updates": {"scope": scope}}))],
        "plan": [ScriptedTurn(json.dumps({"context_updates": {"plan": "every folder"}}))],
        "implement": [ScriptedTurn(_reply(), files=change)],
        "repair": [ScriptedTurn(_reply(answers={}), files={f"{broken}/app.py": "print(9)\n"})],
    })
    workspace = root / "ws"
    workspace.mkdir()
    since = len(github.requests)
    request = RunRequest(workflow=bundled_workflow(), goal="Change every folder",
                         inputs={"ticket": "T-9"}, workspace=workspace, run_dir=root / "run",
                         repos=repos, branch=BRANCH)
    world = World(agent=agent, clock=FakeClock(), git_cache=root / "cache",
                  environ={**os.environ, **github.env()})
    outcome = start_run(request, world, observer=StaggeredCi(github, list(repos.values())))
    writes = api_writes(github, since)
    repairs = sum(1 for node, _ in agent.prompts if node == "repair")
    return Measure(outcome.status, outcome.failure_reason, len(writes),
                   sum(len(r.body) for r in writes), repairs)
