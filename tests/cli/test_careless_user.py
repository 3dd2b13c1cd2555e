"""What a careless user types (issue 40's self-attack): folder names that are no identifier,
one repository given for two folders, a workspace or run directory where the run's files
would end up in a pull request. Each is refused before the run (exit 2) with one line naming
the option and the fix, and nothing is written outside the workspace."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from engine_helpers import cli, write_flow
from git_helpers import make_remote
from signal_helpers import start_delivery, wait_until

ADD_THEN_EDIT = """
digraph F {
  graph [goal="g", inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="printf 'x\\\\n' > x.txt"]
  start -> add -> change -> exit
}
"""


def _run(tmp_path: Path, *args: str | Path, workspace: Path | None = None
         ) -> tuple[int, str, str]:
    flow = write_flow(tmp_path, ADD_THEN_EDIT)
    where = workspace or tmp_path / "ws"
    where.mkdir(parents=True, exist_ok=True)
    return cli("run", flow, "--cache", tmp_path / "cache", "--workspace", where,
               "--input", "ticket=T-1", *args)


@pytest.mark.parametrize("folder", ["../web", "a/b", ".git", ".delivery", "..", "we b"])
def test_a_folder_name_that_is_no_identifier_is_refused_and_nothing_is_made(
        tmp_path: Path, folder: str) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    write_flow(tmp_path, ADD_THEN_EDIT)
    before = sorted(path.name for path in tmp_path.iterdir())
    code, _, err = _run(tmp_path, "--repo", f"{folder}={remote}")
    assert code == 2, err
    assert f"--repo {folder}=" in err and "[A-Za-z_][A-Za-z0-9_]*" in err
    assert len(err.strip().splitlines()) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([*before, "ws"])
    assert list((tmp_path / "ws").iterdir()) == []


def test_one_repository_for_two_folders_is_refused(tmp_path: Path) -> None:
    # both would be worktrees on the run's one branch: the second would take it from the
    # first, whose work would go on in a detached HEAD that nothing publishes
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    code, _, err = _run(tmp_path, "--repo", f"web={remote}", "--repo", f"api={remote}/")
    assert code == 2, err
    assert "--repo api=" in err and "folder 'web'" in err and "once" in err
    assert list((tmp_path / "ws").iterdir()) == []


def test_the_same_repository_twice_is_refused_also_on_github(tmp_path: Path) -> None:
    code, _, err = _run(tmp_path, "--repo", "web=octo/web", "--repo", "site=Octo/Web")
    assert code == 2, err
    assert "--repo site=Octo/Web" in err and "folder 'web'" in err


def test_a_repository_given_for_two_folders_of_a_run_without_worktrees_is_allowed(
        tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    flow = write_flow(tmp_path, """
        digraph F {
          graph [goal="g"]
          start [shape=Mdiamond]
          exit [shape=Msquare]
          look [type=probe, probe="diff"]
          start -> look -> exit
        }""")
    code, out, err = cli("run", flow, "--workspace", tmp_path, "--repo", f"a={remote}",
                         "--repo", f"b={remote}", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "succeeded"


def _first_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run that made its worktree `ws/web`: (the repository, the worktree)."""
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    code, _, err = _run(tmp_path, "--repo", f"web={remote}")
    assert code == 0, err
    return remote, tmp_path / "ws" / "web"


def _untracked(worktree: Path) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                         cwd=worktree, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if not line.endswith("x.txt")]


def test_a_workspace_inside_a_runs_worktree_is_refused(tmp_path: Path) -> None:
    # the new run's files and worktrees would be untracked files of the other run's
    # folder, which its publish commits into its pull request
    remote, worktree = _first_run(tmp_path)
    code, _, err = _run(tmp_path, "--repo", f"web={remote}", workspace=worktree)
    assert code == 2, err
    assert f"--workspace {worktree}" in err and len(err.strip().splitlines()) == 1
    assert _untracked(worktree) == []


def test_a_run_directory_inside_a_folder_s_worktree_is_refused(tmp_path: Path) -> None:
    remote, worktree = _first_run(tmp_path)
    code, _, err = _run(tmp_path, "--repo", f"web={remote}", "--run-dir", worktree / "run")
    assert code == 2, err
    assert "--run-dir" in err and "folder 'web'" in err
    assert _untracked(worktree) == []


@pytest.mark.parametrize("where", ["the workspace", "above the workspace"])
def test_a_run_directory_holding_the_workspace_is_refused(tmp_path: Path, where: str) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    workspace = tmp_path / "ws"
    run_dir = workspace if where == "the workspace" else tmp_path
    code, _, err = _run(tmp_path, "--repo", f"web={remote}", "--run-dir", run_dir)
    assert code == 2, err
    assert f"--run-dir {run_dir}" in err
    assert list(workspace.iterdir()) == []


HOLDING = """
digraph F {
  graph [goal="g", inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  hold [shape=parallelogram, timeout="30s",
        script="touch %(started)s; while [ ! -e %(release)s ]; do sleep 0.05; done"]
  start -> add -> hold -> exit
}
"""


@pytest.mark.parametrize("second_workspace", ["the same workspace", "its own workspace"])
def test_a_second_run_of_a_ticket_while_the_first_runs_leaves_the_first_s_worktree_alone(
        tmp_path: Path, second_workspace: str) -> None:
    # same ticket, same branch: the second run would work in the first one's worktree
    # (same workspace) or detach it to take the branch (its own workspace)
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    started, release = tmp_path / "started", tmp_path / "release"
    flow = write_flow(tmp_path, HOLDING % {"started": started, "release": release})
    common = ["--repo", f"web={remote}", "--cache", tmp_path / "cache",
              "--input", "ticket=https://tracker.example/T-1", "--json"]
    first_ws = tmp_path / "ws"
    first_ws.mkdir()
    first = start_delivery("run", flow, "--workspace", first_ws, *common, cwd=tmp_path)
    try:
        wait_until(started.exists, first, "the first run's stage")
        other_ws = first_ws if second_workspace == "the same workspace" else tmp_path / "ws2"
        other_ws.mkdir(exist_ok=True)
        code, out, err = cli("run", flow, "--workspace", other_ws, *common)
        assert code == 1, err
        reason = json.loads(out)["failure_reason"]
        assert f"pid {first.pid}" in reason and "folder 'web'" in reason, reason
        branch = subprocess.run(["git", "branch", "--show-current"], cwd=first_ws / "web",
                                capture_output=True, text=True, check=True).stdout.strip()
        assert branch.startswith("delivery/t-1")
    finally:
        release.touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert json.loads(out)["status"] == "succeeded"
