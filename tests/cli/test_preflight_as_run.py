"""`delivery preflight` refuses a local `--repo` that `delivery run` would refuse, in the
same words (issue 39): a repository with a working tree whose base branch is checked out
(a merge could not write into it) and a plain directory. Before, preflight said "ok" for
the first and that the second "cannot be read", and the run was then refused. Through
the `delivery` executable, stderr in a file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from logged_cli_helpers import delivery

from delivery.testing import flow

DELIVERS = flow("""
wt [type=worktree_add]
pub [type=publish]
m [type=merge]
start -> wt -> pub -> m -> exit
""", name="Delivers")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "deliver.dot").write_text(DELIVERS, encoding="utf-8")
    subprocess.run(["git", "init", "-q", "-b", "main", "web"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q",
                    "--allow-empty", "-m", "first"], cwd=tmp_path / "web", check=True)
    (tmp_path / "plain").mkdir()
    return tmp_path


def refusal(log: str, command: str) -> str:
    prefix = f"delivery {command}: refused: "
    assert log.startswith(prefix) and log.count("\n") == 1, log
    return log.removeprefix(prefix)


@pytest.mark.parametrize("folder", ["web", "plain"])
def test_preflight_refuses_a_local_repository_run_refuses_in_the_same_words(
        workspace: Path, folder: str) -> None:
    run_code, _, run_log = delivery(workspace, "run", "deliver.dot", "--repo",
                                    f"web={folder}")
    code, stdout, log = delivery(workspace, "preflight", "--repo", f"web={folder}")
    assert (run_code, code, stdout) == (2, 2, "")
    assert refusal(log, "preflight") == refusal(run_log, "run")


def test_preflight_passes_a_bare_clone(workspace: Path) -> None:
    subprocess.run(["git", "clone", "-q", "--bare", "web", "web.git"], cwd=workspace,
                   check=True)
    code, stdout, log = delivery(workspace, "preflight", "--repo", "web=web.git")
    assert code == 0, log
    assert stdout.rstrip().endswith("ok")
