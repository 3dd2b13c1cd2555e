"""The campaign fleet (delivery.testing.fleet) that the campaign benchmark and chaos suite
run on: its CI check fails once where asked and only in CI, and its agent takes a time
proportional to the folders a turn edits."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from delivery.lang.model import NodeType
from delivery.testing.fleet import CHANGED, Fleet, calls
from delivery.testing.flows import flow
from delivery.validation.loader import check_source

SECONDS = 0.25


def run_check(command: str, cwd: Path) -> int:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True,
                          check=False).returncode


def test_a_failing_folders_ci_check_fails_the_first_time_only(tmp_path: Path) -> None:
    fleet = Fleet.of(10, failing=0.1)
    assert fleet.failing == {"r000"}
    checks = fleet.local_checks(tmp_path, tmp_path / "workspace")
    clone = tmp_path / "forge-clone"
    assert [run_check(checks["r000"], clone) for _ in range(2)] == [1, 0]
    assert run_check(checks["r001"], clone) == 0


def test_the_check_passes_in_the_runs_own_worktrees(tmp_path: Path) -> None:
    fleet = Fleet.of(2, failing=1.0)
    checks = fleet.local_checks(tmp_path, tmp_path / "workspace")
    assert run_check(checks["r001"], tmp_path / "workspace" / "r001") == 0
    assert run_check(checks["r001"], tmp_path / "forge-clone") == 1  # CI's failure still due


def test_every_folder_fails_when_the_share_is_one() -> None:
    assert Fleet.of(5, failing=1.0).failing == set(Fleet.of(5).folders)


WORKFLOW = flow("""
    implement [prompt="Change every folder", outputs="summary:text"]
    each [foreach="folders", prompt="Change {{ folder.name }}", outputs="summary:text"]
    start -> implement -> each -> exit
""")


def test_a_turn_over_every_folder_takes_its_time_for_each_folder(tmp_path: Path) -> None:
    workflow, _ = check_source(WORKFLOW, "fleet.dot")
    assert workflow is not None and workflow.nodes["each"].type is NodeType.AGENT
    agent = Fleet.of(4).agent(workflow, seconds_per_folder=SECONDS, log=tmp_path / "calls")
    started = time.monotonic()
    agent.open_session("implement", workspace=tmp_path).send("go")
    assert time.monotonic() - started >= 4 * SECONDS
    assert sorted(p.parent.name for p in tmp_path.glob(f"*/{CHANGED}")) == list(
        Fleet.of(4).folders)
    assert calls(tmp_path / "calls") == ["implement"]


def test_a_folders_own_session_takes_the_time_of_one_folder(tmp_path: Path) -> None:
    workflow, _ = check_source(WORKFLOW, "fleet.dot")
    assert workflow is not None
    agent = Fleet.of(4).agent(workflow, seconds_per_folder=SECONDS, log=tmp_path / "calls")
    started = time.monotonic()
    agent.open_session("each@r002", workspace=tmp_path).send("go")
    took = time.monotonic() - started
    assert SECONDS <= took < 2 * SECONDS
    assert (tmp_path / CHANGED).read_text(encoding="utf-8").startswith("each")
    assert calls(tmp_path / "calls") == ["each@r002"]
