"""A large change set on a fake GitHub that enforces GitHub's documented secondary limits
(80 content-creating requests a minute, 500 an hour; 403 with `Retry-After` past them).

N folders (default 50), one repository each with CI, run through preflight, worktrees, a
change in every folder, publish, a probe and a second probe with nothing changed between —
the real engine, forge and git over HTTP, on a simulated clock shared by the fake, the
forge's pacer and the run (no real waiting). Reported:

- failed requests (any answer >= 400; the secondary limit's 403 included): must be 0;
- requests per probe round: GraphQL requests sent by each probe stage (must be 1);
- writes of the probe round where nothing changed (statuses, comment edits): must be 0;
- simulated time of the run and what of it the pacer waited (writes a second apart, first
  pushes 5 at once then one per 2 s), and the most content-creating requests in any 60
  simulated seconds.

    .venv/bin/python benchmarks/pacing_set.py [--folders 50]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from delivery.agents.replay import ReplayBackend
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunRequest, World, start_run
from delivery.forges.github import GitHubForge
from delivery.forges.pacing import Pacer
from delivery.lang.model import Node
from delivery.testing.github import CheckRule, EngineClock, FakeGitHub, ManualClock, Tree
from probes.github import RetryBudget


def _passes(tree: Tree) -> bool:
    return "BUG" not in (tree.read("app.py") or "")


@dataclass
class StageRequests(Progress):
    """The fake's requests sent by each stage, by node id, in order."""

    fake: FakeGitHub
    started_at: int = 0
    stages: list[tuple[str, int, int, int]] = field(default_factory=list)  # id, all, gql, writes

    def stage_started(self, node: Node, attempt: int) -> None:
        self.started_at = len(self.fake.requests)

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        sent = self.fake.requests[self.started_at:]
        graphql = sum(1 for r in sent if r.path == "/api/graphql")
        writes = {id(r) for r in self.fake.write_requests()}
        self.stages.append((node.id, len(sent), graphql,
                            sum(1 for r in sent if id(r) in writes)))


def flow(folders: int) -> str:
    names = ",".join(f"f{i}" for i in range(folders))
    change = "; ".join(f"printf 'print({i + 1})\\\\n' > f{i}/app.py" for i in range(folders))
    return f"""
digraph D {{
  graph [goal="Change every folder", inputs="ticket", folders="{names}"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="{change}"]
  ship [type=publish]
  look [type=probe, probe="pr,threads"]
  again [type=probe, probe="pr,threads"]
  start -> add -> change -> ship -> look -> again -> exit
}}
"""


def measure(folders: int) -> dict[str, float]:
    clock = ManualClock()
    with FakeGitHub(clock=clock) as fake, tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        repos = {}
        for i in range(folders):
            name = f"octo/repo{i}"
            fake.create_repo(name, files={"app.py": "print(0)\n"},
                             check_rules=(CheckRule("ci", predicate=_passes),))
            repos[f"f{i}"] = name
        limits = fake.enforce_secondary_limits()
        fake.clear_requests()
        (root / "flow.dot").write_text(flow(folders), encoding="utf-8")
        environ = {k: v for k, v in {**os.environ, **fake.env()}.items()
                   if k != "DELIVERY_WRITE_SPACING"}
        forge = GitHubForge.from_environment(
            environ, sleep=clock.sleep, clock=clock,
            budget=RetryBudget(attempts=6, wait_seconds=3600),
            pacer=Pacer(clock=clock, sleep=clock.sleep))
        observer = StageRequests(fake)
        (root / "ws").mkdir()
        world = World(agent=ReplayBackend({}), clock=EngineClock(clock), environ=environ,
                      forge=forge, git_cache=root / "cache")
        started_sim, started_wall = clock(), time.perf_counter()
        outcome = start_run(RunRequest(workflow=root / "flow.dot", inputs={"ticket": "T-50"},
                                       workspace=root / "ws", repos=repos, branch="delivery/T-50"),
                            world, observer=observer)
        if outcome.status != "succeeded":
            raise SystemExit(f"the run {outcome.status}: {outcome.failure_reason}")
        failed = [r for r in fake.requests if r.status >= 400]
        times = sorted(r.at for r in fake.write_requests() if r.path.startswith("/api/"))
        busiest = max((sum(1 for t in times if start <= t < start + 60) for start in times),
                      default=0)
        by_stage = {node: (sent, graphql, writes) for node, sent, graphql, writes
                    in observer.stages}
        return {"folders": folders, "failed": len(failed), "refused_by_limits": limits.refused,
                "look_graphql": by_stage["look"][1], "again_graphql": by_stage["again"][1],
                "again_writes": by_stage["again"][2], "writes": len(times),
                "busiest_minute": busiest, "simulated_s": clock() - started_sim,
                "paced_wait_s": forge.pacer.waited, "first_pushes": forge.pacer.first_pushes,
                "wall_s": time.perf_counter() - started_wall}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", type=int, default=50)
    args = parser.parse_args(argv)
    m = measure(args.folders)
    print(f"folders: {m['folders']:.0f}")
    print(f"failed requests: {m['failed']:.0f} (turned away by the secondary limits: "
          f"{m['refused_by_limits']:.0f})")
    print(f"GraphQL requests per probe round: {m['look_graphql']:.0f}, then "
          f"{m['again_graphql']:.0f}")
    print(f"writes of the probe round where nothing changed: {m['again_writes']:.0f}")
    print(f"content-creating requests: {m['writes']:.0f}; the busiest 60 s held "
          f"{m['busiest_minute']:.0f} (GitHub's limit: 80)")
    print(f"simulated time: {m['simulated_s']:.0f} s, of it waited by the pacer "
          f"{m['paced_wait_s']:.0f} s (first pushes: {m['first_pushes']:.0f})")
    print(f"wall time: {m['wall_s']:.1f} s")


if __name__ == "__main__":
    main()
