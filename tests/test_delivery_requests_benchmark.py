"""The delivery benchmark runs and reports its phases, so it cannot rot: one GraphQL
request per probe round, requests in every phase that talks to GitHub, none elsewhere."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "delivery_requests.py"


def test_benchmark_reports_requests_per_phase_of_a_delivery(
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("delivery_requests", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("delivery_requests", module)
    spec.loader.exec_module(module)
    module.main(["--repeats", "1", "--no-demo"])
    lines = capsys.readouterr().out.splitlines()
    table = {row.split("|")[0].strip(): row.split("|")[1].strip()
             for row in lines if row.count("|") == 2}
    assert table["probe"] == "4" and table["other"] == "0"
    assert all(int(table[phase]) > 0 for phase in ("worktrees", "publish", "merge"))
    assert "requests per round: [1, 1, 1, 1]" in "\n".join(lines)
