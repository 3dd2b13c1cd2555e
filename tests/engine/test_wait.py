"""Wait stages (SPEC §7.1): interval, backoff on consecutive visits, max_interval, timeout."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import (
    RunInterrupted,
    RunOutcome,
    RunRequest,
    World,
    resume_run,
    start_run,
)
from delivery.lang.model import NodeType
from delivery.scenarios.model import Scenario
from delivery.scenarios.stages import ScenarioPlayer
from delivery.testing import flow

FLOW = flow("""
work    [type=script, script="true"]
observe [type=probe]
route   [shape=diamond]
pause   [type=wait, %s]
gave_up [type=script, script="true"]
start -> work -> observe -> route
route -> exit   [condition="pr.state=MERGED"]
route -> work   [condition="pr.state=CI_FAILED"]
route -> pause  [condition="pr.state=WAITING"]
pause -> observe
pause -> gave_up [condition="outcome=failed"]
gave_up -> exit
""", goal="Ship")


def run_wait(tmp_path: Path, attrs: str, states: list[str]) -> tuple[RunOutcome, FakeClock]:
    scenario = Scenario(name="wait", folders=["api"],
                        probes={"observe": [{"api.pr.state": s} for s in states]},
                        scripts={"work": [{"exit": 0}] * 5, "gave_up": [{"exit": 0}]})
    player = ScenarioPlayer(scenario)
    clock = FakeClock()
    # scripted probes and scripts; the real wait handler
    handlers = {kind: run for kind, run in player.handlers().items() if kind is not NodeType.WAIT}
    world = World(agent=ReplayBackend({}), clock=clock, handlers=handlers)
    outcome = start_run(RunRequest(workflow=write_flow(tmp_path, FLOW % attrs),
                                   workspace=tmp_path), world)
    return outcome, clock


def test_consecutive_visits_back_off_up_to_the_ceiling(tmp_path: Path) -> None:
    outcome, clock = run_wait(tmp_path, 'interval="60s", backoff=2, max_interval="5m"',
                              ["WAITING"] * 5 + ["MERGED"])
    assert outcome.status == "succeeded"
    assert clock.sleeps == [60, 120, 240, 300, 300]


def test_another_stage_in_between_starts_the_back_off_again(tmp_path: Path) -> None:
    outcome, clock = run_wait(tmp_path, 'interval="10s", backoff=3',
                              ["WAITING", "WAITING", "CI_FAILED", "WAITING", "MERGED"])
    assert outcome.status == "succeeded"
    assert clock.sleeps == [10, 30, 10]


def test_timeout_fails_the_wait_since_its_first_visit(tmp_path: Path) -> None:
    outcome, clock = run_wait(tmp_path, 'interval="60s", backoff=2, timeout="3m"',
                              ["WAITING"] * 5 + ["MERGED"])
    assert clock.sleeps == [60, 120]  # the second sleep ends exactly at the timeout
    assert outcome.path[-3:] == ["pause", "gave_up", "exit"]
    failed = (outcome.run_dir / "pause" / "3" / "status.json").read_text(encoding="utf-8")
    assert "timed out" in failed


def test_without_backoff_the_interval_stays_the_same(tmp_path: Path) -> None:
    _, clock = run_wait(tmp_path, 'interval="30s"', ["WAITING"] * 3 + ["MERGED"])
    assert clock.sleeps == [30, 30, 30]


class _StoppedInSleep(FakeClock):
    """A clock whose `n`-th sleep is cut short by Ctrl-C, as a person stops the run."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def sleep(self, seconds: float) -> None:
        if len(self.sleeps) + 1 == self.n:
            self.sleeps.append(seconds)
            raise KeyboardInterrupt
        super().sleep(seconds)


def test_a_resume_in_a_wait_keeps_its_timeout_clock_across_processes(tmp_path: Path) -> None:
    scenario = Scenario(name="wait", folders=["api"],
                        probes={"observe": [{"api.pr.state": "WAITING"}] * 5},
                        scripts={"work": [{"exit": 0}], "gave_up": [{"exit": 0}]})
    player = ScenarioPlayer(scenario)
    handlers = {kind: run for kind, run in player.handlers().items() if kind is not NodeType.WAIT}
    workflow = write_flow(tmp_path, FLOW % 'interval="60s", timeout="3m"')
    stopped = _StoppedInSleep(2)
    with pytest.raises(RunInterrupted):
        start_run(RunRequest(workflow=workflow, workspace=tmp_path),
                  World(agent=ReplayBackend({}), clock=stopped, handlers=handlers))
    [run_dir] = (tmp_path / ".delivery" / "runs").iterdir()
    # another process, 200 s later: its monotonic clock starts elsewhere, the wall's goes on
    later = FakeClock(start=5.0, elapsed=260.0)
    outcome = resume_run(run_dir, World(agent=ReplayBackend({}), clock=later,
                                        handlers=handlers))
    assert later.sleeps == []  # neither the interrupted sleep nor another
    assert outcome.path[-2:] == ["gave_up", "exit"]
    assert "timed out: 260s since its first visit" in (
        run_dir / "pause" / "2" / "status.json").read_text(encoding="utf-8")
