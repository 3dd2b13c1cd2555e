"""What a large agent reply adds to a stage: the same linear workflow of agent stages run
with 1 MB replies and with small ones, alternating in one process (SPEC §14: a 1 MB reply
costs milliseconds, not a tenth of a second).

    .venv/bin/python benchmarks/replies.py [--stages 20] [--reps 5] [--reply-mb 1] [--dir PATH]

Every reply passes what a real one does: the redacting agent wrapper, the output contract,
`response.md`, the context (offloaded to the artifact store above 100 KB), the stage record
in the event log and the next stages' preambles. The large reply is prose and code (the
package's own source), no secrets. The figure is (time with large replies - time with
small ones) / stages, wall clock and CPU, medians over the repetitions.

Beside it, in the same repetitions, the disk's floor for such a reply: its bytes written to
a new file in the same folder and fsynced once, as the artifact store must before the
checkpoint names it (the reply is durable or the run could not resume). The wall figure
minus that floor is what the engine adds; on a slow disk the floor alone can pass the
goal of 20 ms.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run

ROOT = Path(__file__).resolve().parent.parent


def large_reply(size: int) -> str:
    source = "".join(p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("delivery/**/*.py")))
    return "Here is what I changed.\n\n```python\n" + (source * (size // len(source) + 1))[:size] \
        + "\n```\n"


def workflow_source(stages: int) -> str:
    lines = ["digraph Replies {", '    graph [goal="bench"]', "    start [shape=Mdiamond]",
             "    exit  [shape=Msquare]"]
    lines += [f'    s{i} [type=prompt, prompt="step {i}"]' for i in range(1, stages + 1)]
    lines.append("    " + " -> ".join(["start", *(f"s{i}" for i in range(1, stages + 1)),
                                       "exit"]))
    return "\n".join([*lines, "}"]) + "\n"


def run_once(base: Path, stages: int, reply: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one run whose every stage gets `reply`."""
    tmp = Path(tempfile.mkdtemp(dir=base, prefix="replies-"))
    workflow = tmp / "flow.dot"
    workflow.write_text(workflow_source(stages), encoding="utf-8")
    backend = ReplayBackend({f"s{i}": [reply] for i in range(1, stages + 1)})
    gc.collect()
    os.sync()  # the previous run's dirty pages are not this run's to write back
    wall, cpu = time.perf_counter(), time.process_time()
    outcome = start_run(RunRequest(workflow=workflow, goal="bench", workspace=tmp,
                                   run_dir=tmp / "run"), World(agent=backend))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if outcome.status != "succeeded":
        raise SystemExit(f"run failed: {outcome.failure_reason}")
    return wall, cpu


def disk_floor(base: Path, data: bytes) -> float:
    """Seconds to write `data` to a new file in `base` and fsync it (the one durable copy
    of a reply a stage needs), with the same os.sync before it as a run."""
    path = Path(tempfile.mkdtemp(dir=base, prefix="floor-")) / "reply.json"
    os.sync()
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--reply-mb", type=float, default=1.0)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    big, small = large_reply(int(args.reply_mb * 1_000_000)), "ok"
    walls: dict[str, list[float]] = {"large": [], "small": []}
    cpus: dict[str, list[float]] = {"large": [], "small": []}
    floors: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="replies-bench-") as tmp:
        base = Path(tmp)
        run_once(base, args.stages, small)  # warm-up (imports, caches)
        for _ in range(args.reps):
            for name, reply in (("large", big), ("small", small)):
                wall, cpu = run_once(base, args.stages, reply)
                walls[name].append(wall)
                cpus[name].append(cpu)
            floors.append(disk_floor(base, big.encode()))
    n = args.stages
    print(f"{n} agent stages, replies of {len(big.encode()) / 1e6:.2f} MB vs 2 bytes; "
          f"{args.reps} repetitions, alternating; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for name in ("small", "large"):
        print(f"{name:<6} ms/stage wall {statistics.median(walls[name]) * 1000 / n:8.2f}  "
              f"CPU {statistics.median(cpus[name]) * 1000 / n:8.2f}")
    extra_wall = [(b - s) * 1000 / n for b, s in zip(walls["large"], walls["small"], strict=True)]
    extra_cpu = [(b - s) * 1000 / n for b, s in zip(cpus["large"], cpus["small"], strict=True)]
    print(f"extra per stage (median): {statistics.median(extra_wall):.2f} ms wall, "
          f"CPU {statistics.median(extra_cpu):.2f} ms")
    floor = statistics.median(floors) * 1000
    print(f"disk floor: the reply written to a new file and fsynced once (median): "
          f"{floor:.2f} ms")
    beyond = [extra - f * 1000 for extra, f in zip(extra_wall, floors, strict=True)]
    print(f"extra per stage beyond that floor (median): {statistics.median(beyond):.2f} ms wall")


if __name__ == "__main__":
    main()
