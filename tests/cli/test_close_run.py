"""`delivery close RUN` (SPEC §7.1): every open PR of the run is closed (on GitHub with a
comment saying why), merged ones are left alone, `--delete-branches` deletes only the run's
own branches, the run is marked `cancelled` (listed so, never resumed), `--state` works,
and a second close does nothing new."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli
from git_helpers import git, make_remote
from state_helpers import bare

from delivery.forges.local import LocalForge
from delivery.testing import flow
from delivery.testing.github import FakeGitHub

# web merges (its PR is ready), api's check fails: its PR stays open
LANDED = flow("""
add [type=worktree_add]
change [shape=parallelogram, script="echo ok > web/app.py; echo BUG > api/app.py"]
ship [type=publish]
look [type=probe, probe="pr"]
land [type=merge, policy="each"]
start -> add -> change -> ship -> look -> land -> exit
""", goal="Say hello", graph='inputs="ticket", folders="web,api"', name="L")

# published, then waiting for CI: in event mode (--state) the run pauses there
WAITING = flow("""
add [type=worktree_add]
change [shape=parallelogram, script="echo ok > web/app.py; echo ok > api/app.py"]
ship [type=publish]
look [type=probe, probe="pr"]
w [type=wait, interval="60s"]
start -> add -> change -> ship -> look -> w -> look
look -> exit [condition="pr.state=MERGED"]
""", goal="Say hello", graph='inputs="ticket", folders="web,api"', name="W")

BRANCH = "delivery/T-8"


def _start(tmp_path: Path, dot: str, repos: dict[str, str], *more: str) -> tuple[int, str]:
    """`delivery run` of `dot` from the workspace `ws`; its exit code and run id."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "flow.dot").write_text(dot)
    code, out, err = cli("run", "flow.dot", "--input", "ticket=https://tracker.example/T-8",
                         "--branch", BRANCH, "--cache", tmp_path / "cache", "--json",
                         *[arg for folder, where in repos.items()
                           for arg in ("--repo", f"{folder}={where}")], *more, cwd=workspace)
    assert out.strip().startswith("{"), err
    return code, str(json.loads(out)["run_id"])


def _pull(remote: Path) -> dict[str, object]:
    [pull] = json.loads((remote / "delivery" / "pulls.json").read_text())["pulls"]
    return dict(pull)


@pytest.fixture
def remotes(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "remotes"
    root.mkdir()
    return {name: make_remote(root, name, {"app.py": "print(0)\n"}) for name in ("web", "api")}


def _landed(tmp_path: Path, remotes: dict[str, Path]) -> str:
    code, run_id = _start(tmp_path, LANDED, {k: str(v) for k, v in remotes.items()},
                          "--check", "api=! grep -q BUG app.py")
    assert code == 0
    assert (_pull(remotes["web"])["state"], _pull(remotes["api"])["state"]) == \
        ("merged", "open")
    return run_id


def test_close_closes_the_open_pr_leaves_the_merged_one_and_cancels_the_run(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    run_id = _landed(tmp_path, remotes)
    code, out, err = cli("close", run_id, cwd=tmp_path / "ws")
    assert code == 0, err
    api, web = _pull(remotes["api"]), _pull(remotes["web"])
    assert api["state"] == "closed" and "was cancelled" in str(api["close_comment"])
    assert web["state"] == "merged"
    assert "api: PR #1 closed" in out and "web: PR #1 is merged; left alone" in out
    assert f"run {run_id}: cancelled" in out
    code, out, _ = cli("runs", "--json", cwd=tmp_path / "ws")
    assert [(r["run_id"], r["status"]) for r in json.loads(out)] == [(run_id, "cancelled")]
    code, out, _ = cli("inspect", run_id, "--json", cwd=tmp_path / "ws")
    assert json.loads(out)["status"] == "cancelled"


def test_delete_branches_deletes_only_the_closed_prs_branch_and_keeps_its_commits(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    run_id = _landed(tmp_path, remotes)
    tip = git(remotes["api"], "rev-parse", BRANCH)
    code, _, err = cli("close", run_id, "--delete-branches", cwd=tmp_path / "ws")
    assert code == 0, err
    assert not git(remotes["api"], "branch", "--list", BRANCH)
    assert git(remotes["api"], "rev-parse", "refs/pull/1/head") == tip  # restorable
    assert git(remotes["web"], "branch", "--list", BRANCH)  # merged: left alone
    assert git(remotes["api"], "branch", "--list", "main")


def test_a_branch_whose_pr_the_run_did_not_publish_is_kept(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    run_id = _landed(tmp_path, remotes)
    # a person rewrote the PR's text: nothing says the run published it any more
    LocalForge().update_pull_request_body(str(remotes["api"]), 1, "my own PR")
    code, out, _ = cli("close", run_id, "--delete-branches", cwd=tmp_path / "ws")
    assert code == 0
    assert git(remotes["api"], "branch", "--list", BRANCH)
    assert f"api: branch {BRANCH} kept" in out


def test_a_second_close_does_nothing_new(tmp_path: Path, remotes: dict[str, Path]) -> None:
    run_id = _landed(tmp_path, remotes)
    assert cli("close", run_id, "--delete-branches", cwd=tmp_path / "ws").code == 0
    events = tmp_path / "ws" / ".delivery" / "runs" / run_id / "events.jsonl"
    before = events.read_bytes()
    code, out, _ = cli("close", run_id, "--delete-branches", cwd=tmp_path / "ws")
    assert code == 0
    assert "already; nothing new to close" in out
    assert events.read_bytes() == before


def test_a_cancelled_run_is_not_resumed(tmp_path: Path, remotes: dict[str, Path]) -> None:
    run_id = _landed(tmp_path, remotes)
    assert cli("close", run_id, cwd=tmp_path / "ws").code == 0
    code, _, err = cli("resume", run_id, cwd=tmp_path / "ws")
    assert code == 2
    assert "was cancelled with delivery close" in err and len(err.strip().splitlines()) == 1


def test_on_github_close_comments_with_the_given_text_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:
        for name, value in github.env().items():
            monkeypatch.setenv(name, value)
        for name in ("web", "api"):
            github.create_repo(f"octo/{name}", files={"app.py": "print(0)\n"})
        code, run_id = _start(tmp_path, WAITING.replace('interval="60s"', 'timeout="1ms"'),
                              {"web": "octo/web", "api": "octo/api"})
        for _ in range(2):  # the second close finds its comment: none posted twice
            code, _, err = cli("close", run_id, "--comment", "Superseded by T-9",
                               cwd=tmp_path / "ws")
            assert code == 0, err
        for name in ("web", "api"):
            pr = github.pull(f"octo/{name}", 1)
            assert pr.state == "closed" and not pr.merged
            said = [c.body for c in github.repository(f"octo/{name}").comments.values()
                    if "Superseded by T-9" in c.body]
            assert len(said) == 1


def test_close_with_state_cancels_the_run_on_its_ref(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    state = bare(tmp_path / "state.git")
    code, run_id = _start(tmp_path, WAITING, {k: str(v) for k, v in remotes.items()},
                          "--state", str(state))
    assert code == 3  # paused at its wait
    elsewhere = tmp_path / "other-machine"
    elsewhere.mkdir()
    code, _, err = cli("close", "--state", state, run_id, "--cache", tmp_path / "cache2",
                       cwd=elsewhere)
    assert code == 0, err
    assert [_pull(remotes[name])["state"] for name in ("web", "api")] == ["closed", "closed"]
    code, out, _ = cli("runs", "--state", state, "--json", cwd=elsewhere)
    assert [(r["run_id"], r["status"]) for r in json.loads(out)] == [(run_id, "cancelled")]
    code, _, err = cli("resume", "--state", state, run_id, "--cache", tmp_path / "cache2",
                       cwd=elsewhere)
    assert code == 2 and "was cancelled" in err
