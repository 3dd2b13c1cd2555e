"""Per-stage overhead of delivery's run engine against LangGraph, both checkpointing to disk.

    .venv/bin/python benchmarks/engine_overhead.py [--stages 1000] [--reps 3] [--dir PATH]
                                                   [--durability sync|async|exit] [--profile]
                                                   [--cli]

Both engines run the same linear workflow of trivial stages, `start -> s1 -> ... -> sN ->
exit`, in one process, side by side:

- delivery: a DOT file of agent nodes (`type=prompt`) answered by the replay backend. Every
  stage writes its `prompt.md` / `response.md` / `status.json` in `<node>/<attempt>/`, and
  its events and stage record to `events.jsonl`, made durable with one flush before the
  next stage starts (`checkpoint.json` is rewritten now and then, see
  `delivery.store.runstore`).
- LangGraph (`pip install delivery[bench]`): a StateGraph chain of N nodes, each appending
  its name to `path` and setting `last`, compiled with `SqliteSaver` on a file (WAL) and run
  with `durability="sync"`, so a checkpoint is committed after every step before the next
  one starts, as delivery does.

Each timing covers everything after interpreter start: building/parsing the workflow,
running it and closing its stores. One warm-up run of each engine (imports, caches) is
excluded; the repetitions alternate between the engines so that disk noise hits both.
`--profile` runs delivery once more under cProfile and prints where its time goes.
`--dir /dev/shm` (a RAM disk: flushes cost nothing) compares the engines' CPU alone. The
kernel's share of the CPU time is printed too: on a disk it is mostly the file system
creating each stage's two folders and three files, which costs more where many files were
deleted in the last minutes (ext4 without a journal skips recently freed inodes one by
one) — so a quiet machine that has not just run a test suite gives the steadier figure.

The physical floor is measured in the same run, alternating with the engines: as many
appends of a small line to a file in the same directory as there are stages, each followed
by one `fdatasync` — what making one stage durable cannot cost less than. The benchmark
prints it and delivery's per-stage time over it. Beside it, the layout floor: the same
syscalls a stage of SPEC §11's run directory makes (two folders, three files, its log
lines, one flush of the tail file) with no engine around them — what a run that keeps that
layout cannot cost less than, and so how much of delivery's time is the engine's own.

`--cli` times both engines as whole processes instead — `delivery run` on the workflow
with a replay script, and a Python process running the LangGraph chain — each at
`--stages` and at 1 stage; the per-stage cost is the difference over the extra stages,
so interpreter start-up and imports do not count.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import itertools
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run

# CPU seconds of the last in-process run (time.process_time, every thread of the process):
# on a shared machine the wall clock also counts other jobs' turns on the cores and disk.
LAST_CPU = [0.0]
# ...and of it, the seconds spent in the kernel (os.times: system time): on a disk, the file
# system's work for the files and folders a stage creates, which tmpfs does not have.
LAST_SYSTEM = [0.0]


def _system_seconds() -> float:
    return os.times().system


def workflow_source(stages: int) -> str:
    """DOT text of `start -> s1 -> ... -> s<stages> -> exit`, every `sN` an agent node."""
    lines = [
        "digraph EngineOverhead {",
        '    graph [goal="bench"]',
        "    start [shape=Mdiamond]",
        "    exit  [shape=Msquare]",
    ]
    lines += [f'    s{i} [type=prompt, prompt="step {i}"]' for i in range(1, stages + 1)]
    chain = ["start", *(f"s{i}" for i in range(1, stages + 1)), "exit"]
    lines.append("    " + " -> ".join(chain))
    lines.append("}")
    return "\n".join(lines) + "\n"


def stage_gaps(run_dir: Path) -> list[float]:
    """Seconds from each `stage_started` event of a run's log to the next: all the engine
    does between two stages, read from the run's own log."""
    starts = []
    with (run_dir / "events.jsonl").open(encoding="utf-8") as log:
        for line in log:
            event = json.loads(line)
            if event["type"] == "stage_started":
                starts.append(datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))
                              .timestamp())
    return [b - a for a, b in itertools.pairwise(starts)]


def write_workflow(directory: Path, stages: int) -> Path:
    """Write the linear workflow into `directory` and return its path."""
    path = directory / f"linear_{stages}.dot"
    path.write_text(workflow_source(stages), encoding="utf-8")
    return path


def run_delivery(workflow: Path, workspace: Path, stages: int) -> RunOutcome:
    """Run the generated workflow with delivery's engine; the run directory is in `workspace`."""
    backend = ReplayBackend({f"s{i}": ["ok"] for i in range(1, stages + 1)})
    request = RunRequest(workflow=workflow, goal="bench", workspace=workspace,
                         run_dir=workspace / "run")
    return start_run(request, World(agent=backend))


def run_folder(where: Path | None, prefix: str) -> contextlib.AbstractContextManager[str]:
    """The folder the runs write in: a temporary one in `where`, removed at the end — but
    when `python -m benchmarks` runs this on the default disk, one left in its scratch
    folder, which it removes after the last benchmark: thousands of stage files deleted
    here would slow the next benchmark's (ext4 skips recently freed inodes one by one;
    see benchmarks/__main__.py)."""
    scratch = os.environ.get("DELIVERY_BENCH_SCRATCH")
    if where is None and scratch:
        return contextlib.nullcontext(tempfile.mkdtemp(dir=scratch, prefix=prefix))
    return tempfile.TemporaryDirectory(dir=where, prefix=prefix)


def _settle() -> None:
    """Start every timed run from the same state: a clean heap (the engines alternate in
    one process) and no dirty pages left by the previous run, whose write-back would
    otherwise land in the next run's fsyncs. Run folders are removed only at the end."""
    gc.collect()
    os.sync()


def time_delivery(stages: int, base: Path) -> float:
    tmp = tempfile.mkdtemp(dir=base, prefix="delivery-")
    _settle()
    start, cpu, system = time.perf_counter(), time.process_time(), _system_seconds()
    workflow = write_workflow(Path(tmp), stages)
    outcome = run_delivery(workflow, Path(tmp), stages)
    seconds = time.perf_counter() - start
    LAST_CPU[0] = time.process_time() - cpu
    LAST_SYSTEM[0] = _system_seconds() - system
    if outcome.status != "succeeded" or len(outcome.path) != stages + 2:
        raise SystemExit(f"delivery run did not succeed: status={outcome.status} "
                         f"reason={outcome.failure_reason!r} path length={len(outcome.path)}")
    return seconds


def time_langgraph(stages: int, base: Path, durability: str = "sync") -> float:
    """Build, compile and invoke a `stages`-node LangGraph chain with a SQLite checkpointer."""
    import operator
    from typing import Annotated, TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    # The functional form: this module's `from __future__ import annotations` would turn
    # class-body annotations into strings that cannot see these lazily imported names.
    State = TypedDict("State", {  # noqa: UP013
        "goal": str, "path": Annotated[list[str], operator.add], "last": str})

    def stage(name: str) -> Callable[[Any], dict[str, Any]]:
        def run(state: Any) -> dict[str, Any]:
            return {"path": [name], "last": name}
        return run

    tmp = tempfile.mkdtemp(dir=base, prefix="langgraph-")
    _settle()
    start, cpu, system = time.perf_counter(), time.process_time(), _system_seconds()
    builder = StateGraph(State)
    names = [f"s{i}" for i in range(1, stages + 1)]
    for name in names:
        builder.add_node(name, stage(name))
    for previous, following in zip([START, *names], [*names, END], strict=True):
        builder.add_edge(previous, following)
    with SqliteSaver.from_conn_string(str(Path(tmp) / "checkpoints.sqlite")) as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "bench"}, "recursion_limit": stages + 10}
        final = graph.invoke({"goal": "bench", "path": [], "last": ""}, config,
                             durability=durability)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    LAST_CPU[0] = time.process_time() - cpu
    LAST_SYSTEM[0] = _system_seconds() - system
    if len(final["path"]) != stages or final["last"] != f"s{stages}":
        raise SystemExit(f"LangGraph run went wrong: {len(final['path'])} stages, "
                         f"last={final['last']!r}")
    return seconds


def time_floor(stages: int, base: Path) -> float:
    """`stages` appends of a 200-byte line to one file, each made durable with one
    fdatasync: the physical floor of a run that syncs once per stage."""
    tmp = tempfile.mkdtemp(dir=base, prefix="floor-")
    _settle()
    line = b"x" * 199 + b"\n"
    sync = getattr(os, "fdatasync", os.fsync)
    start = time.perf_counter()
    fd = os.open(os.path.join(tmp, "floor.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(stages):
            os.write(fd, line)
            sync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


# What one stage of the benchmark's run writes (SPEC §11), in bytes: prompt.md, response.md,
# status.json, and its event lines (stage_started, stage_finished, edge_taken, the record).
LAYOUT_FILES = (("prompt.md", 2500), ("response.md", 2500), ("status.json", 200))
LAYOUT_LOG_BYTES = 1150


def time_layout_floor(stages: int, base: Path) -> float:
    """The file work of a stage in the run directory's layout (SPEC §11) with no engine:
    its two folders `<node>/<attempt>/`, its three files written, its log lines appended to
    the log and to a preallocated tail file, the tail flushed with one fdatasync (as
    `delivery.store.tail` does). What a run that keeps this layout cannot cost less than."""
    tmp = tempfile.mkdtemp(dir=base, prefix="layout-")
    _settle()
    sync = getattr(os, "fdatasync", os.fsync)
    line = b"x" * (LAYOUT_LOG_BYTES - 1) + b"\n"
    bodies = [(name, b"y" * size) for name, size in LAYOUT_FILES]
    start = time.perf_counter()
    log = os.open(os.path.join(tmp, "events.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                  0o644)
    tail = os.open(os.path.join(tmp, "events.tail"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(tail, b"\0" * (len(line) * stages + 4096))
        os.fsync(tail)
        for i in range(stages):
            folder = os.path.join(tmp, f"s{i + 1}")
            os.mkdir(folder)
            attempt = os.path.join(folder, "1")
            os.mkdir(attempt)
            for name, body in bodies:
                fd = os.open(os.path.join(attempt, name),
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                os.write(fd, body)
                os.close(fd)
            os.write(log, line)
            os.pwrite(tail, line, i * len(line))
            sync(tail)
    finally:
        os.close(log)
        os.close(tail)
    return time.perf_counter() - start


LANGGRAPH_PROCESS = """
import sys
sys.path.insert(0, {here!r})
from pathlib import Path
from engine_overhead import time_langgraph
time_langgraph({stages}, Path({base!r}), {durability!r})
"""


def replies_file(directory: Path, stages: int) -> Path:
    path = directory / "replies.json"
    path.write_text(json.dumps({f"s{i}": ["ok"] for i in range(1, stages + 1)}),
                    encoding="utf-8")
    return path


def time_delivery_cli(stages: int, base: Path) -> float:
    """Wall time of `delivery run` on the linear workflow, as a whole process."""
    tmp = Path(tempfile.mkdtemp(dir=base, prefix="delivery-cli-"))
    workflow = write_workflow(tmp, stages)
    replies = replies_file(tmp, stages)
    script = Path(sys.executable).with_name("delivery")  # the console script users run
    launcher = [str(script)] if script.is_file() else [sys.executable, "-m", "delivery.cli.main"]
    command = [*launcher, "run", str(workflow), "--agent",
               f"replay:{replies}", "--workspace", str(tmp), "--run-dir", str(tmp / "run")]
    _settle()
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"delivery run failed (exit {done.returncode}): {done.stderr[-500:]}")
    return seconds


def time_langgraph_cli(stages: int, base: Path, durability: str = "sync") -> float:
    """Wall time of a Python process that builds and runs the LangGraph chain."""
    tmp = tempfile.mkdtemp(dir=base, prefix="langgraph-cli-")
    code = LANGGRAPH_PROCESS.format(here=str(Path(__file__).resolve().parent), stages=stages,
                                    base=tmp, durability=durability)
    _settle()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"LangGraph process failed (exit {done.returncode}): "
                         f"{done.stderr[-500:]}")
    return seconds


def profile_delivery(stages: int, base: Path, top: int = 30) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    time_delivery(stages, base)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _row(engine: str, stages: int, seconds: float) -> str:
    return (f"{engine:<24} {stages:>7} {seconds:>9.3f} {stages / seconds:>10.1f} "
            f"{seconds * 1000 / stages:>9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the runs write (default: a temporary directory)")
    parser.add_argument("--durability", choices=["sync", "async", "exit"], default="sync",
                        help="LangGraph checkpoint durability (default: sync, like delivery)")
    parser.add_argument("--profile", action="store_true",
                        help="profile one more delivery run and print the top functions")
    parser.add_argument("--cli", action="store_true",
                        help="time whole processes (delivery run) instead of in-process runs")
    args = parser.parse_args()
    if args.cli:
        cli_main(args)
        return
    stages, reps = args.stages, args.reps

    with run_folder(args.dir, "engine-overhead-") as tmp:
        base = Path(tmp)
        runners: dict[str, Callable[[], float]] = {
            "delivery": lambda: time_delivery(stages, base),
            f"langgraph+sqlite ({args.durability})":
                lambda: time_langgraph(stages, base, args.durability),
            "floor (append+fdatasync)": lambda: time_floor(stages, base),
            "layout floor (files+sync)": lambda: time_layout_floor(stages, base),
        }
        warmup = {name: run() for name, run in runners.items()}
        times: dict[str, list[float]] = {name: [] for name in runners}
        cpu: dict[str, list[float]] = {name: [] for name in list(runners)[:2]}
        system: dict[str, list[float]] = {name: [] for name in cpu}
        for _ in range(reps):
            for name, run in runners.items():
                times[name].append(run())
                if name in cpu:
                    cpu[name].append(LAST_CPU[0])
                    system[name].append(LAST_SYSTEM[0])
        profile = profile_delivery(stages, base) if args.profile else ""

    print(f"{stages}-stage linear workflow, checkpoint to disk after every stage; "
          f"{reps} repetitions each after one warm-up run (excluded); load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()) + "\n")
    header = f"{'engine':<24} {'stages':>7} {'seconds':>9} {'stages/s':>10} {'ms/stage':>9}"
    for label, pick in (("best", min), ("median", statistics.median)):
        print(f"-- {label} of {reps}")
        print(header)
        for name, values in times.items():
            print(_row(name, stages, pick(values)))
        print()
    print("warm-up: " + ", ".join(f"{name} {value:.3f} s" for name, value in warmup.items()))
    print("all runs: " + "; ".join(
        f"{name} " + " ".join(f"{v:.3f}" for v in values) for name, values in times.items()))
    names = list(times)
    ours, theirs, floor, layout = (times["delivery"], times[names[1]], times[names[2]],
                                   times[names[3]])
    for label, pick in (("best", min), ("median", statistics.median)):
        ratio = pick(theirs) / pick(ours)
        verdict = (f"delivery is {ratio:.1f}x faster" if ratio >= 1
                   else f"delivery is {1 / ratio:.1f}x slower")
        print(f"LangGraph time / delivery time ({label}): {ratio:.2f} -> {verdict}")
    cpu_ours, cpu_theirs = cpu["delivery"], cpu[names[1]]
    ours_cpu, theirs_cpu = statistics.median(cpu_ours), statistics.median(cpu_theirs)
    print(f"CPU ms/stage (median): delivery {ours_cpu * 1000 / stages:.3f}, "
          f"LangGraph {theirs_cpu * 1000 / stages:.3f}; LangGraph CPU / "
          f"delivery CPU (median): {theirs_cpu / ours_cpu:.2f}")
    kernel_ours, kernel_theirs = (statistics.median(system[name]) * 1000 / stages
                                  for name in ("delivery", names[1]))
    print(f"of which in the kernel, ms/stage (median): delivery {kernel_ours:.3f}, "
          f"LangGraph {kernel_theirs:.3f} (creating a stage's folders and files on a disk "
          "costs more the more files were deleted there in the last minutes: ext4 skips "
          "recently freed inodes)")
    for label, pick in (("best", min), ("median", statistics.median)):
        print(f"disk floor ({label}): {pick(floor) * 1000 / stages:.3f} ms per stage "
              f"(one fdatasync of a small append); delivery / floor ({label}): "
              f"{pick(ours) / pick(floor):.2f}")
    for label, pick in (("best", min), ("median", statistics.median)):
        print(f"layout floor ({label}): {pick(layout) * 1000 / stages:.3f} ms per stage "
              f"(a stage's two folders and three files, its log lines, one fdatasync; no "
              f"engine), {pick(layout) / pick(floor):.2f}x the disk floor; delivery / layout "
              f"floor ({label}): {pick(ours) / pick(layout):.2f}")
    if profile:
        print("\n== cProfile of one delivery run ==")
        print(profile)


def cli_main(args: argparse.Namespace) -> None:
    stages, reps = args.stages, args.reps
    with run_folder(args.dir, "engine-overhead-cli-") as tmp:
        base = Path(tmp)
        runners: dict[str, Callable[[int], float]] = {
            "delivery run (CLI)": lambda n: time_delivery_cli(n, base),
            f"langgraph+sqlite ({args.durability}) process":
                lambda n: time_langgraph_cli(n, base, args.durability),
        }
        for run in runners.values():
            run(1)  # warm-up: the file cache, .pyc files
        per_stage: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(reps):
            for name, run in runners.items():
                whole, one = run(stages), run(1)
                per_stage[name].append((whole - one) / (stages - 1))
    print(f"{stages}-stage linear workflow as whole processes; per-stage cost = (time at "
          f"{stages} stages - time at 1 stage) / {stages - 1}; {reps} repetitions; load "
          "average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + "\n")
    for name, values in per_stage.items():
        print(f"{name:<36} ms/stage median {statistics.median(values) * 1000:.3f} "
              f"(runs: {' '.join(f'{v * 1000:.3f}' for v in values)})")
    ours, theirs = per_stage["delivery run (CLI)"], per_stage[list(per_stage)[1]]
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"LangGraph time / delivery time through the CLI (median): {ratio:.2f}")


if __name__ == "__main__":
    main()
