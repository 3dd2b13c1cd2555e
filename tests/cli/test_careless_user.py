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
