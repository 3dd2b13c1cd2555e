"""The probe benchmark runs and shows one GraphQL request per round, so it cannot rot."""

from __future__ import annotations

import pytest
from benchmark_helpers import load_benchmark


def test_benchmark_reports_one_graphql_request_against_four_rest_requests_per_pr(
        capsys: pytest.CaptureFixture[str]) -> None:
    module = load_benchmark("probe_requests")
    module.main(["--folders", "1,3", "--latency", "0", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split("|") for line in lines if line.strip()[:1].isdigit() and "|" in line]
    assert [(r[0].strip(), r[1].split()[0], r[2].split()[0]) for r in rows] == [
        ("1", "1", "4"), ("3", "1", "12")]
