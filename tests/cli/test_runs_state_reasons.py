"""`delivery runs --state` says why a paused run paused and until when (SPEC §12, §13;
issue 37 item 2), as `delivery runs` does for local runs: a run paused by GitHub's rate
limit is listed `paused: rate_limit until <UTC>` (`--json`: `reason`, `until`), a run
paused at its wait in event mode `paused: wait` with what it waits for."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import cli
from state_helpers import bare

from delivery.testing import flow
from delivery.testing.github import FakeGitHub

BRANCH = "delivery/t-5"
FOLDERS = ("web", "api")
WAITING = "web (checks: ci/test), api (checks: ci/test)"
UTC_TIME = re.compile(r"may go on at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")


def watch_flow() -> str:
    return flow("""
    look  [type=probe, probe="pr"]
    route [shape=diamond]
    pause [type=wait, interval="60s"]
    start -> look -> route
    route -> exit  [condition="pr.state=MERGED"]
    route -> pause
    pause -> look
    """, goal="Watch", graph=f'inputs="ticket", folders="{",".join(FOLDERS)}"', name="S")


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub() as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        for name in FOLDERS:
            fake.create_repo(f"octo/{name}", files={"app.py": "print(0)\n"})
            head = fake.push_files(f"octo/{name}", BRANCH, {"app.py": "print(1)\n"})
            fake.open_pull(f"octo/{name}", BRANCH)
            fake.set_status(f"octo/{name}", head, "ci/test", "pending")
        yield fake


def run_on_state(tmp_path: Path, state: Path) -> dict[str, object]:
    (tmp_path / "flow.dot").write_text(watch_flow())
    code, out, err = cli("run", tmp_path / "flow.dot", "--input", "ticket=T-5", "--branch",
                         BRANCH, "--workspace", tmp_path, "--state", state, "--json",
                         *[arg for name in FOLDERS for arg in ("--repo", f"{name}=octo/{name}")])
    assert code == 3, err
    report: dict[str, object] = json.loads(out)
    return report


def test_a_run_paused_by_the_rate_limit_is_listed_with_when_it_may_go_on(
        tmp_path: Path, github: FakeGitHub) -> None:
    state = bare(tmp_path / "state.git")
    github.enforce_primary_limits(graphql_per_hour=0)
    report = run_on_state(tmp_path, state)
    assert report["reason"] == "rate_limit"
    when = UTC_TIME.search(str(report["failure_reason"]))
    assert when is not None
    code, out, err = cli("runs", "--state", state, "--json")
    assert code == 0, err
    [listed] = json.loads(out)
    assert (listed["status"], listed["reason"], listed["until"]) == (
        "paused", "rate_limit", when.group(1))
    code, out, err = cli("runs", "--state", state)
    assert f"paused: rate_limit until {when.group(1)}" in out


def test_a_run_paused_at_its_wait_is_listed_with_what_it_waits_for(
        tmp_path: Path, github: FakeGitHub) -> None:
    state = bare(tmp_path / "state.git")
    run_on_state(tmp_path, state)
    code, out, err = cli("runs", "--state", state, "--json")
    assert code == 0, err
    [listed] = json.loads(out)
    assert (listed["status"], listed["reason"], listed["until"]) == ("paused", "wait", "")
    assert listed["waiting"] == WAITING
    code, out, err = cli("runs", "--state", state)
    assert "paused: wait" in out and out.strip().endswith(f"— waiting: {WAITING}")
