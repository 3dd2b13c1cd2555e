"""The two-repository delivery of `delivery demo`, on the fake GitHub: the same sample
repositories (`octo/api`, `octo/web`) with a CI check that runs their tests on each PR
head, the same scripted agent, a reviewer who asks for a change on `web` and approves it
once a new commit answers it, and a meter that counts the fake's requests per phase.

Used by the acceptance tests and `benchmarks/delivery_requests.py`:

    with FakeGitHub() as github:
        repos = create_repos(github)
        meter = RequestMeter(github, reviewer=GitHubReviewer(github, BRANCH))
        outcome = deliver(github, repos, tmp_path, progress=meter)
"""

from __future__ import annotations

import importlib.resources
import os
import shlex
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from delivery.agents.scripted import ScriptedAgent
from delivery.cli.demo import demo_agent
from delivery.cli.demo_files import SAMPLES, TICKET
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.lang.model import Node, NodeType
from delivery.testing.github import CheckRule, FakeGitHub

BRANCH = "delivery/demo-1"
OWNER = "octo"
FOLDERS = ("api", "web")
REVIEWER = "ada"
REVIEW_TEXT = "Please escape the name: it comes from the visitor (html.escape)."
GOAL = "Greet people by name in the API and on the web page"

# Phases of a delivery, by the type of the stage that sent the requests.
PHASES: Mapping[NodeType, str] = {
    NodeType.WORKTREE_ADD: "worktrees", NodeType.WORKTREE_REMOVE: "worktrees",
    NodeType.PUBLISH: "publish", NodeType.PROBE: "probe", NodeType.MERGE: "merge",
    NodeType.RESPOND: "respond",
}


def ci_rule() -> CheckRule:
    """The CI of both samples: their unit tests, run in a checkout of the PR head."""
    return CheckRule("tests", command=[sys.executable, "-m", "unittest", "-q"])


def create_repos(github: FakeGitHub) -> dict[str, str]:
    """`octo/api` and `octo/web` with the demo's sample files; folder → owner/name."""
    repos = {}
    for folder in FOLDERS:
        name = f"{OWNER}/{folder}"
        github.create_repo(name, files=dict(SAMPLES[folder]), check_rules=(ci_rule(),))
        repos[folder] = name
    return repos


@dataclass
class GitHubReviewer:
    """A person on the fake GitHub: after a probe, asks for a change on `web` (once); after
    a publish that moved `web`'s head past that request, approves. It keeps no state of its
    own (it reads the PR's reviews), so it behaves the same across a killed and resumed run."""

    github: FakeGitHub
    branch: str = BRANCH
    repository: str = f"{OWNER}/web"
    actions: list[str] = field(default_factory=list)

    def _pull(self) -> int | None:
        repo = self.github.repository(self.repository)
        numbers = [n for n, pr in repo.pulls.items() if pr.head == self.branch
                   and pr.state == "open" and not pr.merged]
        return numbers[-1] if numbers else None

    def after(self, node: Node) -> None:
        number = self._pull()
        if number is None:
            return
        pr = self.github.pull(self.repository, number)
        mine = [review for review in pr.reviews if review.author == REVIEWER]
        if node.type is NodeType.PROBE and not mine:
            self.github.add_review(self.repository, number, REVIEWER, "CHANGES_REQUESTED",
                                   REVIEW_TEXT)
            self.actions.append(f"changes requested on web#{number}")
        elif node.type is NodeType.PUBLISH and mine and mine[-1].state == "CHANGES_REQUESTED":
            head = self.github.state.head_sha(self.github.repository(self.repository), pr)
            if head != mine[-1].commit_sha:
                self.github.add_review(self.repository, number, REVIEWER, "APPROVED", "Thanks.")
                self.actions.append(f"approved web#{number}")


@dataclass
class RequestMeter(Progress):
    """Counts the fake GitHub's requests per phase (the type of the stage that sent them)
    and per probe round; the reviewer, when given, acts after each stage."""

    github: FakeGitHub
    reviewer: GitHubReviewer | None = None
    phases: Counter[str] = field(default_factory=Counter)
    probe_rounds: list[int] = field(default_factory=list)
    visits: list[tuple[str, str, int]] = field(default_factory=list)  # (node, phase, sent)
    _before: int = 0

    def per_visit(self, phase: str) -> list[int]:
        """The requests of each visit of a stage of `phase`, in order."""
        return [sent for _, of, sent in self.visits if of == phase]

    def stage_started(self, node: Node, attempt: int) -> None:
        self._before = len(self.github.requests)

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        new = self.github.requests[self._before:]
        # the change set's writes (statuses, sticky comments) are counted apart, so that a
        # probe round still reads as its one GraphQL request
        statuses = sum(1 for r in new if (r.method == "POST" and "/statuses/" in r.path)
                       or ("/issues/" in r.path and "/comments" in r.path))
        sent = len(new) - statuses
        phase = PHASES.get(node.type, "other") if node.type else "other"
        self.phases[phase] += sent
        self.phases["change_set"] += statuses
        self.visits.append((node.id, phase, sent))
        if node.type is NodeType.PROBE:
            self.probe_rounds.append(sent)
        if self.reviewer is not None:
            self.reviewer.after(node)


def bundled_workflow() -> Path:
    """The path of the bundled deliver.dot (a real file in an installed package)."""
    resource = importlib.resources.files("delivery.bundled.workflows").joinpath("deliver.dot")
    return Path(str(resource))


def request(root: Path, repos: Mapping[str, str], *, forge: str = "github",
            checks: Mapping[str, str] | None = None) -> RunRequest:
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    python = shlex.quote(sys.executable)
    return RunRequest(workflow=bundled_workflow(), goal=GOAL,
                      inputs={"ticket": TICKET,
                              "check_command": f"{python} -m compileall -q ."},
                      workspace=workspace, run_dir=root / "run", repos=dict(repos),
                      forge=forge, checks=dict(checks or {}), branch=BRANCH)


def deliver(github: FakeGitHub, repos: Mapping[str, str], root: Path, *,
            progress: Progress | None = None, agent: ScriptedAgent | None = None) -> RunOutcome:
    """Run the bundled deliver.dot against the fake GitHub, as `delivery run` would with
    `--repo api=octo/api --repo web=octo/web` inside an Action."""
    world = World(agent=agent or demo_agent(),
                  environ={**os.environ, **github.env()}, git_cache=root / "cache")
    return start_run(request(root, repos), world, observer=progress)

