"""Mean cost of the run store's per-stage work, over 1,000 calls each:

    .venv/bin/python benchmarks/store_cost.py [--calls N] [--dir PATH]

- `save_stage`: one stage record (a few context keys, one path step) appended to the log
  and flushed — what every stage pays;
- a snapshot of a 20 KB state (what is written only every ~1 MiB of log);
- `append_event`: one event line, not flushed.

Flushes dominate: run it on the file system the runs will live on (`--dir`, default: a
temporary directory).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from delivery.store.records import RunInfo, RunState
from delivery.store.runstore import LocalRunStore


def measure(calls: int, action: Callable[[int], object]) -> tuple[float, float]:
    """(mean, 95th percentile) in milliseconds."""
    times = []
    for n in range(calls):
        start = time.perf_counter()
        action(n)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.fmean(times), statistics.quantiles(times, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="store-cost-") as tmp:
        store = LocalRunStore.create_dir(Path(tmp) / "run")
        store.write_run_info(RunInfo(run_id="r", workflow="w.dot", workflow_sha256="0" * 64,
                                     workspace=tmp, started=""))
        store.open_log()
        context = {f"node_{i}.output": f"value {i} " * 30 for i in range(80)}
        state = RunState(run_id="r", next_node="a", context=dict(context), initial={})
        store.save_whole(state)

        def stage(n: int) -> None:
            state.path.append(f"node_{n % 80}")
            state.set_outcome(f"node_{n % 80}", "succeeded")
            state.steps += 1
            changed = {f"node_{n % 80}.output": f"value {n} " * 30, "outcome": "succeeded",
                       "last_stage": f"node_{n % 80}"}
            state.context.update(changed)
            store.save_stage(state.take_record(changed, [], None, None), lambda: state)

        rows = [("save_stage (record + flush)", measure(args.calls, stage)),
                ("snapshot of a 20 KB state", measure(args.calls // 10,
                                                      lambda n: store._snapshot(state))),
                ("append_event (no flush)", measure(args.calls, lambda n: store.append_event(
                    "stage_finished", node=f"node_{n % 80}", outcome="succeeded")))]
        store.close()
    for name, (mean, p95) in rows:
        print(f"{name:<30} mean {mean:.3f} ms   p95 {p95:.3f} ms")


if __name__ == "__main__":
    main()
