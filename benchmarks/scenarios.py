"""How long `delivery test` takes for a file of 50 route scenarios, beyond start-up.

Runs the bundled delivery workflow's scenarios repeated to 50 (each a full run through the
engine: 6 to 16 stages, scripted agent, probes and effects) in-process, and prints the time for
the whole file (load, validate, run, check) — median of 5. SPEC §12.1: well under a second.

    .venv/bin/python benchmarks/scenarios.py
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from delivery.scenarios.runner import run_file  # noqa: E402

COUNT = 50


def fifty_scenarios(folder: Path) -> Path:
    source = (ROOT / "workflows" / "deliver.test.toml").read_text(encoding="utf-8")
    head, *blocks = re.split(r"(?m)^\[\[scenario\]\]\n", source)
    head = head.replace('workflow = "deliver.dot"',
                        f'workflow = "{(ROOT / "workflows" / "deliver.dot").as_posix()}"')
    chosen = [blocks[i % len(blocks)] for i in range(COUNT)]
    path = folder / "fifty.test.toml"
    path.write_text(head + "".join("[[scenario]]\n" + block for block in chosen),
                    encoding="utf-8")
    return path


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = fifty_scenarios(Path(scratch))
        run_file(path)  # warm imports and caches: start-up is not what is measured
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            results = run_file(path)
            timings.append(time.perf_counter() - started)
            assert len(results) == COUNT and all(r.passed for r in results)
        steps = sum(len(r.path) for r in results)
    median = statistics.median(timings)
    print(f"{COUNT} scenarios ({steps} stages): {median:.3f} s median of 5 "
          f"(min {min(timings):.3f} s), {median / COUNT * 1000:.1f} ms per scenario")


if __name__ == "__main__":
    main()
