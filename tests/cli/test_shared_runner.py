"""A self-hosted runner shared by jobs and repositories (issue 40, SPEC §13 "leftovers of
earlier jobs", §14 "a stale index.lock and similar faults"): what a killed job leaves in the
clone cache, and a cache named by a relative path, do not break the next `delivery run`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from engine_helpers import cli, write_flow
from git_helpers import make_remote

from delivery.git.worktrees import clone_path

ADD_ONLY = """
digraph F {
  graph [goal="g", inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  start -> add -> exit
}
"""


def _run(tmp_path: Path, remote: Path, cache: Path | str, workspace: str = "ws"
         ) -> tuple[int, dict[str, object], str]:
    flow = write_flow(tmp_path, ADD_ONLY)
    where = tmp_path / workspace
    where.mkdir(exist_ok=True)
    code, out, err = cli("run", flow, "--repo", f"web={remote}", "--cache", cache,
                         "--workspace", where, "--input", "ticket=T-1", "--json")
    return code, (json.loads(out) if out.strip() else {}), err


@pytest.mark.parametrize("left", ["initialised, no remote yet", "only HEAD written"])
def test_a_clone_half_made_by_a_killed_job_does_not_break_the_next_run(
        tmp_path: Path, left: str) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    cache = tmp_path / "cache"
    half = clone_path(str(remote), cache)
    half.mkdir(parents=True)
    if left == "only HEAD written":
        (half / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    else:
        subprocess.run(["git", "init", "--quiet", "--bare", str(half)], check=True)
    code, result, err = _run(tmp_path, remote, cache)
    assert code == 0, (result.get("failure_reason"), err)
    assert (tmp_path / "ws" / "web" / "app.txt").read_text(encoding="utf-8") == "one\n"


def test_a_cache_given_as_a_relative_path_works_and_is_recorded_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    monkeypatch.chdir(tmp_path)
    code, result, err = _run(tmp_path, remote, "cache")
    assert code == 0, (result.get("failure_reason"), err)
    run_json = json.loads((Path(str(result["run_dir"])) / "run.json").read_text())
    # a resume started from another directory finds the same cache
    assert run_json["git_cache"] == str(tmp_path / "cache")
    assert os.path.isabs(run_json["git_cache"])


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the cache to another user needs root")
def test_a_cache_owned_by_another_user_fails_the_stage_in_one_line_naming_the_fix(
        tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    cache = tmp_path / "cache"
    assert _run(tmp_path, remote, cache)[0] == 0
    for path in [cache, *cache.rglob("*")]:
        os.lchown(path, 4242, 4242)  # another job's user on a shared runner
    code, result, err = _run(tmp_path, remote, cache, workspace="other")
    assert code == 1, err
    reason = str(result["failure_reason"])
    assert "owned by another user" in reason and "--cache" in reason, reason
    assert "\n" not in reason
