"""A job killed on a hosted runner (SPEC §13: a claim whose job has ended is not live). The
runner is gone with its process, so neither "the same machine" nor "an earlier attempt of
this run" can tell; GitHub can: the killed job's workflow run is `completed`. The next job
(another run) asks and resumes at once, re-running the stage the kill cut short. Without
`actions: read` the claim is judged by its age, as before, and that is said once."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from actions_world_helpers import CONTROL, describe

from delivery.testing.actions import ActionsWorld, Job
from delivery.testing.github import FakeGitHub

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = """name: delivery
on:
  issues:
    types: [labeled]
  schedule:
    - cron: "17 * * * *"
permissions: {}
jobs:
  deliver:
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
      - uses: actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8
        with:
          persist-credentials: false
      - uses: octo/delivery@main
        with:
          github-token: ${{ secrets.DELIVERY_TOKEN }}
          workflow: flow.dot
"""
# the stage counts its runs and kills the job (SIGKILL of the delivery process) the first time
FLOW = """digraph K {
  graph [goal="Survive a kill"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  effect [shape=parallelogram, timeout="30m",
          script="echo ran >> %(runs)s; [ -e %(flag)s ] || { touch %(flag)s; kill -9 $PPID; }"]
  start -> effect -> exit
}
"""


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


def killed_world(github: FakeGitHub, tmp_path: Path) -> tuple[ActionsWorld, Path, Job]:
    """The control repository with FLOW; its first job is killed mid-stage."""
    runs = tmp_path / "runs.txt"
    world = ActionsWorld(github, tmp_path / "world", action_root=ROOT,
                         secrets={"DELIVERY_TOKEN": github.token})
    world.add_repository(CONTROL, workflows={"delivery.yml": WORKFLOW},
                         files={"flow.dot": FLOW % {"runs": runs, "flag": tmp_path / "kill"}},
                         collaborators={"alice": "write"})
    world.label_issue(CONTROL, 1, title="Survive a kill")
    [killed] = world.settle()
    assert killed.code == 128 + 9, describe([killed])  # SIGKILL, in the middle of `effect`
    assert runs.read_text() == "ran\n"
    return world, runs, killed


def ref_log(github: FakeGitHub, run_id: str) -> str:
    return subprocess.run(["git", "log", "--format=%s", f"refs/delivery/runs/{run_id}"],
                          cwd=github.repository(CONTROL).path, capture_output=True,
                          text=True, check=True).stdout


def run_ids(github: FakeGitHub) -> list[str]:
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname:lstrip=3)",
                           "refs/delivery/runs/"], cwd=github.repository(CONTROL).path,
                          capture_output=True, text=True, check=True).stdout
    return refs.split()


def test_the_next_job_resumes_a_run_whose_hosted_job_was_killed_and_re_runs_the_stage(
        github: FakeGitHub, tmp_path: Path) -> None:
    world, runs, killed = killed_world(github, tmp_path)
    run = github.repository(CONTROL).actions_runs[int(killed.contexts["github"]["run_id"])]
    assert (run.status, run.conclusion) == ("completed", "failure")

    world.tick()  # at once: the claim is seconds old, far within the stage's 30 minutes
    [resumed] = world.settle()
    assert resumed.outputs.get("status") == "succeeded", describe([resumed])
    assert runs.read_text() == "ran\nran\n"  # the stage the kill cut short ran again
    [run_id] = run_ids(github)
    log = ref_log(github, run_id)
    assert f"taking over from actions:{CONTROL}/{killed.contexts['github']['run_id']}/1" \
        in log, log
    asked = [request for request in github.requests
             if request.path.endswith(f"/actions/runs/{killed.contexts['github']['run_id']}")]
    assert [request.status for request in asked] == [200]


def test_without_actions_read_a_killed_job_s_claim_stays_live_until_it_is_stale(
        github: FakeGitHub, tmp_path: Path) -> None:
    world, runs, _ = killed_world(github, tmp_path)
    github.repository(CONTROL).actions_readable = False

    for _ in range(2):
        world.tick()
        [waiting] = world.settle()
        assert waiting.outputs.get("status") == "superseded", describe([waiting])
        said = waiting.stdout + waiting.stderr
        assert said.count("cannot ask GitHub whether the Actions run") == 1, said
        assert "actions: read" in said
    assert runs.read_text() == "ran\n"  # nothing ran twice at once
