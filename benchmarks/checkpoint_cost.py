"""Mean cost of `RunDirectory.save_checkpoint` (20 KB) and `EventLog.append` over 1,000 calls.

    .venv/bin/python benchmarks/checkpoint_cost.py [--calls N] [--dir PATH]

Both are called after every stage, so both must stay cheap. Each call fsyncs: the
numbers depend on the disk, so run this on the file system the runs will live on
(`--dir`, default: a temporary directory).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from delivery.redact import Redactor
from delivery.store.runstore import EventLog, RunDirectory


def measure(calls: int, action: Callable[[int], object]) -> tuple[float, float]:
    """(mean, 95th percentile) in milliseconds."""
    times = []
    for n in range(calls):
        start = time.perf_counter()
        action(n)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.fmean(times), statistics.quantiles(times, n=20)[-1]


def checkpoint(n: int) -> dict[str, object]:
    """About 20 KB of JSON, shaped like a run's context."""
    context = {f"node_{i}.output": f"value {i} " * 30 for i in range(80)}
    return {"node": f"node_{n % 80}", "completed": list(range(80)), "context": context}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        run = RunDirectory.create(Path(tmp) / "run")
        run.write_run_info({"workflow": "benchmark"})
        data = checkpoint(0)
        size = len(json.dumps(data, separators=(",", ":")))
        mean, p95 = measure(args.calls, lambda n: run.save_checkpoint({**data, "n": n}))
        print(f"save_checkpoint ({size / 1000:.1f} KB): mean {mean:.3f} ms, p95 {p95:.3f} ms")
        with EventLog(run.events_path) as log:
            fields = {"node": "implement", "outcome": "success", "notes": "x" * 200}
            mean, p95 = measure(args.calls, lambda n: log.append("stage_finished", **fields))
        print(f"EventLog.append:             mean {mean:.3f} ms, p95 {p95:.3f} ms")
        redactor = Redactor(["not-in-the-text-secret"])
        with EventLog(run.path / "redacted.jsonl", redactor=redactor) as log:
            mean, p95 = measure(args.calls, lambda n: log.append("stage_finished", **fields))
        print(f"EventLog.append (redacting): mean {mean:.3f} ms, p95 {p95:.3f} ms")


if __name__ == "__main__":
    main()
