"""A campaign fanned out across runners in the simulated Actions world (issue 38, SPEC §13
"Fan-out across runners"): the files `delivery action init` writes, set up as its printed
steps say, a labelled issue → the `deliver` job pauses `fan_out` → the `work` matrix runs
one fresh runner per chunk, at once → the last worker continues the run → the targets'
relays carry CI's events → every PR merged. The agent takes `delay` seconds a folder; the
implement stage's wall time is compared with (folders / (workers x max_parallel)) x delay.

The default suite runs 4 folders on 2 workers (1 s a folder); `--long` runs the issue's
50 folders on 8 workers at 2 s a folder."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from actions_world_helpers import describe
from quick_start_helpers import CONTROL, agent_toml, quick_start

from delivery.testing.actions import ActionsWorld
from delivery.testing.github import FakeGitHub

MAX_PARALLEL = 2
# one agent stage per folder, published, each PR merged once CI (the targets' own) is green
FLOW = f"""digraph campaign {{
    graph [goal="Add a changelog line", inputs="ticket,notes?,check_command?",
           defaults="notes='',check_command='true'"]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    setup [type=worktree_add]
    implement [foreach="folders", max_parallel={MAX_PARALLEL}, outputs="summary:text",
               prompt="Ticket {{{{ ticket }}}}: you work in folder {{{{ folder.name }}}}."]
    publish [type=publish]
    observe [type=probe, probe="pr"]
    route [type=conditional]
    land [type=merge, policy=each]
    pause [type=wait, interval="30s", timeout="6h"]
    clean [type=worktree_remove]
    start -> setup -> implement -> publish -> observe -> route
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


def calls(log: Path) -> list[tuple[str, float, float]]:
    """(folder, start, end) of every agent call, from the agent's log."""
    found = []
    for line in log.read_text(encoding="utf-8").splitlines():
        folder, start, end = line.split()[:3]
        found.append((folder, float(start), float(end)))
    return found


def deliver_campaign(github: FakeGitHub, root: Path, monkeypatch: pytest.MonkeyPatch, *,
                     folders: int, workers: int, delay: float) -> tuple[ActionsWorld, Path]:
    targets = [f"octo/f{index:02}" for index in range(1, folders + 1)]
    log = root / "agent-calls.log"
    world, _ = quick_start(github, root, targets, workflow=FLOW, toml=agent_toml(delay, log),
                           max_runners=workers, monkeypatch=monkeypatch)
    world.label_issue(CONTROL, 1, title="Add a changelog line", body="In every repository.")
    world.settle(max_jobs=4 * folders + 20)
    return world, log


def assert_fanned_out_and_merged(world: ActionsWorld, log: Path, *, folders: int,
                                 workers: int, delay: float) -> None:
    jobs = world.delivery_jobs()
    story = describe(jobs)
    deliver, *rest = jobs
    assert deliver.job == "deliver" and deliver.outputs["status"] == "paused", story
    assert f"stage 'implement' is fanned out to {workers} worker jobs" in deliver.stdout, story
    assert all(job.event != "schedule" for job in world.jobs)  # on events alone
    matrix = [job for job in rest if job.job == "work / chunk"]
    assert sorted(int(job.contexts["matrix"]["chunk"]) for job in matrix) == \
        list(range(1, workers + 1)), story
    assert len({job.runner["workspace"] for job in matrix}) == workers  # fresh runners
    assert max(job.started for job in matrix) < min(job.ended for job in matrix), story
    statuses = Counter(job.outputs.get("status") for job in matrix)
    # one worker continued the run (to CI's wait); the others saved their chunks and left
    # the run to others (chunk_done), or found every chunk done too and lost the run's claim
    assert statuses["paused"] == 1, story
    assert set(statuses) <= {"paused", "chunk_done", "superseded"}, story
    for repository in [f"octo/f{index:02}" for index in range(1, folders + 1)]:
        [pr] = world.github.repository(repository).pulls.values()
        assert pr.merged, f"{repository}\n{story}"
    assert any(job.outputs.get("status") == "succeeded" for job in rest), story
    made = calls(log)
    counted = Counter(folder for folder, _, _ in made)
    assert counted == {f"f{index:02}": 1 for index in range(1, folders + 1)}  # once each
    # more agents at once than one runner runs: the chunks ran on several runners together
    assert peak(made) > MAX_PARALLEL, made


def peak(made: list[tuple[str, float, float]]) -> int:
    """The most agent calls running at one time."""
    edges = sorted([(start, 1) for _, start, _ in made] + [(end, -1) for _, _, end in made])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def implement_ratio(world: ActionsWorld, log: Path, *, folders: int, workers: int,
                    delay: float) -> float:
    """The implement stage's wall time once the runners run it — the longest of the worker
    runners' own spans, from its first folder's start to its last folder's end — over
    (folders / (workers x max_parallel)) x delay. Each runner's start-up (checkout, token,
    fetching the run, re-creating worktrees) is left out, as the ideal leaves it out; the
    span from the first folder anywhere to the last anywhere, which adds the runners'
    start-up skew (8 simulated runners share this machine's cores), is printed beside it."""
    made = calls(log)
    spans: dict[str, list[float]] = {}
    for _, start, end, runner in made_on_runners(log):
        first, last = spans.get(runner, [start, end])
        spans[runner] = [min(first, start), max(last, end)]
    wall = max(last - first for first, last in spans.values())
    across = max(end for _, _, end in made) - min(start for _, start, _ in made)
    ideal = folders / (workers * MAX_PARALLEL) * delay
    matrix = [job for job in world.jobs if job.job == "work / chunk"]
    setup = min(start for _, start, _ in made) - min(job.started for job in matrix)
    print(f"\nimplement: {folders} folders, {workers} workers x max_parallel "
          f"{MAX_PARALLEL}, agent {delay} s a folder: {wall:.2f} s on the slowest runner, "
          f"ideal {ideal:.2f} s, ratio {wall / ideal:.2f}; first folder to last across "
          f"runners {across:.2f} s (ratio {across / ideal:.2f}); the first runner took "
          f"{setup:.2f} s before its first folder")
    return wall / ideal


def made_on_runners(log: Path) -> list[tuple[str, float, float, str]]:
    """The agent calls with the runner each ran on (read from the worktree's path)."""
    found = []
    for line in log.read_text(encoding="utf-8").splitlines():
        folder, start, end, _, cwd = line.split()[:5]
        runner = next((part for part in Path(cwd).parts if part.startswith("runner-")), cwd)
        found.append((folder, float(start), float(end), runner))
    return found


def test_a_labelled_issue_fans_the_campaign_out_to_two_runners_and_merges_every_pr(
        github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    world, log = deliver_campaign(github, tmp_path, monkeypatch, folders=4, workers=2,
                                  delay=1.0)
    assert_fanned_out_and_merged(world, log, folders=4, workers=2, delay=1.0)
    implement_ratio(world, log, folders=4, workers=2, delay=1.0)  # printed: one round


@pytest.mark.long  # 50 folders on 8 runners at 2 s a folder
def test_fifty_folders_on_eight_runners_take_at_most_one_and_a_half_times_the_ideal(
        github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    world, log = deliver_campaign(github, tmp_path, monkeypatch, folders=50, workers=8,
                                  delay=2.0)
    assert_fanned_out_and_merged(world, log, folders=50, workers=8, delay=2.0)
    assert implement_ratio(world, log, folders=50, workers=8, delay=2.0) <= 1.5
