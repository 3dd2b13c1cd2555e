"""Branches are the run's own (SPEC §14): names made from tickets are unique per ticket,
and `--branch` naming the base branch or a person's existing branch is refused before the
run, through `delivery run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli, write_flow
from git_helpers import commit_to, git, make_remote

ADD_ONLY = """
digraph F {
  graph [goal="g", inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  start -> add -> exit
}
"""

PUBLISHING = """
digraph F {
  graph [goal="g", inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="printf 'x\\\\n' > web/x.txt"]
  ship [type=publish]
  start -> add -> change -> ship -> exit
}
"""


def _branch_of(tmp_path: Path, remote: Path, ticket: str, workspace: str) -> str:
    flow = write_flow(tmp_path, ADD_ONLY)
    where = tmp_path / workspace
    where.mkdir()
    code, out, err = cli("run", flow, "--repo", f"web={remote}", "--cache", tmp_path / "cache",
                         "--workspace", where, "--input", f"ticket={ticket}", "--json")
    assert code == 0, err
    return str(json.loads(out)["context"]["web.worktree.branch"])


@pytest.mark.parametrize("first,second", [
    ("https://tracker.example/ENG-42/fix-login", "https://tracker.example/ENG-97/fix-login"),
    ("octo/web#12", "acme/web#12"),
])
def test_two_tickets_whose_slugs_collide_get_different_branches(
        tmp_path: Path, first: str, second: str) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    one = _branch_of(tmp_path, remote, first, "one")
    other = _branch_of(tmp_path, remote, second, "two")
    assert one.startswith("delivery/") and other.startswith("delivery/")
    assert one != other


def test_the_same_ticket_names_the_same_branch(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    ticket = "https://github.com/octo/web/issues/12"
    assert _branch_of(tmp_path, remote, ticket, "one") == _branch_of(tmp_path, remote, ticket,
                                                                     "two")


def _run_on_branch(tmp_path: Path, remote: Path, branch: str) -> tuple[int, str]:
    flow = write_flow(tmp_path, PUBLISHING)
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    code, _, err = cli("run", flow, "--repo", f"web={remote}", "--cache", tmp_path / "cache",
                       "--workspace", workspace, "--input", "ticket=T-1", "--branch", branch)
    return code, err


def test_branch_naming_the_base_branch_is_refused_before_the_run(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    before = git(remote, "rev-parse", "refs/heads/main")
    code, err = _run_on_branch(tmp_path, remote, "main")
    assert code == 2, err
    assert "--branch main" in err and "default branch" in err and "Traceback" not in err
    assert git(remote, "rev-parse", "refs/heads/main") == before  # nothing pushed onto it
    assert not (tmp_path / "ws" / ".delivery").exists()  # no run was started


def test_branch_naming_a_persons_existing_branch_is_refused_before_the_run(
        tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    commit_to(remote, "feature-login", {"login.py": "mine\n"})
    before = git(remote, "rev-parse", "refs/heads/feature-login")
    code, err = _run_on_branch(tmp_path, remote, "feature-login")
    assert code == 2, err
    assert "--branch feature-login" in err and "already exists" in err
    assert git(remote, "rev-parse", "refs/heads/feature-login") == before


def test_branch_naming_a_new_branch_is_the_runs_own(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    code, err = _run_on_branch(tmp_path, remote, "fix-login")
    assert code == 0, err
    assert git(remote, "show", "refs/heads/fix-login:x.txt") == "x"


def test_a_branch_git_would_refuse_is_refused_before_the_run_whatever_the_stages(
        tmp_path: Path) -> None:
    # a run that only adds worktrees pushes nothing, but its worktrees are on the branch
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    (tmp_path / "ws").mkdir()
    code, _, err = cli("run", write_flow(tmp_path, ADD_ONLY), "--repo", f"web={remote}",
                       "--cache", tmp_path / "cache", "--workspace", tmp_path / "ws",
                       "--input", "ticket=T-1", "--branch", "my branch")
    assert code == 2, err
    assert "--branch my branch" in err and "not a valid git branch name" in err
    assert not (tmp_path / "ws" / ".delivery").exists()  # no run was started
