"""What a run leaves on disk and holds in memory.

    .venv/bin/python benchmarks/run_footprint.py replies [--replies 100] [--reply-mb 1]
    .venv/bin/python benchmarks/run_footprint.py stages [--stages 1000]

- `replies`: a linear run of `--replies` agent stages, each answered (replay backend) with a
  reply of `--reply-mb` MB of distinct text. Printed: the size of the checkpoint, of the
  event log and of the whole run directory: shows whether the replies (kept in each
  stage's own `response.md`) are carried in the checkpoint too.
- `stages`: a linear run of `--stages` trivial agent stages (as in `engine_overhead.py`).
  Printed: this process's peak resident memory before the run (interpreter and imports)
  and after it, so the run's own share is the difference.

Run each mode in its own process: peak memory is per process.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_overhead import write_workflow


def peak_rss_mib() -> float:
    """Peak resident set size of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def reply_text(stage: int, size: int) -> str:
    line = f"stage {stage}: a line of the agent's reply, distinct per stage and line "
    lines = [f"{line}{n}\n" for n in range(size // len(line) + 1)]
    return "".join(lines)[:size]


def run_replies(replies: int, reply_mb: float) -> None:
    size = int(reply_mb * 1_000_000)
    with tempfile.TemporaryDirectory(prefix="run-footprint-") as tmp:
        workspace = Path(tmp)
        workflow = write_workflow(workspace, replies)
        backend = ReplayBackend({f"s{i}": [reply_text(i, size)] for i in range(1, replies + 1)})
        started = time.perf_counter()
        outcome = start_run(RunRequest(workflow=workflow, goal="bench", workspace=workspace,
                                       run_dir=workspace / "run"), World(agent=backend))
        seconds = time.perf_counter() - started
        if outcome.status != "succeeded":
            raise SystemExit(f"run did not succeed: {outcome.status} {outcome.failure_reason}")
        run = outcome.run_dir
        checkpoint = sum(p.stat().st_size for p in run.glob("checkpoint*") if p.is_file())
        events = (run / "events.jsonl").stat().st_size
        print(f"{replies} stages x {size / 1e6:g} MB replies in {seconds:.2f} s")
        print(f"checkpoint: {checkpoint} bytes")
        print(f"event log: {events} bytes")
        print(f"run directory: {tree_bytes(run)} bytes (replies: {replies * size} bytes)")
        print(f"peak memory: {peak_rss_mib():.1f} MiB")


def run_stages(stages: int) -> None:
    before = peak_rss_mib()
    with tempfile.TemporaryDirectory(prefix="run-footprint-") as tmp:
        workspace = Path(tmp)
        workflow = write_workflow(workspace, stages)
        backend = ReplayBackend({f"s{i}": ["ok"] for i in range(1, stages + 1)})
        started = time.perf_counter()
        outcome = start_run(RunRequest(workflow=workflow, goal="bench", workspace=workspace,
                                       run_dir=workspace / "run"), World(agent=backend))
        seconds = time.perf_counter() - started
        if outcome.status != "succeeded" or len(outcome.path) != stages + 2:
            raise SystemExit(f"run did not succeed: {outcome.status} {outcome.failure_reason}")
    after = peak_rss_mib()
    print(f"{stages}-stage run in {seconds:.2f} s")
    print(f"peak memory before the run: {before:.1f} MiB")
    print(f"peak memory after the run: {after:.1f} MiB (the run's share: "
          f"{after - before:.1f} MiB)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    replies = modes.add_parser("replies")
    replies.add_argument("--replies", type=int, default=100)
    replies.add_argument("--reply-mb", type=float, default=1.0)
    stages = modes.add_parser("stages")
    stages.add_argument("--stages", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.mode == "replies":
        run_replies(args.replies, args.reply_mb)
    else:
        run_stages(args.stages)


if __name__ == "__main__":
    main()
