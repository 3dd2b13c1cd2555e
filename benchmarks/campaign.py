"""A campaign over N repositories: workflows/campaign.dot (one stage per folder, SPEC §8.1)
beside workflows/deliver.dot (one agent session over every folder) on the same ticket.

For each forge (the local forge; the fake GitHub over real HTTP, write pacing off), each
workflow and each N, a fresh fleet (`delivery.testing.fleet`): N repositories, a share of
them (`--failing`, 10%, at least one) failing CI once, and a scripted agent that really
sleeps `--seconds-per-folder` for every folder a turn edits — deliver.dot's implement edits
all N in one turn, campaign.dot's implement@<folder> one each, up to the run's
max_parallel at once. Each run is its own process (`--child`), so its peak memory is its
own. Every figure is read from the run afterwards:

- time to all merged: from `run_started` to the end of the merge stage after which no PR
  was left unmerged (events.jsonl), and its growth t(N)/t(smallest N);
- agent calls: the agent's log of its sessions (one line per call);
- largest prompt: the biggest prompt.md of an agent or prompt stage (bytes), and its growth;
- peak memory: the run process's ru_maxrss;
- PRs merged, from the forge's own records (local pulls.json; the fake's pulls).

    .venv/bin/python benchmarks/campaign.py [--folders 2,8,24 | --long] [--seconds-per-folder 0.2]
        [--failing 0.1] [--forges local,github] [--workflows campaign,deliver] [--max-parallel 8]

Acceptance (issue 36): at 15 s a folder and max_parallel 8, campaign.dot's t(24)/t(2) <= 3.5
on the local forge (`--folders 2,24 --seconds-per-folder 15 --forges local`); the largest
prompt at N = 200 <= 1.5x the one at N = 2, also with `--failing 1`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from delivery.engine.runner import RunRequest, World, start_run
from delivery.testing.fleet import GOAL, TICKET, Fleet, calls
from delivery.testing.github import FakeGitHub
from delivery.validation.loader import load_workflow

ROOT = Path(__file__).resolve().parent.parent

WORKFLOWS = {"campaign": ROOT / "workflows" / "campaign.dot",
             "deliver": ROOT / "workflows" / "deliver.dot"}
BRANCH = "delivery/fleet-1"
PROMPTED = ("agent", "prompt")  # node types whose stages send a prompt to the agent
SCRATCH = "DELIVERY_BENCH_SCRATCH"


@dataclass
class Figures:
    workflow: str
    forge: str
    folders: int
    status: str
    merged: int  # PRs merged, from the forge's records
    all_merged_s: float  # run_started -> the merge stage that left no PR unmerged
    run_s: float  # run_started -> run_finished
    agent_calls: int
    largest_prompt: int  # bytes
    largest_prompt_stage: str
    peak_mib: float
    reason: str = ""


def workflow_path(name: str) -> Path:
    """A bundled workflow's name (`campaign`, `deliver`) or the path of a .dot file."""
    return WORKFLOWS[name] if name in WORKFLOWS else Path(name).resolve()


def workflow_name(name: str) -> str:
    return name if name in WORKFLOWS else Path(name).stem


# -- one run, in its own process -------------------------------------------------------
def child(spec: dict[str, Any]) -> None:
    """Run one campaign as `spec` says and print the process's own figures as JSON."""
    root = Path(spec["root"])
    workflow = Path(spec["workflow"])
    fleet = Fleet.of(spec["folders"], failing=spec["failing"])
    agent = fleet.agent(load_workflow(workflow), seconds_per_folder=spec["seconds"],
                        log=root / "calls.log")
    request = RunRequest(workflow=workflow, goal=GOAL, inputs={"ticket": TICKET},
                         workspace=root / "workspace", run_dir=root / "run",
                         repos=spec["repos"], forge=spec["forge"], checks=spec["checks"],
                         branch=BRANCH, max_parallel=spec["max_parallel"] or None)
    world = World(agent=agent, git_cache=root / "cache",
                  environ={**os.environ, **spec["env"]})
    outcome = start_run(request, world)
    print(json.dumps({"status": outcome.status, "reason": outcome.failure_reason,
                      "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DELIVERY_WRITE_SPACING": "0"}
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run of {spec['workflow']} over {spec['folders']} folders "
                         f"failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- reading the run -------------------------------------------------------------------
def _events(run_dir: Path) -> list[dict[str, Any]]:
    with (run_dir / "events.jsonl").open(encoding="utf-8") as log:
        return [json.loads(line) for line in log if line.strip()]


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def times(run_dir: Path) -> tuple[float, float]:
    """(seconds from run_started to the end of the last merge stage, to run_finished)."""
    events = _events(run_dir)
    began = next(_ts(e) for e in events if e["type"] == "run_started")
    kinds: dict[str, str] = {}
    merged_at = ended = began
    for event in events:
        if event["type"] == "stage_started":
            kinds[event["node"]] = event.get("node_type", "")
        elif event["type"] == "stage_finished" and kinds.get(event["node"]) == "merge":
            merged_at = _ts(event)
        if event["type"] == "run_finished":
            ended = _ts(event)
    return merged_at - began, max(ended, _ts(events[-1])) - began


def largest_prompt(run_dir: Path) -> tuple[int, str]:
    """(bytes, stage) of the largest prompt.md of an agent or prompt stage: `<node>/<n>/`
    or, for a foreach stage, `<node>@<folder>/<n>/`."""
    kinds = {e["node"]: e.get("node_type", "") for e in _events(run_dir)
             if e["type"] == "stage_started"}
    best = (0, "")
    for prompt in run_dir.glob("*/*/prompt.md"):
        stage = prompt.parent.parent.name
        if kinds.get(stage.split("@", 1)[0]) in PROMPTED:
            best = max(best, (prompt.stat().st_size, f"{stage}/{prompt.parent.name}"))
    return best


def merged_local(repos: dict[str, str]) -> int:
    count = 0
    for path in repos.values():
        records = Path(path) / "delivery" / "pulls.json"
        if records.is_file():
            pulls = json.loads(records.read_text(encoding="utf-8"))["pulls"]
            count += sum(1 for p in pulls if p["head"] == BRANCH and p["state"] == "merged")
    return count


def merged_github(github: FakeGitHub, repos: dict[str, str]) -> int:
    return sum(1 for name in repos.values()
               for pr in github.repository(name).pulls.values()
               if pr.head == BRANCH and pr.merged)


def measure(workflow: str, forge: str, folders: int, base: Path, *, seconds: float,
            failing: float, max_parallel: int) -> Figures:
    name = workflow_name(workflow)
    root = Path(tempfile.mkdtemp(dir=base, prefix=f"{name}-{forge}-{folders}-"))
    (root / "workspace").mkdir()
    fleet = Fleet.of(folders, failing=failing)
    spec: dict[str, Any] = {"root": str(root), "workflow": str(workflow_path(workflow)),
                            "folders": folders, "failing": failing, "seconds": seconds,
                            "forge": forge, "max_parallel": max_parallel}
    if forge == "local":
        repos = fleet.local_remotes(root)
        spec.update(repos=repos, checks=fleet.local_checks(root, root / "workspace"), env={})
        ran = _run_child(spec)
        merged = merged_local(repos)
    else:
        with FakeGitHub() as github:
            repos = fleet.github_repos(github)
            spec.update(repos=repos, checks={}, env=github.env())
            ran = _run_child(spec)
            merged = merged_github(github, repos)
    run_dir = root / "run"
    all_merged, total = times(run_dir)
    size, stage = largest_prompt(run_dir)
    return Figures(workflow_name(workflow), forge, folders, ran["status"], merged, all_merged,
                   total, len(calls(root / "calls.log")), size, stage,
                   ran["peak_kib"] / 1024, ran["reason"])


# -- the report ------------------------------------------------------------------------
def report(rows: list[Figures], seconds: float, failing: float) -> None:
    print(f"agent: {seconds:g} s per folder edited; {failing:.0%} of folders (at least one) "
          "fail CI once")
    print(f"{'workflow':<9} {'forge':<7} {'N':>4} {'status':<10} {'merged':>7} "
          f"{'all merged s':>12} {'t(N)/t(N0)':>10} {'agent calls':>11} "
          f"{'largest prompt B':>16} {'growth':>7} {'peak MiB':>8}  largest prompt stage")
    for row in rows:
        first = next(r for r in rows if (r.workflow, r.forge) == (row.workflow, row.forge))
        growth = row.all_merged_s / first.all_merged_s if first.all_merged_s else 0.0
        prompt_growth = row.largest_prompt / first.largest_prompt \
            if first.largest_prompt else 0.0
        print(f"{row.workflow:<9} {row.forge:<7} {row.folders:>4} {row.status:<10} "
              f"{row.merged:>3}/{row.folders:<3} {row.all_merged_s:>12.2f} {growth:>10.2f} "
              f"{row.agent_calls:>11} {row.largest_prompt:>16} {prompt_growth:>7.2f} "
              f"{row.peak_mib:>8.0f}  {row.largest_prompt_stage}")
        if row.reason:
            print(f"    failure: {row.reason}")
    for (workflow, forge) in dict.fromkeys((r.workflow, r.forge) for r in rows):
        mine = [r for r in rows if (r.workflow, r.forge) == (workflow, forge)]
        low, high = mine[0], mine[-1]
        if len(mine) < 2 or not low.all_merged_s or not low.largest_prompt:
            continue
        print(f"{workflow} on {forge}: t({high.folders})/t({low.folders}) "
              f"{high.all_merged_s / low.all_merged_s:.2f}; largest prompt "
              f"N={high.folders} / N={low.folders}: "
              f"{high.largest_prompt / low.largest_prompt:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", default="2,8,24",
                        help="comma-separated fleet sizes, the smallest first")
    parser.add_argument("--long", action="store_true", help="the big sizes: 2,50,200")
    parser.add_argument("--seconds-per-folder", type=float, default=0.2)
    parser.add_argument("--failing", type=float, default=0.1,
                        help="share of folders failing CI once (at least one if above 0)")
    parser.add_argument("--forges", default="local,github")
    parser.add_argument("--workflows", default="campaign,deliver",
                        help="bundled workflow names or paths of .dot files")
    parser.add_argument("--max-parallel", type=int, default=0,
                        help="folders a foreach stage runs at once (0: the workflow's, 8)")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return
    sizes = [2, 50, 200] if args.long else [int(n) for n in args.folders.split(",")]
    base = args.dir or Path(os.environ.get(SCRATCH) or tempfile.mkdtemp(prefix="campaign-"))
    base.mkdir(parents=True, exist_ok=True)
    rows = []
    for forge in args.forges.split(","):
        for workflow in args.workflows.split(","):
            for size in sizes:
                rows.append(measure(workflow, forge, size, base,
                                    seconds=args.seconds_per_folder, failing=args.failing,
                                    max_parallel=args.max_parallel))
                print(f"  ran {workflow_name(workflow)} on {forge} over {size} folders",
                      file=sys.stderr, flush=True)
    report(rows, args.seconds_per_folder, args.failing)


if __name__ == "__main__":
    main()
