"""Requests per phase of a whole delivery on the fake GitHub, and the wall time of
`delivery demo`.

The delivery is the demo's, on GitHub: the bundled deliver.dot over two repositories
(`octo/api`, `octo/web`) with a scripted agent — the api check fails and is repaired, a
reviewer asks for a change on web and approves it, both merge in order, the worktrees are
removed (`delivery.testing.two_repos`). Requests are counted by the fake per phase: the
type of the stage that sent them (publish: REST + git push; probe: GraphQL; merge: GraphQL
read + REST; worktrees: git fetches + a repository read). Alongside, the same delivery
through REST-only probing would need 4 requests per PR per probe round (pull, check runs,
combined status, reviews — see benchmarks/probe_requests.py).

    .venv/bin/python benchmarks/delivery_requests.py [--repeats 3] [--no-demo]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from delivery.cli.main import main as delivery_main
from delivery.testing.github import FakeGitHub
from delivery.testing.two_repos import FOLDERS, GitHubReviewer, RequestMeter, create_repos, deliver

PHASES = ("worktrees", "publish", "probe", "merge", "other")
REST_PER_PR_PER_ROUND = 4


def one_delivery() -> tuple[Counter[str], dict[str, list[int]], float, str]:
    with FakeGitHub() as github, tempfile.TemporaryDirectory() as scratch:
        repos = create_repos(github)
        meter = RequestMeter(github, reviewer=GitHubReviewer(github))
        started = time.perf_counter()
        outcome = deliver(github, repos, Path(scratch), progress=meter)
        seconds = time.perf_counter() - started
        if outcome.status != "succeeded":
            raise SystemExit(f"the delivery failed: {outcome.failure_reason}")
        visits = {phase: meter.per_visit(phase) for phase in PHASES}
        return meter.phases, visits, seconds, " -> ".join(outcome.path)


def demo_seconds() -> float:
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        code = delivery_main(["demo", "--dir", str(Path(scratch) / "demo")], out=io.StringIO(),
                             err=io.StringIO())
        seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit("delivery demo failed")
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-demo", action="store_true", help="skip timing delivery demo")
    args = parser.parse_args(argv)
    runs = [one_delivery() for _ in range(args.repeats)]
    phases, visits, _, path = runs[0]
    rounds = visits["probe"]
    print(f"two-repository delivery on the fake GitHub ({len(FOLDERS)} folders)")
    print(f"path: {path}")
    print(f"{'phase':<10}| requests | per stage visit")
    for phase in PHASES:
        print(f"{phase:<10}| {phases[phase]:>8} | {visits[phase] if phase != 'other' else ''}")
    total = sum(phases.values())
    print(f"{'total':<10}| {total:>8} |")
    rest_probe = len(rounds) * REST_PER_PR_PER_ROUND * len(FOLDERS)
    print(f"probe rounds: {len(rounds)}, requests per round: {rounds} "
          f"(REST-only probing: {REST_PER_PR_PER_ROUND * len(FOLDERS)} per round, "
          f"{rest_probe} in all)")
    if any(run[0] != phases for run in runs[1:]):
        print("note: the request counts differed between repeats")
    wall = statistics.median(run[2] for run in runs)
    print(f"delivery wall time (median of {len(runs)}): {wall:.2f} s")
    if not args.no_demo:
        demo = statistics.median(demo_seconds() for _ in range(args.repeats))
        print(f"delivery demo wall time (median of {args.repeats}): {demo:.2f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
