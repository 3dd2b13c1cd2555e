"""Two fanned-out stages in a row in the simulated Actions world (issue 38, SPEC §13
"Fan-out across runners"): the worker that continues the run after the first fan-out
reaches the second foreach stage, which fans out again; the control workflow's next round
of workers (`work-2`, over the chunks the `work` round's join found) runs its chunks, on
events alone — not the hourly schedule, and not all on the one runner that reached it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from actions_world_helpers import describe
from quick_start_helpers import CONTROL, agent_toml, quick_start

from delivery.testing.github import FakeGitHub

FOLDERS, WORKERS, MAX_PARALLEL = 2, 2, 1
# two agent stages per folder, one after the other, then publish and merge once CI is green
FLOW = f"""digraph campaign {{
    graph [goal="Add a changelog line", inputs="ticket,notes?,check_command?",
           defaults="notes='',check_command='true'"]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    setup [type=worktree_add]
    implement [foreach="folders", max_parallel={MAX_PARALLEL}, outputs="summary:text",
               prompt="This is stage implement. You work in folder {{{{ folder.name }}}}."]
    polish [foreach="folders", max_parallel={MAX_PARALLEL}, outputs="summary:text",
            prompt="This is stage polish. You work in folder {{{{ folder.name }}}}."]
    publish [type=publish]
    observe [type=probe, probe="pr"]
    route [type=conditional]
    land [type=merge, policy=each]
    pause [type=wait, interval="30s", timeout="6h"]
    clean [type=worktree_remove]
    start -> setup -> implement -> polish -> publish -> observe -> route
    route -> clean [condition="pr.state=MERGED"]
    route -> land  [condition="pr.state!=MERGED && pr.ready=true"]
    route -> pause [condition="pr.state!=MERGED && pr.ready!=true"]
    land -> observe
    pause -> observe
    clean -> exit
}}
"""


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


def runner_of(worktree: str) -> str:
    """The runner an agent call ran on: `runner-<job>` in its worktree's path."""
    return next(part for part in Path(worktree).parts if part.startswith("runner-"))


def test_a_second_fan_out_reached_by_the_continuing_worker_runs_on_the_next_round_of_workers(
        github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    targets = [f"octo/f{index:02}" for index in range(1, FOLDERS + 1)]
    log = tmp_path / "agent-calls.log"
    world, _ = quick_start(github, tmp_path, targets, workflow=FLOW, toml=agent_toml(0.2, log),
                           max_runners=WORKERS, monkeypatch=monkeypatch)
    world.label_issue(CONTROL, 1, title="Add a changelog line", body="In every repository.")
    world.settle(max_jobs=6 * FOLDERS + 20)
    story = describe(world.delivery_jobs())
    assert all(job.event != "schedule" for job in world.jobs), story  # on events alone
    for round_ in ("work / chunk", "work-2 / chunk"):
        legs = [job for job in world.jobs if job.job == round_]
        assert sorted(int(job.contexts["matrix"]["chunk"]) for job in legs) == \
            list(range(1, WORKERS + 1)), f"{round_}\n{story}"
    made = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
    # each folder's agent called once per stage
    assert Counter((stage, folder) for folder, _, _, stage, _ in made) == {
        (stage, f"f{index:02}"): 1 for stage in ("implement", "polish")
        for index in range(1, FOLDERS + 1)}, made
    # and no runner ran more folders of a stage than its chunk: both stages fanned out
    per_runner = Counter((stage, runner_of(cwd)) for _, _, _, stage, cwd in made)
    assert max(per_runner.values()) <= FOLDERS // WORKERS, per_runner
    for target in targets:
        [pr] = world.github.repository(target).pulls.values()
        assert pr.merged, f"{target}\n{story}"
