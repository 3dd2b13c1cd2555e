"""`python -m benchmarks` runs the benchmark scripts and writes a results file: checked on
its cheapest pieces with quick counts, so that the command cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_benchmarks(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_quick_benchmarks_write_results_with_machine_info_and_figures(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    done = run_benchmarks("--quick", "--only", "validation,redaction,replies,stages",
                          "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    text = out.read_text(encoding="utf-8")
    for field in ("| cores |", "| memory |", "| python |", "| date |", "| temporary directory |"):
        assert field in text
    assert "growth 247 -> 997 nodes (x4.0 nodes)" in text
    assert "redaction MB/s (code)" in text and "redaction MB/s (token-dense)" in text
    assert "checkpoint size after 10 stages x 0.1 MB replies, bytes" in text
    assert "peak memory of a 100-stage run process, MiB" in text
    assert "failed" not in text
    assert "redaction MB/s (prose)" in done.stdout  # the table is printed too


def test_an_unknown_benchmark_name_is_refused_naming_the_known_ones() -> None:
    done = run_benchmarks("--only", "nope")
    assert done.returncode == 2
    assert "unknown benchmark nope" in done.stderr and "validation" in done.stderr
