"""Does a stage cost more late in a long run? And how fast does a long run resume?

    .venv/bin/python benchmarks/run_growth.py [--stages 5000] [--window 500] [--reps 3]
                                              [--dir PATH] [--logs] [--resume-only]

1. Growth: a linear chain of `--stages` agent stages (replay backend, every stage durable
   before the next, as in `engine_overhead.py`) is run once; the time of every stage is
   taken from the run's own event log (`stage_started` of one stage to `stage_started` of
   the next, so everything the engine does between two stages is counted). Printed: the
   mean ms/stage of the first and the last `--window` stages, and their ratio (1.0 = no
   growth). `--logs` runs it with the Attractor view (`delivery run --logs`) written too,
   whose checkpoint.json lists every completed node, as the Attractor spec's format does.
2. Resume start-up: the same run is killed (in a child process, SIGKILL) right after its
   last-but-one stage was saved, then `resume_run` is called in a fresh process; printed is
   the time from the call to the first stage starting (the observer's `stage_started`), and
   what reading the workflow's model from the run's cache costs (what resume does), beside
   a fresh load of the same copy (parse + build + validate, what resume did before the
   cache, issue 23).
3. Beside it, a whole fresh 10-stage run (start_run() to its return, in a fresh process
   too, alternately with the resumes): the goal is a resume of the long run costing no
   more than 1.3x that (issue 23).
4. For reference, what a person waits for: `delivery resume` of such a paused run (started
   with `delivery run`, killed the same way) and `delivery run` of a fresh 10-stage
   workflow, each timed as a whole process, imports included (`--process-reps` of each,
   alternately; each resume of its own copy of the paused run, written to disk first).

Each figure is the median of `--reps` runs. `--resume-only` skips part 1 (the growth runs)
and measures only parts 2 and 3.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


from engine_overhead import replies_file, run_folder, stage_gaps, write_workflow

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run


def growth(stages: int, window: int, base: Path, logs: bool = False) -> tuple[float, float]:
    """(ms/stage over the first `window` stages, over the last `window`)."""
    folder = Path(tempfile.mkdtemp(dir=base, prefix="growth-"))
    workflow = write_workflow(folder, stages)
    backend = ReplayBackend({f"s{i}": ["ok"] for i in range(1, stages + 1)})
    outcome = start_run(RunRequest(workflow=workflow, goal="bench", workspace=folder,
                                   run_dir=folder / "run",
                                   logs=folder / "attractor" if logs else None),
                        World(agent=backend))
    assert outcome.status == "succeeded", outcome.failure_reason
    gaps = stage_gaps(folder / "run")
    first, last = gaps[:window], gaps[-window:]
    return 1000 * statistics.fmean(first), 1000 * statistics.fmean(last)


# A run killed (SIGKILL) right after its last-but-one stage was saved; started in-process
# (`api`) or through `delivery run` with a replies file in the folder (`cli`), whose run.json
# names its agent for `delivery resume`.
KILLED_RUN = """
import os, signal, sys
from pathlib import Path
from delivery.store import runstore

stages, folder, how = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
original = runstore.LocalRunStore._append_record

def append_record(self, record):
    original(self, record)
    if record.next_node == f"s{stages}":
        os.kill(os.getpid(), signal.SIGKILL)

runstore.LocalRunStore._append_record = append_record
workflow = folder / f"linear_{stages}.dot"
if how == "cli":
    from delivery.cli.main import main
    main(["run", str(workflow), "--agent", "replay:" + str(folder / "replies.json"),
          "--workspace", str(folder), "--run-dir", str(folder / "run")])
else:
    from delivery.agents.replay import ReplayBackend
    from delivery.engine.runner import RunRequest, World, start_run
    backend = ReplayBackend({f"s{i}": ["ok"] for i in range(1, stages + 1)})
    start_run(RunRequest(workflow=workflow, goal="bench", workspace=folder,
                         run_dir=folder / "run"), World(agent=backend))
"""


def _killed_run(stages: int, folder: Path, how: str, env: dict[str, str]) -> None:
    """A paused `stages`-stage run in `folder / "run"` (see KILLED_RUN)."""
    killed = subprocess.run([sys.executable, "-c", KILLED_RUN, str(stages), str(folder), how],
                            env=env, capture_output=True, text=True, check=False)
    if killed.returncode != -signal.SIGKILL:
        raise SystemExit(f"the run to resume was not killed: {killed.stderr[-2000:]}")


RESUME = """
import json, sys, time
from pathlib import Path
from delivery.agents.replay import ReplayBackend
from delivery.engine.run_loop import Progress
from delivery.engine.runner import World, resume_run
from delivery.store.model_cache import load_run_workflow
from delivery.validation.loader import load_workflow

stages, folder = int(sys.argv[1]), Path(sys.argv[2])
first = []

class Observer(Progress):
    def stage_started(self, node, attempt):
        if not first:
            first.append(time.perf_counter())

backend = ReplayBackend({f"s{i}": ["ok"] for i in range(1, stages + 1)})
started = time.perf_counter()
outcome = resume_run(folder / "run", World(agent=backend), observer=Observer())
assert outcome.status == "succeeded", outcome.failure_reason
copy = folder / "run" / "workflow.dot"
cached_from = time.perf_counter()
cached = load_run_workflow(folder / "run", copy, copy.read_bytes())
assert cached.from_cache
cached_load = time.perf_counter() - cached_from
loaded = time.perf_counter()
load_workflow(copy)
load = time.perf_counter() - loaded
print(json.dumps({"first_stage": first[0] - started, "load_workflow": load,
                  "cached_model": cached_load}))
"""


FRESH = """
import sys, time
from pathlib import Path
from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run

stages, folder = int(sys.argv[1]), Path(sys.argv[2])
backend = ReplayBackend({f"s{i}": ["ok"] for i in range(1, stages + 1)})
started = time.perf_counter()
outcome = start_run(RunRequest(workflow=folder / f"linear_{stages}.dot", goal="bench",
                               workspace=folder, run_dir=folder / "run"), World(agent=backend))
assert outcome.status == "succeeded", outcome.failure_reason
print(time.perf_counter() - started)
"""


def fresh_run(stages: int, base: Path) -> float:
    """Seconds of a whole fresh run of `stages` stages, from start_run() to its return, in
    a fresh process (as a resume is measured: imports done, nothing warmed)."""
    folder = Path(tempfile.mkdtemp(dir=base, prefix="fresh-"))
    write_workflow(folder, stages)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", FRESH, str(stages), str(folder)], env=env,
                          capture_output=True, text=True, check=True)
    return float(done.stdout)


def resume_startup(stages: int, base: Path) -> tuple[float, float, float]:
    """(seconds from resume_run() to the first stage, reading the model cache (after the
    resume, warm), a fresh load of the workflow copy)."""
    folder = Path(tempfile.mkdtemp(dir=base, prefix="resume-"))
    write_workflow(folder, stages)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    _killed_run(stages, folder, "api", env)
    done = subprocess.run([sys.executable, "-c", RESUME, str(stages), str(folder)], env=env,
                          capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout)
    return figures["first_stage"], figures["cached_model"], figures["load_workflow"]


FRESH_STAGES = 10
DELIVERY = Path(sys.executable).parent / "delivery"

def _process_seconds(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    return seconds


def resume_processes(stages: int, base: Path, reps: int) -> list[tuple[float, float]]:
    """(seconds of `delivery resume` of a paused `stages`-stage run, of `delivery run` of a
    fresh FRESH_STAGES-stage workflow), each a whole process, `reps` times alternately."""
    paused = Path(tempfile.mkdtemp(dir=base, prefix="resume-cli-"))
    write_workflow(paused, stages)
    replies_file(paused, stages)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    _killed_run(stages, paused, "cli", env)
    fresh = Path(tempfile.mkdtemp(dir=base, prefix="fresh-cli-"))
    workflow = write_workflow(fresh, FRESH_STAGES)
    replies = replies_file(fresh, FRESH_STAGES)
    timed = []
    for rep in range(reps):
        copy = base / f"{paused.name}-{rep}"
        shutil.copytree(paused, copy, symlinks=True)
        os.sync()  # the copy on disk, as a run paused long ago is
        resume = _process_seconds([str(DELIVERY), "resume", str(copy / "run")], copy)
        run = _process_seconds([str(DELIVERY), "run", str(workflow), "--agent",
                                f"replay:{replies}", "--workspace", str(fresh),
                                "--run-dir", str(fresh / f"run-{rep}")], fresh)
        timed.append((resume, run))
    return timed


def _print_growth(grown: list[tuple[float, float]], window: int) -> None:
    for first, last in grown:
        print(f"  run: first {window} {first:.3f} ms/stage, last {window} "
              f"{last:.3f} ms/stage, ratio {last / first:.2f}")
    first = statistics.median(g[0] for g in grown)
    last = statistics.median(g[1] for g in grown)
    ratio = statistics.median(g[1] / g[0] for g in grown)
    print(f"growth: first {window} stages {first:.3f} ms/stage, last {window} "
          f"{last:.3f} ms/stage -> last/first {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=5000)
    parser.add_argument("--window", type=int, default=500)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the runs write (default: a temporary directory)")
    parser.add_argument("--logs", action="store_true",
                        help="also write the Attractor view (--logs) in the growth runs")
    parser.add_argument("--resume-only", action="store_true",
                        help="skip the growth runs: measure only the resume start-up")
    parser.add_argument("--process-reps", type=int, default=3,
                        help="whole-process resumes and fresh runs timed (0: none)")
    args = parser.parse_args()
    with run_folder(args.dir, "run-growth-") as tmp:
        base = Path(tmp)
        grown = [] if args.resume_only else [growth(args.stages, args.window, base, args.logs)
                                             for _ in range(args.reps)]
        resumed, fresh = [], []
        for _ in range(args.reps):  # alternately, so that both see the same machine
            resumed.append(resume_startup(args.stages, base))
            fresh.append(fresh_run(FRESH_STAGES, base))
        processes = resume_processes(args.stages, base, args.process_reps) \
            if args.process_reps else []
    view = " with the --logs Attractor view" if args.logs else ""
    print(f"{args.stages}-stage linear run{view}, every stage durable before the next; "
          f"medians of {args.reps}")
    if grown:
        _print_growth(grown, args.window)
    for seconds, cached, load in resumed:
        print(f"  resume: first stage after {seconds:.3f} s (the model from its cache "
              f"{cached:.3f} s; a fresh load of the workflow {load:.3f} s)")
    resume = statistics.median(r[0] for r in resumed)
    print(f"resume start-up: {resume:.3f} s to the first "
          f"stage; the workflow's model from the run's cache "
          f"{statistics.median(r[1] for r in resumed):.3f} s, where a fresh load (parse + "
          f"validate) takes {statistics.median(r[2] for r in resumed):.3f} s")
    whole = statistics.median(fresh)
    print(f"resume start-up of the {args.stages}-stage run / a whole fresh {FRESH_STAGES}-stage "
          f"run ({whole:.3f} s): {resume / whole:.2f}x (goal <= 1.3x)")
    if processes:
        for resumed_s, run_s in processes:
            print(f"  process: delivery resume {resumed_s:.3f} s, delivery run {run_s:.3f} s")
        resumed_s = statistics.median(p[0] for p in processes)
        run_s = statistics.median(p[1] for p in processes)
        print(f"as whole processes, imports included: delivery resume of the paused "
              f"{args.stages}-stage run {resumed_s:.3f} s, delivery run of a fresh "
              f"{FRESH_STAGES}-stage workflow {run_s:.3f} s: {resumed_s / run_s:.2f}x "
              f"(medians of {len(processes)})")


if __name__ == "__main__":
    main()
