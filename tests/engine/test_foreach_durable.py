"""A foreach stage saves each folder's result as it ends (SPEC §8.1): a run killed mid-stage
runs again only the folders that had not finished; a budget reached mid-stage starts no
new folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from budget_helpers import costly_agent, events
from engine_helpers import write_flow
from state_helpers import bare, git, state_at

from delivery.engine.runner import RunRequest, World, resume_run, start_run
from delivery.state.remote import StateRunStores
from delivery.testing.clock import FakeClock

NAMES = ("a1", "a2", "a3", "a4", "a5")

# Each folder's run appends its name to a log outside the folders; the third folder's
# first run SIGKILLs the `delivery` process (its parent) as a power cut would.
KILLING = """digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [type=script, foreach="folders", max_parallel=1,
        script="echo $(cat NAME) >> ../../ran.log; test $(cat NAME) = a3 || exit 0
test -e ../../killed && exit 0; touch ../../killed; kill -9 $PPID; sleep 5"]
  start -> work -> exit
}
"""


def _delivery(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    entry = "from delivery.cli.main import entry; entry()"
    return subprocess.run([sys.executable, "-c", entry, *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def _repos(tmp_path: Path) -> list[str]:
    args = []
    for name in NAMES:
        folder = tmp_path / "repos" / name
        folder.mkdir(parents=True)
        (folder / "NAME").write_text(name, encoding="utf-8")
        args += ["--repo", f"{name}={folder}"]
    return args


def test_a_run_killed_mid_stage_reruns_only_the_unfinished_folders(tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    flow = write_flow(work, KILLING)
    killed = _delivery("run", str(flow), *_repos(tmp_path), "--json", cwd=work)
    assert killed.returncode == -9, killed.stderr
    assert (tmp_path / "ran.log").read_text().split() == ["a1", "a2", "a3"]
    run_id = next(p.name for p in (work / ".delivery" / "runs").iterdir())
    resumed = _delivery("resume", run_id, "--json", cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "succeeded"
    # a1 and a2 ended before the kill and are not run again; a3 was running at the kill
    assert (tmp_path / "ran.log").read_text().split() == ["a1", "a2", "a3", "a3", "a4", "a5"]


BUDGETED = """digraph t {
  graph [budget_tokens=250]
  start [shape=Mdiamond]; exit [shape=Msquare]
  implement [prompt="Change this folder", foreach="folders", max_parallel=1]
  start -> implement -> exit
}
"""


def test_a_budget_reached_mid_stage_starts_no_new_folder_and_resume_runs_the_rest(
        tmp_path: Path) -> None:
    repos = dict(zip(NAMES, _repos(tmp_path)[1::2], strict=True))
    repos = {name: spec.split("=", 1)[1] for name, spec in repos.items()}
    work = tmp_path / "ws"
    work.mkdir()
    agent = costly_agent(100, stages=["implement"])
    paused = start_run(RunRequest(workflow=write_flow(work, BUDGETED), workspace=work,
                                  repos=repos), World(agent=agent, clock=FakeClock()))
    assert paused.status == "paused" and paused.pause_reason == "budget"
    ran = [node for node, _ in agent.prompts]
    assert ran == ["implement@a1", "implement@a2"]  # a third would pass 250 tokens
    outcome = resume_run(paused.run_dir, World(agent=agent, clock=FakeClock()), budget="1k")
    assert outcome.status == "succeeded", outcome.failure_reason
    assert [node for node, _ in agent.prompts] == [f"implement@{name}" for name in NAMES]


MANY = """digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [type=script, foreach="folders", max_parallel=2, script="cat NAME"]
  start -> work -> exit
}
"""


def test_in_event_mode_the_folders_of_a_stage_do_not_each_push_the_state_ref(
        tmp_path: Path) -> None:
    """Each folder's result is saved on this machine as it ends; the ref gets at most one
    push per 30 s of a running stage besides the stage's own save (a push a folder would
    snapshot every worktree, N² over a stage)."""
    state_repo = bare(tmp_path / "state.git")
    work = tmp_path / "ws"
    work.mkdir()
    repos = {spec.split("=", 1)[0]: spec.split("=", 1)[1] for spec in _repos(tmp_path)[1::2]}
    stores = StateRunStores(state_at(state_repo, work).session("", "starter"))
    outcome = start_run(RunRequest(workflow=write_flow(work, MANY), workspace=work,
                                   repos=repos), World(stores=stores, clock=FakeClock()))
    assert outcome.status == "succeeded", outcome.failure_reason
    pushes = git(state_repo, "rev-list", "--count", f"refs/delivery/runs/{outcome.run_id}")
    folder_saves = len(events(outcome.run_dir, "folder_finished"))
    assert folder_saves == len(NAMES)
    assert int(pushes) <= 5  # the run's first save, start, work (one mid-stage), the end
