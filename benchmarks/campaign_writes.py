"""What a campaign writes on GitHub (issue 37 item 6): campaign.dot (and deliver.dot beside
it) over N repositories on the fake GitHub over real HTTP, with GitHub's secondary limits
enforced (80 content-creating requests a minute, 500 an hour, per token; 403 with
`Retry-After` past them).

Each run is a fresh fleet (`delivery.testing.fleet`): N repositories whose CI is held after
the publish and finishes at staggered times — one folder after the first probe (the
"one folder's change" below), then a quarter of the set after each later probe — and 10%
of the folders (at least one) failing CI once and repaired. The fake, the forge's pacer
and its write budget, and the run's waits share one simulated clock (`ManualClock`): no
real waiting. When the hour's budget is spent the run pauses (reason `rate_limit`, the
time it may go on); the benchmark fast-forwards the clock to that time and resumes it with
a new forge, as a new process would. Reported per workflow and N:

- content-creating requests (REST writes, GraphQL mutations; git pushes not counted) per
  folder, against the acceptance bound of 10 per folder plus 3 per repair (a repair: a
  push of a folder's branch after its first — deliver.dot's one repair session may push to
  many folders; the agent's repair sessions are shown beside);
- writes after one folder's change: the objects (PRs, issues) written from the moment that
  folder's CI finishes to the next release of CI (its status, row, merge in campaign.dot);
  the acceptance bound is that folder's PR and at most two other objects (3);
- bytes written per folder (the bodies of those requests);
- failed requests (any answer >= 400) and those the secondary limits refused;
- pauses for the limits and the simulated time paused;
- the ratios of writes and bytes per folder at the largest N over the smallest, against
  the acceptance bounds 1.1x and 1.3x.

    .venv/bin/python benchmarks/campaign_writes.py [--folders 12,40 | --long]
        [--workflows campaign,deliver] [--failing 0.1]

`--long` is 50 and 200 folders: several minutes.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from delivery.agents.scripted import ScriptedAgent
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.errors import PauseReason, paused_why
from delivery.forges.github import GitHubForge
from delivery.forges.pacing import SPACING_VARIABLE, Pacer
from delivery.forges.write_budget import WriteBudget
from delivery.lang.model import Node
from delivery.testing.fleet import GOAL, TICKET, Fleet
from delivery.testing.github import EngineClock, FakeGitHub, ManualClock, RecordedRequest
from delivery.validation.loader import load_workflow
from probes.github import RetryBudget

ROOT = Path(__file__).resolve().parent.parent

WORKFLOWS = {"campaign": ROOT / "workflows" / "campaign.dot",
             "deliver": ROOT / "workflows" / "deliver.dot"}
BRANCH = "delivery/fleet-1"
SCRATCH = "DELIVERY_BENCH_SCRATCH"
PER_MINUTE, PER_HOUR = 80, 500  # GitHub's documented secondary limits
PATIENCE = 300.0  # the forge's retry budget: a longer wait pauses the run
# acceptance bounds (issue 37)
PER_FOLDER, PER_REPAIR, OBJECTS, WRITES_GROWTH, BYTES_GROWTH = 10, 3, 3, 1.1, 1.3


@dataclass
class StaggeredCi(Progress):
    """CI held everywhere until probed: after the first probe (`observe`) one folder's CI
    finishes (`single`), after each later one a quarter of the rest. `window` is the range
    of the fake's requests from that one folder's release to the next release."""

    github: FakeGitHub
    repos: list[str]
    single: str
    released: int = 0
    window: list[int] = field(default_factory=list)

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.id != "observe":
            return
        if not self.window:
            self.window.append(len(self.github.requests))
            self.github.hold_checks(self.single, False)
            return
        if len(self.window) == 1:
            self.window.append(len(self.github.requests))
        rest = [r for r in self.repos if r != self.single]
        step = math.ceil(len(rest) / 4)
        for repository in rest[self.released:self.released + step]:
            self.github.hold_checks(repository, False)
        self.released += step


@dataclass
class Figures:
    workflow: str
    folders: int
    status: str
    reason: str
    merged: int
    repairs: int  # folders' repair pushes: a branch's pushes after its first
    sessions: int  # repair sessions of the agent
    writes: int  # content-creating API requests
    bytes: int  # their bodies
    one_change_objects: list[str]  # written after one folder's CI finished
    failed: int  # answers >= 400
    refused: int  # turned away by the secondary limits
    pauses: int
    paused_s: float  # simulated seconds the run stood paused for the limits
    simulated_s: float
    wall_s: float


def _world(github: FakeGitHub, clock: ManualClock, agent: ScriptedAgent, root: Path,
           limits: tuple[int, int]) -> World:
    """A new process's world: a forge whose windows start empty (the run restores them),
    pacing as a user gets it (a second between writes) under GitHub's limits."""
    environ = {k: v for k, v in {**os.environ, **github.env()}.items()
               if k != SPACING_VARIABLE}
    forge = GitHubForge.from_environment(
        environ, sleep=clock.sleep, clock=clock,
        budget=RetryBudget(attempts=6, wait_seconds=PATIENCE),
        pacer=Pacer(clock=clock, sleep=clock.sleep,
                    budget=WriteBudget(per_minute=limits[0], per_hour=limits[1])))
    return World(agent=agent, clock=EngineClock(clock),
                 environ=environ, forge=forge, git_cache=root / "cache")


_REPO = r"/api/v3/repos/(?P<repo>[^/]+/[^/]+)"


def written_object(github: FakeGitHub, path: str) -> str:
    """What a write changed, as `owner/name#N` (a PR or an issue): a comment by the issue
    it is on, a status by the PR whose head it is on; else the request's path."""
    if match := re.fullmatch(_REPO + r"/issues/comments/(?P<id>\d+)", path):
        comment = github.repository(match["repo"]).comments.get(int(match["id"]))
        return f"{match['repo']}#{comment.number}" if comment else path
    if match := re.fullmatch(_REPO + r"/(?:issues|pulls)/(?P<n>\d+)(?:/.*)?", path):
        return f"{match['repo']}#{match['n']}"
    if match := re.fullmatch(_REPO + r"/statuses/(?P<sha>[0-9a-f]{40})", path):
        pulls = github.repository(match["repo"]).pulls
        numbers = [n for n, pr in pulls.items() if pr.last_head_sha == match["sha"]]
        return f"{match['repo']}#{numbers[0]}" if numbers else path
    return path


def _api_writes(github: FakeGitHub, start: int = 0, end: int | None = None,
                ) -> list[RecordedRequest]:
    chosen = {id(r) for r in github.requests[start:end]}
    return [r for r in github.write_requests()
            if id(r) in chosen and r.path.startswith("/api/")]


def repair_pushes(github: FakeGitHub) -> int:
    """Pushes of a folder's branch after its first, from the fake's records: the repairs
    the bound counts (deliver.dot's one repair session may push to many folders)."""
    pushes = Counter(r.path.removesuffix("/git-receive-pack") for r in github.requests
                     if r.method == "POST" and r.path.endswith("/git-receive-pack"))
    return sum(count - 1 for count in pushes.values())


def measure(workflow: str, folders: int, base: Path, *, failing: float,
            limits: tuple[int, int] = (PER_MINUTE, PER_HOUR)) -> Figures:
    """One run of `workflow` over a fresh fleet of `folders`, on the fake enforcing
    `limits` (a minute's, an hour's), resumed after each pause for them until it ends."""
    path = WORKFLOWS[workflow]
    root = Path(tempfile.mkdtemp(dir=base, prefix=f"{workflow}-{folders}-"))
    (root / "workspace").mkdir()
    fleet = Fleet.of(folders, failing=failing)
    clock = ManualClock()
    with FakeGitHub(clock=clock) as github:
        repos = fleet.github_repos(github)
        for repository in repos.values():
            github.hold_checks(repository)
        enforced = github.enforce_secondary_limits(per_minute=limits[0], per_hour=limits[1])
        github.clear_requests()
        single = next(repos[f] for f in fleet.folders if f not in fleet.failing)
        ci = StaggeredCi(github, list(repos.values()), single)
        agent = fleet.agent(load_workflow(path))
        request = RunRequest(workflow=path, goal=GOAL, inputs={"ticket": TICKET},
                             workspace=root / "workspace", run_dir=root / "run", repos=repos,
                             branch=BRANCH)
        started_sim, started_wall = clock(), time.perf_counter()
        outcome: RunOutcome = start_run(request, _world(github, clock, agent, root, limits),
                                        observer=ci)
        pauses, paused = 0, 0.0
        while outcome.status == "paused" and outcome.pause_reason is PauseReason.RATE_LIMIT:
            _, until = paused_why(outcome.context)
            resume_at = datetime.fromisoformat(until).timestamp()
            pauses += 1
            paused += max(resume_at - clock(), 0.0)
            clock.now = max(clock.now, resume_at)  # the fake's clock fast-forwarded
            outcome = resume_run(root / "run", _world(github, clock, agent, root, limits),
                                 observer=ci)
        writes = _api_writes(github)
        window = ci.window + [None] * (2 - len(ci.window))
        touched = sorted({written_object(github, r.path)
                          for r in _api_writes(github, window[0] or 0, window[1])}) \
            if ci.window else []
        merged = sum(1 for name in repos.values()
                     for pr in github.repository(name).pulls.values()
                     if pr.head == BRANCH and pr.merged)
        return Figures(
            workflow, folders, outcome.status, outcome.failure_reason, merged,
            repair_pushes(github),
            sum(1 for node, _ in agent.prompts if node.split("@", 1)[0] == "repair"),
            len(writes), sum(len(r.body) for r in writes), touched,
            sum(1 for r in github.requests if r.status >= 400), enforced.refused, pauses,
            paused, clock() - started_sim, time.perf_counter() - started_wall)


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


def report(rows: list[Figures], failing: float,
           limits: tuple[int, int] = (PER_MINUTE, PER_HOUR)) -> None:
    print(f"secondary limits enforced: {limits[0]}/min, {limits[1]}/h; CI staggered; "
          f"{failing:.0%} of folders (at least one) fail CI once and are repaired")
    print(f"{'workflow':<9} {'N':>4} {'status':<9} {'merged':>7} {'repairs':>7} {'sessions':>8} "
          f"{'writes':>6} {'bound':>5} {'writes/folder':>13} {'bytes/folder':>12} "
          f"{'one change':>10} {'failed':>6} {'refused':>7} {'pauses':>6} {'paused s':>8} "
          f"{'simulated s':>11} {'wall s':>6}")
    for r in rows:
        bound = PER_FOLDER * r.folders + PER_REPAIR * r.repairs
        print(f"{r.workflow:<9} {r.folders:>4} {r.status:<9} {r.merged:>3}/{r.folders:<3} "
              f"{r.repairs:>7} {r.sessions:>8} {r.writes:>6} {bound:>5} "
              f"{r.writes / r.folders:>13.2f} "
              f"{r.bytes / r.folders:>12.0f} {len(r.one_change_objects):>10} {r.failed:>6} "
              f"{r.refused:>7} {r.pauses:>6} {r.paused_s:>8.0f} {r.simulated_s:>11.0f} "
              f"{r.wall_s:>6.1f}")
        if r.reason:
            print(f"    {r.status}: {r.reason}")
    print()
    for r in rows:
        share = (PER_FOLDER * r.folders + PER_REPAIR * r.repairs) / r.folders
        name = f"{r.workflow} N={r.folders}"
        print(f"{name}: content-creating requests per folder: {r.writes / r.folders:.2f} "
              f"(bound, {PER_FOLDER} a folder + {PER_REPAIR} a repair: {share:.2f}; "
              f"{_yes(r.writes / r.folders <= share)})")
        print(f"{name}: bytes written per folder: {r.bytes / r.folders:.0f}")
        touched = len(r.one_change_objects)
        print(f"{name}: objects written after one folder's change: {touched} "
              f"(<= {OBJECTS}: {_yes(0 < touched <= OBJECTS)}): "
              f"{' '.join(r.one_change_objects)}")
        print(f"{name}: failed runs: {0 if r.status == 'succeeded' else 1}; failed requests: "
              f"{r.failed}; refused by the limits: {r.refused}; pauses for the limits: "
              f"{r.pauses}, paused {r.paused_s:.0f} s")
    for workflow in dict.fromkeys(r.workflow for r in rows):
        mine = [r for r in rows if r.workflow == workflow]
        if len(mine) < 2 or not mine[0].writes:
            continue
        low, high = mine[0], mine[-1]
        writes = (high.writes / high.folders) / (low.writes / low.folders)
        size = (high.bytes / high.folders) / (low.bytes / low.folders)
        print(f"{workflow}: writes per folder N={high.folders} / N={low.folders}: "
              f"{writes:.2f} (<= {WRITES_GROWTH}: {_yes(writes <= WRITES_GROWTH)})")
        print(f"{workflow}: bytes per folder N={high.folders} / N={low.folders}: "
              f"{size:.2f} (<= {BYTES_GROWTH}: {_yes(size <= BYTES_GROWTH)})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", default="12,40",
                        help="comma-separated fleet sizes, the smallest first")
    parser.add_argument("--long", action="store_true", help="the big sizes: 50,200")
    parser.add_argument("--workflows", default="campaign,deliver")
    parser.add_argument("--failing", type=float, default=0.1,
                        help="share of folders failing CI once (at least one if above 0)")
    parser.add_argument("--per-minute", type=int, default=PER_MINUTE,
                        help="the fake's limit of content-creating requests a minute")
    parser.add_argument("--per-hour", type=int, default=PER_HOUR,
                        help="the fake's limit of content-creating requests an hour")
    args = parser.parse_args(argv)
    limits = (args.per_minute, args.per_hour)
    sizes = [50, 200] if args.long else [int(n) for n in args.folders.split(",")]
    workflows = args.workflows.split(",")
    unknown = [w for w in workflows if w not in WORKFLOWS]
    if unknown:
        parser.error(f"unknown workflow {', '.join(unknown)}; known: {', '.join(WORKFLOWS)}")
    # `python -m benchmarks` removes its scratch folder at the very end (see its docstring);
    # on its own the script removes its own
    with tempfile.TemporaryDirectory(prefix="campaign-writes-") as own:
        base = Path(os.environ.get(SCRATCH) or own)
        base.mkdir(parents=True, exist_ok=True)
        rows = []
        for workflow in workflows:
            for size in sizes:
                rows.append(measure(workflow, size, base, failing=args.failing, limits=limits))
                print(f"  ran {workflow} over {size} folders", file=sys.stderr, flush=True)
    report(rows, args.failing, limits)


if __name__ == "__main__":
    main()
