"""Folder stages on many local folders, one at a time vs eight at once (SPEC §8.1).

N folders (default 2 and 50; `--long` adds 200), each its own bare repository on the local
forge, run through worktree_add, a change in every folder, publish and worktree_remove with
`--max-parallel 1` and `--max-parallel 8` — the real engine, forge and git. Reported: the
tool's own time of each stage (as its progress observer sees it; the repositories' set-up
and the change script are not counted) and the ratio of the sums, one at a time / eight at
once. On 2 cores the ratio is bounded by the cores git's processes share, not by the 8.

    .venv/bin/python benchmarks/folder_stages.py [--folders 2,50] [--long]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from delivery.agents.replay import ReplayBackend
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunRequest, World, start_run
from delivery.forges.local import LocalForge
from delivery.lang.model import Node

STAGES = ("add", "ship", "remove")
FLOW = """
digraph F {
  graph [goal="Say more", inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="for d in f*; do printf 'more\\\\n' >> $d/app.txt; done"]
  ship [type=publish]
  remove [type=worktree_remove]
  start -> add -> change -> ship -> remove -> exit
}
"""
IDENTITY = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
            "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


@dataclass
class StageTimes(Progress):
    """Seconds of each stage, by node id."""

    seconds: dict[str, float] = field(default_factory=dict)

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        self.seconds[node.id] = seconds


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, **IDENTITY})


def seed_remote(root: Path) -> Path:
    """One bare repository whose main holds app.txt, copied for each folder."""
    work = root / "seed-work"
    work.mkdir(parents=True)
    _git(work, "init", "--quiet", "-b", "main")
    (work / "app.txt").write_text("app\n", encoding="utf-8")
    _git(work, "add", "-A")
    _git(work, "commit", "--quiet", "-m", "initial")
    seed = root / "seed.git"
    _git(root, "clone", "--quiet", "--bare", str(work), str(seed))
    return seed


def run_once(root: Path, seed: Path, folders: int, limit: int) -> dict[str, float]:
    where = root / f"n{folders}-p{limit}"
    remotes = where / "remotes"
    remotes.mkdir(parents=True)
    repos = {}
    for index in range(1, folders + 1):
        name = f"f{index:03}"
        shutil.copytree(seed, remotes / f"{name}.git")
        repos[name] = str(remotes / f"{name}.git")
    workspace = where / "ws"
    workspace.mkdir()
    (where / "flow.dot").write_text(FLOW, encoding="utf-8")
    times = StageTimes()
    request = RunRequest(workflow=where / "flow.dot", inputs={"ticket": "T-1"},
                         workspace=workspace, repos=repos, max_parallel=limit)
    world = World(agent=ReplayBackend({}), git_cache=where / "cache",
                  forge=LocalForge())
    outcome = start_run(request, world, observer=times)
    if outcome.status != "succeeded":
        raise SystemExit(f"{folders} folders, max_parallel {limit}: {outcome.status}: "
                         f"{outcome.failure_reason}")
    return {stage: times.seconds[stage] for stage in STAGES}


def scratch_folder() -> contextlib.AbstractContextManager[str]:
    """Left in `python -m benchmarks`' scratch folder when it runs this (removed after the
    last benchmark, see benchmarks/__main__.py), else a temporary one."""
    scratch = os.environ.get("DELIVERY_BENCH_SCRATCH")
    if scratch:
        return contextlib.nullcontext(tempfile.mkdtemp(dir=scratch, prefix="folders-"))
    return tempfile.TemporaryDirectory(prefix="folders-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", default="2,50",
                        help="comma-separated folder counts (default 2,50)")
    parser.add_argument("--long", action="store_true", help="also 200 folders")
    args = parser.parse_args()
    counts = [int(text) for text in args.folders.split(",") if text.strip()]
    if args.long and 200 not in counts:
        counts.append(200)
    print(f"{'folders':>7} {'max_parallel':>12} {'worktree_add s':>14} {'publish s':>9} "
          f"{'worktree_remove s':>17} {'total s':>8}")
    with scratch_folder() as tmp:
        root = Path(tmp)
        seed = seed_remote(root)
        for folders in counts:
            totals = {}
            for limit in (1, 8):
                seconds = run_once(root, seed, folders, limit)
                totals[limit] = sum(seconds.values())
                print(f"{folders:>7} {limit:>12} {seconds['add']:>14.2f} "
                      f"{seconds['ship']:>9.2f} {seconds['remove']:>17.2f} "
                      f"{totals[limit]:>8.2f}", flush=True)
            print(f"{folders} folders: max_parallel 1 / 8 time ratio: "
                  f"{totals[1] / totals[8]:.2f}", flush=True)


if __name__ == "__main__":
    main()
