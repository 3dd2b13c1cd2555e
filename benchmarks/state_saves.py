"""Does a save of the state ref (event mode, `--state`, SPEC §13) cost more late in a run?

    .venv/bin/python benchmarks/state_saves.py [--stages 300] [--window 50] [--dir PATH]

A linear chain of `--stages` agent stages (replay backend) runs twice: locally, and in event
mode with its state on a local bare repository (a commit and a compare-and-swap push after
every stage). The time of every stage is taken from the run's own event log (one
`stage_started` to the next). Printed:

- growth: the mean ms/stage of the last `--window` event-mode stages over the first;
- the floor: one incremental commit plus one push to a local bare repository, measured on
  its own — of a one-file run directory that grows by a line (the limit uses it: the least
  any save can cost), and, for scale, of what one stage adds (a stage folder, two events,
  the status) to a run directory as large as the finished run's;
- event-mode ms/stage against the limit max(5 x local, local + 2 x floor).

Each figure is given in CPU time (this process and the git processes it ran: what a save
costs, little moved by other work on a shared machine) and in wall time.

Saves are incremental (`RunTree`: the run directory's trees kept in memory, no git process
but the push, stage folders whose stage is over never listed again, the event log in fixed
parts), so growth stays near 1.0. What still grows with the run, measured: the root tree
(one entry per node, ~40 bytes each, hashed once per save) and, in the push, git's
connectivity walk of the new commit's tree on the receiving side — a few ms at 300 stages
against a local bare repository; GitHub's receiving side runs on GitHub's machines.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_overhead import stage_gaps, write_workflow

from delivery.agents.replay import ReplayBackend
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunRequest, World, start_run
from delivery.git.runref import RunRef
from delivery.lang.model import Node
from delivery.state.remote import RemoteState, StateRunStores


def _cpu() -> float:
    """CPU seconds of this process and its finished children (every git a save runs):
    unlike wall time, barely moved by other work on a loaded machine."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class Clocks(Progress):
    """The CPU clock at every stage start."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    def stage_started(self, node: Node, attempt: int) -> None:
        self.starts.append(_cpu())


def run(stages: int, base: Path, event_mode: bool
        ) -> tuple[list[float], list[float], Path]:
    """(wall seconds, CPU seconds) between consecutive stage starts; the run directory."""
    folder = Path(tempfile.mkdtemp(dir=base, prefix="saves-"))
    workflow = write_workflow(folder, stages)
    world = World(agent=ReplayBackend({f"s{i}": ["ok"] for i in range(1, stages + 1)}))
    if event_mode:
        remote = folder / "state.git"
        subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
        state = RemoteState(RunRef(str(remote), folder / "scratch.git"), str(remote))
        world.stores = StateRunStores(state.session("", "bench"))
    clocks = Clocks()
    outcome = start_run(RunRequest(workflow=workflow, goal="bench", workspace=folder),
                        world, observer=clocks)
    assert outcome.status == "succeeded", outcome.failure_reason
    cpu = [b - a for a, b in itertools.pairwise(clocks.starts)]
    return stage_gaps(outcome.run_dir), cpu, outcome.run_dir


def floor(base: Path, template: Path | None = None, saves: int = 30) -> tuple[float, float]:
    """ms of one incremental commit + one push to a local bare repository: the median wall
    time and the mean CPU time. `template`: a run directory to start from (a save then
    adds what one stage adds: a stage folder of five small files and two events); without
    it, a run directory of one file that grows by one line."""
    folder = Path(tempfile.mkdtemp(dir=base, prefix="floor-"))
    remote = folder / "state.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    ref = RunRef(str(remote), folder / "scratch.git")
    run_dir = folder / "run"
    if template is not None:
        shutil.copytree(template, run_dir)
    else:
        run_dir.mkdir()
    log = run_dir / "events.jsonl"
    # the template's stages are over, as a resumed run's are (the store settles them)
    head = ref.commit(run_dir, None, "start", settle=_stage_folders(run_dir))
    assert ref.push("r", head, None)
    times = []
    cpu = []
    for n in range(saves):
        with log.open("a", encoding="utf-8") as handle:
            for kind in ("stage_started", "stage_finished"):
                handle.write(json.dumps({"seq": n, "type": kind, "node": f"x{n}"}) + "\n")
        if template is not None:
            stage = run_dir / f"x{n}" / "1"
            stage.mkdir(parents=True)
            for name in ("prompt.md", "response.md", "stdout.txt", "stderr.txt",
                         "status.json"):
                (stage / name).write_text(f"{name} of stage x{n}\n", encoding="utf-8")
        started, used = time.perf_counter(), _cpu()
        sha = ref.commit(run_dir, head, f"save {n}", {"status.json": f"{n}".encode()},
                         settle=[f"x{n}/1"] if template is not None else [])
        assert ref.push("r", sha, head)
        times.append(time.perf_counter() - started)
        cpu.append(_cpu() - used)
        head = sha
    return 1000 * statistics.median(times[3:]), 1000 * statistics.fmean(cpu[3:])


def _stage_folders(run_dir: Path) -> list[str]:
    return [f"{node.name}/{attempt.name}" for node in run_dir.iterdir() if node.is_dir()
            for attempt in node.iterdir() if attempt.is_dir() and attempt.name.isdigit()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=300)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="state-saves-") as tmp:
        base = Path(tmp)
        local_wall, local_cpu, _ = run(args.stages, base, event_mode=False)
        event_wall, event_cpu, run_dir = run(args.stages, base, event_mode=True)
        tiny_wall, tiny_cpu = floor(base)
        least_wall, least_cpu = floor(base, run_dir)
    print(f"{args.stages}-stage run, windows of {args.window} stages; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"floor of a one-file run directory (the limit's): CPU {tiny_cpu:.1f} ms, wall "
          f"{tiny_wall:.1f} ms; floor of one stage's save on a {args.stages}-stage run "
          f"directory: CPU {least_cpu:.1f} ms, wall {least_wall:.1f} ms")
    for label, local_gaps, gaps, least in (("CPU", local_cpu, event_cpu, tiny_cpu),
                                           ("wall", local_wall, event_wall, tiny_wall)):
        first = 1000 * statistics.fmean(gaps[:args.window])
        last = 1000 * statistics.fmean(gaps[-args.window:])
        event = 1000 * statistics.fmean(gaps)
        local = 1000 * statistics.fmean(local_gaps)
        limit = max(5 * local, local + 2 * least)
        print(f"{label}: event mode first {first:.1f} ms/stage, last {last:.1f} ms/stage, "
              f"last/first {last / first:.2f} (limit 1.30)")
        print(f"{label}: local run {local:.1f} ms/stage; floor (one-file commit + push) "
              f"{least:.1f} ms;"
              f" event mode {event:.1f} ms/stage = {event / local:.1f}x local; limit "
              f"max(5 x local, local + 2 x floor) = {limit:.1f} ms: event/limit "
              f"{event / limit:.2f}")


if __name__ == "__main__":
    main()
