"""Shared pieces of the change-set tests (issue 21): two protected repositories on the fake
GitHub, a run of a small workflow on the run's branch, and the status a PR head carries."""

from __future__ import annotations

import os
from pathlib import Path

from engine_helpers import FakeClock, write_flow
from github_helpers import CI

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.forges.change_set import CHANGE_SET_CONTEXT
from delivery.testing.github import FakeGitHub

BRANCH = "delivery/T-7"
REPOS = {"api": "octo/api", "web": "octo/web"}


def shipping_flow(change: str, *, then: str = "", graph: str = "",
                  folders: tuple[str, ...] = ("api", "web"), goal: str = "Say hello") -> str:
    """Worktrees in the folders (both by default), the stage `change` (its attributes),
    publish, a probe `look`, then the stages of `then` (node statements, run in their
    order); `graph`: more graph attributes."""
    after = [line.split("[", 1)[0].strip() for line in then.strip().splitlines()]
    chain = " -> ".join(["start", "add", "change", "ship", "look", *after, "exit"])
    return f"""
digraph D {{
  graph [goal="{goal}", inputs="ticket", folders="{','.join(folders)}"{graph}]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [{change}]
  ship [type=publish]
  look [type=probe, probe="pr,threads"]
  {then.strip()}
  {chain}
}}
"""


def change_script(api: str = "print(1)", web: str = "print(2)") -> str:
    """A script stage's attributes writing app.py in both folders."""
    return f"shape=parallelogram, script=\"printf '{api}\\\\n' > api/app.py; " \
           f"printf '{web}\\\\n' > web/app.py\""


def publish_flow(api: str = "print(1)", web: str = "print(2)") -> str:
    """Worktrees, a change in both folders, publish, two probes (nothing changes between)."""
    return shipping_flow(change_script(api, web), then='again [type=probe, probe="pr,threads"]')


def land_flow(merge_attrs: str = "") -> str:
    """A probe, the merge (api before web), a probe (its table is the final one)."""
    return f"""
digraph D {{
  graph [goal="Say hello", inputs="ticket", folders="api,web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  look [type=probe, probe="pr,threads"]
  land [type=merge, order="api,web"{merge_attrs}]
  after [type=probe, probe="pr,threads"]
  start -> look -> land -> after -> exit
}}
"""


def probe_flow() -> str:
    """One probe of both folders' PRs, nothing else."""
    return """
digraph D {
  graph [goal="Look", inputs="ticket", folders="api,web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  look [type=probe, probe="pr,threads"]
  start -> look -> exit
}
"""


def run_on(github: FakeGitHub, root: Path, dot: str, name: str) -> RunOutcome:
    """A fresh run of `dot` on the run's branch in both repositories."""
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    request = RunRequest(workflow=write_flow(root, dot, f"{name}.dot"),
                         inputs={"ticket": "https://github.com/octo/web/issues/7"},
                         workspace=workspace, run_dir=root / name, repos=dict(REPOS),
                         branch=BRANCH)
    world = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=root / "cache",
                  environ={**os.environ, **github.env()})
    return start_run(request, world)


def protected_repos(github: FakeGitHub) -> None:
    """Both repositories with CI, protected: `ci` and the change-set status required."""
    for repository in REPOS.values():
        github.create_repo(repository, files={"app.py": "print(0)\n"}, check_rules=(CI,))
        github.protect(repository, required_contexts=("ci", CHANGE_SET_CONTEXT))


def status(github: FakeGitHub, repository: str, number: int = 1) -> tuple[str, str] | None:
    """The change-set status on the head of PR `number`."""
    pr = github.pull(repository, number)
    return github.status_of(repository, pr.last_head_sha, CHANGE_SET_CONTEXT)


def sticky_comments(github: FakeGitHub, repository: str) -> list[str]:
    """The bodies of the change set's sticky comments on the repository's PRs."""
    return [c.body for c in github.repository(repository).comments.values()
            if "<!-- delivery:change-set" in c.body]
