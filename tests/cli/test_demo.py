"""`delivery demo`: the main job offline — both PRs merge, after a failing test was caught
by api's local check (its CI command, run in its worktree) and fixed before anything was
published, and a person's review was answered; the worktrees are gone."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from engine_helpers import cli
from git_helpers import git
from signal_helpers import start_delivery, wait_until

from delivery.cli.demo_files import API_BUGGY


def pulls(remote: Path) -> list[dict[str, object]]:
    return list(json.loads((remote / "delivery" / "pulls.json").read_text())["pulls"])


@pytest.mark.slow
def test_the_demo_fixes_a_failing_test_answers_a_review_and_merges_both_prs(tmp_path: Path) -> None:
    code, out, err = cli("demo", "--dir", tmp_path / "demo")
    assert code == 0, out + err
    root = tmp_path / "demo"
    remotes = {name: root / "remotes" / f"{name}.git" for name in ("api", "web")}
    for name, remote in remotes.items():
        (pull,) = pulls(remote)
        assert pull["state"] == "merged", name
        assert f"  {name}     #1  MERGED  {remote}#1" in out
    # api merged first (order of the folders), each a real merge commit on main
    api_at = pulls(remotes["api"])[0]["merged_sha"]
    web_at = pulls(remotes["web"])[0]["merged_sha"]
    assert git(remotes["api"], "rev-parse", "main") == api_at
    assert git(remotes["web"], "rev-parse", "main") == web_at
    assert out.index("api MERGED") > out.index("Merge in order")
    # the repairs were real: the fixed code and the reviewer's change are on main
    assert 'f"Hello, {name}!"' in git(remotes["api"], "show", "main:greeting.py")
    assert "html.escape(name)" in git(remotes["web"], "show", "main:page.py")
    (review, approval) = pulls(remotes["web"])[0]["reviews"]  # type: ignore[misc]
    assert (review["state"], approval["state"]) == ("CHANGES_REQUESTED", "APPROVED")
    # api's CI command ran first as its local check, in its worktree: the fix prompt got
    # the failing test before anything was published; the repair got the review text
    fix, repair = (root / "run" / "fix" / "1" / "prompt.md",
                   root / "run" / "repair" / "1" / "prompt.md")
    assert "AssertionError: 'Hello Ada' != 'Hello, Ada!'" in fix.read_text()
    assert "Please escape the name" in repair.read_text()
    assert API_BUGGY.strip() not in git(remotes["api"], "log", "-p", "--all")  # never pushed
    assert "worktrees: api: removed; web: removed" in out
    assert not (root / "workspace" / "api").exists()
    assert not (root / "workspace" / "web").exists()


def test_the_demo_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("x")
    code, _, err = cli("demo", "--dir", tmp_path)
    assert code == 2 and "is not empty and holds no demo to continue" in err


def _interrupted_demo(root: Path) -> None:
    """`delivery demo --dir ROOT` stopped by Ctrl-C once its PRs are open: one line names
    how to continue, no traceback."""
    process = start_delivery("demo", "--dir", root, cwd=root.parent)
    wait_until(lambda: (root / "run" / "publish").is_dir(), process, "the first publish")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().endswith(f"is resumable: delivery demo --dir {root}")


@pytest.mark.slow
def test_an_interrupted_demo_continues_in_its_directory_to_merged_prs(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    _interrupted_demo(root)
    code, out, err = cli("demo", "--dir", root)
    assert code == 0, out + err
    assert "continuing the demo" in out
    for name in ("api", "web"):
        assert [p["state"] for p in pulls(root / "remotes" / f"{name}.git")] == ["merged"]
    assert 'f"Hello, {name}!"' in git(root / "remotes" / "api.git", "show", "main:greeting.py")


@pytest.mark.slow
def test_an_interrupted_demo_is_resumed_like_any_run(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    _interrupted_demo(root)
    code, out, err = cli("resume", root / "run")
    assert code == 0, out + err
    assert "succeeded" in out
    for name in ("api", "web"):
        assert [p["state"] for p in pulls(root / "remotes" / f"{name}.git")] == ["merged"]
