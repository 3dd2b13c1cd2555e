"""The delivery benchmark runs and reports its phases, so it cannot rot: one GraphQL
request per probe round, requests in every phase that talks to GitHub, none elsewhere."""

from __future__ import annotations

import pytest
from benchmark_helpers import load_benchmark


def test_benchmark_reports_requests_per_phase_of_a_delivery(
        capsys: pytest.CaptureFixture[str]) -> None:
    module = load_benchmark("delivery_requests")
    module.main(["--repeats", "1", "--no-demo"])
    lines = capsys.readouterr().out.splitlines()
    table = {row.split("|")[0].strip(): row.split("|")[1].strip()
             for row in lines if row.count("|") == 2}
    assert table["probe"] == "4" and table["other"] == "0"
    assert all(int(table[phase]) > 0 for phase in ("worktrees", "publish", "merge"))
    assert "requests per round: [1, 1, 1, 1]" in "\n".join(lines)
