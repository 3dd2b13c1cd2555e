"""Fresh runners lose nothing (SPEC §13): every job runs the Action's step on a new machine
(empty HOME, workspace and clone cache) against the fake GitHub. A stage's edits before a
gate come back in the next job and reach the PR; a job killed (SIGKILL) in the middle of a
stage is re-run by the next job without losing or repeating anything; a self-hosted
runner's clone cache that still registers the branch in another job's worktree works and
leaves that job's files alone; worktrees that cannot be re-created stop the resume."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from action_helpers import Actions

from delivery.testing.github import FakeGitHub

REPO = "octo/app"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

EDIT_THEN_GATE = """
digraph G {
  graph [goal="Deliver", inputs="ticket,notes?", defaults="notes=''", folders="app"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram,
          script="printf 'hello\\\\n' > app/hello.txt && printf 'v2\\\\n' > app/app.py"]
  %(between)s
  approve [type=human, label="Publish it?"]
  ship [type=publish]
  start -> add -> change -> %(first)s approve
  approve -> ship [label="[Y] yes"]
  approve -> exit [label="[N] no"]
  ship -> exit
}
"""


def edit_then_gate(between: str = "", first: str = "") -> str:
    return EDIT_THEN_GATE % {"between": between, "first": first}


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.create_repo(REPO, files={"app.py": "print('v1')\n"},
                           collaborators={"alice": "write"})
        yield server


@pytest.fixture
def actions(tmp_path: Path, fake: FakeGitHub) -> Actions:
    env = fake.env()
    env.pop("GITHUB_TOKEN")
    return Actions(tmp_path, env, REPO)


def given(actions: Actions, fake: FakeGitHub, text: str) -> dict[str, str]:
    (actions.workspace / "flow.dot").write_text(text, encoding="utf-8")
    return {"workflow": "flow.dot", "repos": f"app={REPO}", "github-token": fake.token}


def labeled() -> dict[str, Any]:
    return {"action": "labeled", "label": {"name": "delivery"},
            "issue": {"number": 7, "title": "Add hello", "body": "",
                      "html_url": f"https://github.com/{REPO}/issues/7"},
            "sender": {"login": "alice", "type": "User"}, "repository": {"full_name": REPO}}


def answer_on_ticket(text: str) -> dict[str, Any]:
    return {"action": "created",
            "issue": {"number": 7, "html_url": f"https://github.com/{REPO}/issues/7"},
            "comment": {"body": text, "user": {"login": "alice", "type": "User"}},
            "sender": {"login": "alice", "type": "User"}, "repository": {"full_name": REPO}}


def git(fake: FakeGitHub, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=fake.repository(REPO).path, capture_output=True,
                          text=True, check=True).stdout


def branches(fake: FakeGitHub) -> list[str]:
    return git(fake, "for-each-ref", "--format=%(refname)", "refs/heads/delivery").split()


def published(fake: FakeGitHub, name: str) -> str:
    [pr] = fake.repository(REPO).pulls.values()
    return git(fake, "show", f"refs/heads/{pr.head}:{name}")


KILL_ONCE = ('effect [shape=parallelogram, script="grep -qx once {effects} || '
             'echo once >> {effects}; [ -e {flag} ] || {{ touch {flag}; kill -9 $PPID; }}"]')


def test_a_killed_job_s_stage_is_re_run_and_edits_made_before_the_gate_reach_the_pr(
        actions: Actions, fake: FakeGitHub, tmp_path: Path) -> None:
    effects, flag = tmp_path / "effects.txt", tmp_path / "killed"
    inputs = given(actions, fake, edit_then_gate(
        KILL_ONCE.format(effects=effects, flag=flag), "effect ->"))
    killed = actions.job("issues", labeled(), inputs)
    assert killed.code == 128 + 9, killed.stdout + killed.stderr  # SIGKILL, mid-stage
    assert flag.exists() and effects.read_text() == "once\n"

    # the schedule's safety net: the killed job's claim is dead, its run taken over
    ticked = actions.job("schedule", {"schedule": "17 * * * *"}, inputs)
    assert ticked.outputs["status"] == "paused", ticked.stdout + ticked.stderr
    assert effects.read_text() == "once\n"  # the stage ran again, idempotently
    assert branches(fake) == []  # the edits were saved with the state, never pushed
    run_id = ticked.outputs["run-id"]
    log = git(fake, "log", "--format=%s", f"refs/delivery/runs/{run_id}")
    assert "taking over from actions:" in log

    answered = actions.job("issue_comment", answer_on_ticket("/delivery answer approve yes"),
                           inputs)
    assert answered.outputs["status"] == "succeeded", answered.stdout + answered.stderr
    # the edits made two jobs earlier, before the kill, reach the PR
    assert published(fake, "hello.txt") == "hello\n"
    assert published(fake, "app.py") == "v2\n"


def test_a_self_hosted_cache_holding_another_jobs_worktree_is_used_and_its_files_kept(
        actions: Actions, fake: FakeGitHub, tmp_path: Path) -> None:
    cache = tmp_path / "runner-cache"  # kept between jobs; the workspace is new each time
    inputs = given(actions, fake, edit_then_gate())
    paused = actions.job("issues", labeled(), inputs, cache=cache)
    assert paused.outputs["status"] == "paused", paused.stdout + paused.stderr
    [earlier] = [path for path in actions.root.glob("job-*/workspace/app")]
    (earlier / "notes.txt").write_text("a person's notes\n", encoding="utf-8")

    answered = actions.job("issue_comment", answer_on_ticket("/delivery answer approve yes"),
                           inputs, cache=cache)
    assert answered.outputs["status"] == "succeeded", answered.stdout + answered.stderr
    assert published(fake, "hello.txt") == "hello\n"
    assert (earlier / "notes.txt").read_text() == "a person's notes\n"  # left alone
    assert (earlier / "hello.txt").read_text() == "hello\n"


def test_worktrees_that_cannot_be_re_created_stop_the_resume_before_any_stage(
        actions: Actions, fake: FakeGitHub) -> None:
    inputs = given(actions, fake, edit_then_gate())
    paused = actions.job("issues", labeled(), inputs)
    run_id = paused.outputs["run-id"]
    before = git(fake, "rev-parse", f"refs/delivery/runs/{run_id}").strip()
    with fake.state.lock:  # the base commit the saved worktree needs is gone
        git(fake, "update-ref", "refs/heads/main",
            git(fake, "commit-tree", "-m", "rewritten", EMPTY_TREE).strip())
        git(fake, "reflog", "expire", "--expire=now", "--all")
        git(fake, "gc", "--quiet", "--prune=now")

    stopped = actions.job("issue_comment", answer_on_ticket("/delivery answer approve yes"),
                          inputs)
    assert stopped.code == 1 and stopped.outputs["status"] == "failed", stopped.stdout
    assert "worktrees could not be re-created" in stopped.stdout
    assert "Traceback" not in stopped.stdout + stopped.stderr
    head = git(fake, "rev-parse", f"refs/delivery/runs/{run_id}").strip()
    assert git(fake, "log", "--format=%s", "-1", head).startswith("not resumed:")
    assert git(fake, "rev-parse", f"{head}~2").strip() == before  # claimed, given back
    status = git(fake, "show", f"{head}:status.json")
    assert '"paused"' in status and "claim.json" not in git(fake, "ls-tree", "--name-only",
                                                            head)
