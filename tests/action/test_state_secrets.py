"""Unpublished work saved between jobs on the state ref (SPEC §13) never holds a secret in
the clear (SPEC §14 "No secret in a change"): a run that pauses with an agent's file holding
a known secret value saves that file masked, and nothing on the state repository holds the
value."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from git_helpers import make_remote
from state_helpers import bare, head, state_at

from delivery.engine.runner import RunRequest, World, start_run
from delivery.state.remote import StateRunStores

SECRET = "s3cr3t-value-from-the-environment"

PAUSING = """
digraph W {
  graph [goal="wait", inputs="ticket", folders="web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="printf \\"key = $DEMO_API_KEY\\\\n\\" > web/config.py"]
  w [type=wait, interval="60s"]
  start -> add -> change -> w -> exit
}
"""


def test_a_paused_runs_unpublished_secret_is_masked_on_the_state_ref(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_API_KEY", SECRET)
    remote = make_remote(tmp_path, "web", {"app.py": "v1\n"})
    state_repo = bare(tmp_path / "state.git")
    home = tmp_path / "starter"
    home.mkdir()
    (home / "flow.dot").write_text(PAUSING, encoding="utf-8")
    stores = StateRunStores(state_at(state_repo, home).session("", "starter"))
    ran = start_run(RunRequest(workflow=home / "flow.dot", workspace=home,
                               inputs={"ticket": "T-1"}, repos={"web": str(remote)}),
                    World(stores=stores, git_cache=tmp_path / "cache"))
    assert ran.status == "paused", ran.failure_reason
    assert (home / "web" / "config.py").read_text() == f"key = {SECRET}\n"  # kept here
    sha = head(state_repo, ran.run_id)
    patch = subprocess.run(["git", "show", f"{sha}:.worktrees/web.patch"], cwd=state_repo,
                           capture_output=True, check=True).stdout
    assert b"+key = ***" in patch
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"],
                             cwd=state_repo, capture_output=True, check=True).stdout
    assert SECRET.encode() not in objects
