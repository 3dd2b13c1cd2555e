"""A fanned-out foreach agent stage (SPEC §13 "Fan-out across runners") whose agent leaves
unpublished edits: each worker saves its folders' edits with their results, and the job
that continues the run re-creates those worktrees from them and publishes them."""

from __future__ import annotations

from pathlib import Path

from git_helpers import git, make_remote
from state_helpers import bare, state_at

from delivery.agents.scripted import ScriptedTurn
from delivery.engine.chunk_work import ChunkDone, work_chunk
from delivery.engine.fan_out_chunks import StateFanOut
from delivery.engine.runner import RunRequest, World, start_run
from delivery.state.remote import StateRunStores
from delivery.testing import ScriptedAgent

FOLDERS = ["f1", "f2", "f3", "f4"]

FLOW = """digraph D {
  graph [goal="edit", inputs="ticket", folders="f1,f2,f3,f4"]
  start [shape=Mdiamond]; exit [shape=Msquare]
  add [type=worktree_add]
  implement [prompt="Change this folder", foreach="folders", max_parallel=1]
  ship [type=publish]
  start -> add -> implement -> ship -> exit
}
"""


def _agent() -> ScriptedAgent:
    turn = ScriptedTurn(files={"edit.txt": "edited by the agent\n"},
                        reply='Done. {"context_updates": {}}')
    return ScriptedAgent({"implement": [turn] * len(FOLDERS)})


def test_a_fanned_out_agent_stages_unpublished_edits_reach_the_continuing_job(
        tmp_path: Path) -> None:
    remotes = {name: make_remote(tmp_path, name, {"app.txt": f"{name}\n"}) for name in FOLDERS}
    state_repo = bare(tmp_path / "state.git")
    home = tmp_path / "starter"
    home.mkdir()
    (home / "flow.dot").write_text(FLOW, encoding="utf-8")
    state = state_at(state_repo, home)
    session = state.session("", "starter")
    paused = start_run(RunRequest(workflow=home / "flow.dot", workspace=home,
                                  inputs={"ticket": "T-1"}, max_runners=2,
                                  repos={n: str(p) for n, p in remotes.items()}),
                       World(stores=StateRunStores(session), agent=_agent(),
                             git_cache=home / "cache",
                             fan_out=StateFanOut(state, "starter")))
    assert (paused.status, paused.pause_reason, paused.chunks) == ("paused", "fan_out", [1, 2])
    ends = []
    for chunk in (1, 2):  # each a fresh runner: its own workspace and clone cache
        runner = tmp_path / f"runner-{chunk}"
        runner.mkdir()
        ends.append(work_chunk(state_at(state_repo, runner), paused.run_id, chunk,
                               job=f"worker-{chunk}", workspace=runner,
                               world=World(agent=_agent(), git_cache=runner / "cache")))
    assert isinstance(ends[0], ChunkDone)
    last = ends[1]
    assert not isinstance(last, ChunkDone) and last.status == "succeeded", last
    for name, remote in remotes.items():  # published from the continuing job's worktrees
        branch = git(remote, "for-each-ref", "--format=%(refname:short)", "refs/heads/delivery")
        assert branch, name
        assert git(remote, "show", f"{branch}:edit.txt") == "edited by the agent", name
