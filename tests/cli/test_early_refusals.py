"""What can be checked before the first stage is refused then (SPEC §12): exit 2, one line
naming what is wrong and how to fix it, and nothing written (no run directory)."""

from __future__ import annotations

from pathlib import Path

from git_helpers import git, make_remote

from delivery.testing import flow
from delivery.testing.cli import invoke

DELIVER = Path(__file__).resolve().parents[2] / "workflows" / "deliver.dot"


def _deliver(tmp_path: Path, *options: str) -> tuple[int, str, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "replies.json").write_text("{}")  # an agent that is never reached
    code, out, err = invoke("run", DELIVER, "--input", "ticket=https://tracker.example/T-1",
                            "--agent", "replay:replies.json", "--workspace", workspace,
                            *options)
    assert not (workspace / ".delivery").exists(), "a refused run wrote its directory"
    assert "Traceback" not in err and out == ""
    return code, out, err


def test_no_repo_where_the_workflow_needs_folders_is_refused(tmp_path: Path) -> None:
    code, _, err = _deliver(tmp_path)
    assert code == 2
    assert err.startswith("delivery run: refused: --repo: no folder was given, and the "
                          "workflow has folder stages (worktree_add 'setup', publish "
                          "'publish'")  # the first three stages that need a folder
    assert "pass --repo NAME=LOCATION" in err


def test_a_repo_that_is_a_plain_directory_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "api"
    plain.mkdir()
    code, _, err = _deliver(tmp_path, "--repo", f"api={plain}")
    assert code == 2
    assert f"--repo api={plain}: is a plain directory, not a git repository" in err
    assert "give the path of a git repository" in err


def test_a_working_tree_with_the_base_branch_checked_out_is_refused_before_any_work(
        tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "api")
    clone = tmp_path / "api"
    git(tmp_path, "clone", "--quiet", str(remote), str(clone))
    code, _, err = _deliver(tmp_path, "--repo", f"api={clone}")
    assert code == 2
    assert f"--repo api={clone}: is a repository with a working tree whose base branch " \
        "'main' is checked out" in err
    assert f"git clone --bare {clone} {clone}.git" in err


def test_a_node_folder_that_is_not_a_run_folder_is_refused(tmp_path: Path) -> None:
    workflow = tmp_path / "flow.dot"
    workflow.write_text(flow("""
        add   [type=worktree_add, folder="web"]
        start -> add -> exit
    """))
    make_remote(tmp_path, "api")
    code, _, err = invoke("run", workflow, "--repo", f"api={tmp_path / 'api.git'}",
                          "--workspace", tmp_path)
    assert code == 2
    assert "node 'add': works on folder 'web', which is not one of the run's folders (api)" \
        in err


def test_a_missing_agent_program_is_refused(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "api")
    code, _, err = _deliver(tmp_path, "--repo", f"api={remote}", "--agent",
                            "command:no-such-agent-program-xyz -p")
    assert code == 2
    assert "no-such-agent-program-xyz" in err
