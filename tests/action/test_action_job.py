"""The Action end to end: its step run as Actions runs it (variables, event payload files,
GITHUB_OUTPUT, GITHUB_STEP_SUMMARY) against the fake GitHub, one job per event, each on a
fresh machine: a labeled issue starts a run that pauses at its first wait with its state on
the ref; a check_suite event resumes it to the merge."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from action_helpers import Actions
from github_helpers import CI
from state_helpers import saved_log

from delivery.testing.github import FakeGitHub

REPO = "octo/app"

FLOW = """
digraph D {
  graph [goal="Deliver", inputs="ticket,notes?", defaults="notes=''", folders="app"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="printf 'hello\\n' > app/hello.txt"]
  ship [type=publish]
  observe [type=probe, probe="pr"]
  route [type=conditional]
  pause [type=wait, interval="60s"]
  land [type=merge]
  clean [type=worktree_remove]
  give_up [shape=parallelogram, script="exit 1"]
  start -> add -> change -> ship -> observe -> route
  route -> land  [condition="pr.state=WAITING && pr.ready=true", weight=2]
  route -> pause [condition="pr.state=WAITING"]
  route -> clean [condition="pr.state=MERGED"]
  route -> give_up [condition="pr.state!=WAITING && pr.state!=MERGED"]
  pause -> observe
  land -> observe
  clean -> exit
  give_up -> exit
}
"""


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.create_repo(REPO, files={"app.py": "print('v1')\n"},
                           check_rules=(CI,), require_checks=True,
                           collaborators={"alice": "write", "mallory": "read"})
        yield server


@pytest.fixture
def actions(tmp_path: Path, fake: FakeGitHub) -> Actions:
    env = fake.env()
    env.pop("GITHUB_TOKEN")
    runner = Actions(tmp_path, env, REPO)
    (runner.workspace / "flow.dot").write_text(FLOW, encoding="utf-8")
    return runner


def inputs(fake: FakeGitHub) -> dict[str, str]:
    return {"workflow": "flow.dot", "repos": f"app={REPO}", "github-token": fake.token}


def labeled(sender: str = "alice", body: str = "Please add hello.") -> dict[str, Any]:
    return {"action": "labeled", "label": {"name": "delivery"},
            "issue": {"number": 7, "title": "Add hello",
                      "html_url": f"https://github.com/{REPO}/issues/7", "body": body},
            "sender": {"login": sender, "type": "User"},
            "repository": {"full_name": REPO}}


def check_suite(number: int) -> dict[str, Any]:
    return {"action": "completed",
            "check_suite": {"conclusion": "success", "pull_requests": [
                {"number": number, "base": {"repo": {"full_name": REPO}}}]},
            "sender": {"login": "github-actions[bot]", "type": "Bot"},
            "repository": {"full_name": REPO}}


def refs(fake: FakeGitHub) -> list[str]:
    out = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/delivery"],
                         cwd=fake.repository(REPO).path, capture_output=True, text=True,
                         check=True).stdout
    return out.split()


def test_a_labeled_issue_pauses_at_the_wait_the_schedule_and_a_check_suite_resume_it(
        actions: Actions, fake: FakeGitHub) -> None:
    fake.hold_checks(REPO)  # CI still running: the PR waits
    started = actions.job("issues", labeled(), inputs(fake))
    assert started.code == 0, started.stderr + started.stdout
    assert started.outputs["exit-code"] == "3"  # delivery said: paused
    assert started.outputs["status"] == "paused"
    run_id = started.outputs["run-id"]
    assert refs(fake) == [f"refs/delivery/runs/{run_id}"]
    assert f"::add-mask::{fake.token}" in started.stdout
    assert fake.token not in started.stdout.replace(f"::add-mask::{fake.token}", "")
    [pr] = fake.repository(REPO).pulls.values()
    assert f"run={run_id}" in pr.body and pr.state == "open"

    nightly = actions.job("schedule", {"schedule": "17 * * * *"}, inputs(fake))
    assert nightly.code == 0, nightly.stdout + nightly.stderr
    assert nightly.outputs["run-id"] == run_id
    assert nightly.outputs["status"] == "paused"  # CI still running: observed, paused again

    fake.hold_checks(REPO, False)  # CI finished
    resumed = actions.job("check_suite", check_suite(pr.number), inputs(fake))
    assert resumed.code == 0, resumed.stderr + resumed.stdout
    assert resumed.outputs["status"] == "succeeded"
    assert resumed.outputs["pr-state"] == "MERGED"
    assert resumed.outputs["run-id"] == run_id
    assert fake.pull(REPO, pr.number).merged
    summary = resumed.summary
    assert "```mermaid" in summary and "flowchart TD" in summary
    assert "`land` → `observe` → `route` → `clean` → `exit`" in summary
    assert f"| app | {REPO} | [#{pr.number}]({pr_url(fake, pr.number)}) | MERGED |" in summary
    log = subprocess.run(["git", "log", "--format=%s", f"refs/delivery/runs/{run_id}"],
                         cwd=fake.repository(REPO).path, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert log[0].startswith("succeeded") and log[-1].startswith(f"run {run_id} started")
    assert sum(line.startswith("claimed by actions:") for line in log) == 2  # two resumes
    leaked = [path for path in actions.root.rglob("*") if path.is_file()
              and fake.token.encode() in path.read_bytes()]
    assert leaked == []  # no run file, git config, state commit or output holds the token


def pr_url(fake: FakeGitHub, number: int) -> str:
    return f"{fake.server_url}/{REPO}/pull/{number}"


def test_a_user_without_write_permission_cannot_start_a_run(actions: Actions,
                                                             fake: FakeGitHub) -> None:
    job = actions.job("issues", labeled(sender="mallory"), inputs(fake))
    assert job.code == 0 and job.outputs["status"] == "ignored"
    assert "no write permission" in job.stdout
    assert refs(fake) == [] and not fake.repository(REPO).pulls


def test_a_triage_user_who_may_label_the_issue_cannot_start_a_run(
        actions: Actions, fake: FakeGitHub) -> None:
    fake.set_permission(REPO, "tom", "triage")  # GitHub lets triage add labels
    job = actions.job("issues", labeled(sender="tom"), inputs(fake))
    assert job.code == 0 and job.outputs["status"] == "ignored"
    assert "tom has no write permission" in job.stdout
    assert refs(fake) == [] and not fake.repository(REPO).pulls


def test_the_bot_ignores_comments_it_wrote_itself(actions: Actions, fake: FakeGitHub) -> None:
    payload = {"action": "created", "issue": {"number": 3, "pull_request": {}},
               "comment": {"body": "/delivery answer closed stop",
                           "user": {"login": "delivery[bot]", "type": "Bot"}},
               "sender": {"login": "delivery[bot]", "type": "Bot"}}
    job = actions.job("issue_comment", payload, inputs(fake))
    assert job.outputs["status"] == "ignored"
    assert "own comments" in job.stdout


def test_validation_errors_become_annotations_on_the_workflow_lines(
        actions: Actions, fake: FakeGitHub) -> None:
    (actions.workspace / "broken.dot").write_text(
        "digraph D {\n  start [shape=Mdiamond]\n  start -> nowhere\n}\n", encoding="utf-8")
    job = actions.job("issues", labeled(), {**inputs(fake), "workflow": "broken.dot"})
    assert job.code == 1 and job.outputs["status"] == "invalid"
    assert "::error file=" in job.stdout and ",line=" in job.stdout
    assert refs(fake) == []


GATED = """
digraph G {
  graph [goal="Deliver", inputs="ticket,notes?", defaults="notes=''", folders="app"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="printf 'hello\\n' > app/hello.txt"]
  ship [type=publish]
  approve [type=human, label="Merge it?"]
  land [type=merge]
  start -> add -> change -> ship -> approve
  approve -> land [label="[Y] yes"]
  approve -> exit [label="[N] no"]
  land -> exit
}
"""


def answer(number: int, login: str, text: str) -> dict[str, Any]:
    return {"action": "created", "issue": {"number": number, "pull_request": {}},
            "comment": {"body": text, "user": {"login": login, "type": "User"}},
            "sender": {"login": login, "type": "User"}, "repository": {"full_name": REPO}}


def test_a_paused_gate_is_answered_by_a_comment_from_a_user_with_write_permission(
        actions: Actions, fake: FakeGitHub) -> None:
    (actions.workspace / "gated.dot").write_text(GATED, encoding="utf-8")
    given = {**inputs(fake), "workflow": "gated.dot"}
    started = actions.job("issues", labeled(), given)
    assert started.outputs["status"] == "paused", started.stdout + started.stderr
    run_id = started.outputs["run-id"]
    [pr] = fake.repository(REPO).pulls.values()

    ignored = actions.job("issue_comment",
                          answer(pr.number, "mallory", "/delivery answer approve yes"), given)
    assert ignored.outputs["status"] == "ignored" and not pr.merged

    answered = actions.job("issue_comment",
                           answer(pr.number, "alice", "Go.\n/delivery answer approve yes"),
                           given)
    assert answered.outputs["status"] == "succeeded", answered.stdout + answered.stderr
    assert answered.outputs["run-id"] == run_id
    assert fake.pull(REPO, pr.number).merged
    ref = f"refs/delivery/runs/{run_id}"
    saved = saved_log(fake.repository(REPO).path, ref) + subprocess.run(
        ["git", "show", f"{ref}:checkpoint.json"], cwd=fake.repository(REPO).path,
        capture_output=True, text=True, check=True).stdout
    assert '"answer_received"' in saved and "github:alice" in saved



def test_resume_for_a_pr_without_a_delivery_marker_is_refused(
        tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from delivery.cli.main import main

    fake.push_files(REPO, "feature", {"app.py": "v2\n"})
    number = fake.open_pull(REPO, "feature", body="a person's PR")
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code = main(["resume", "--state", f"git:{REPO}", "--for-pr", f"{REPO}#{number}",
                 "--workspace", str(tmp_path)])
    assert code == 2
    assert "carries no delivery marker" in capsys.readouterr().err


def test_a_workflow_input_that_does_not_exist_is_refused_without_a_traceback(
        actions: Actions, fake: FakeGitHub) -> None:
    job = actions.job("issues", labeled(), {**inputs(fake), "workflow": "missing.dot"})
    assert job.code == 2 and job.outputs["status"] == "refused"
    assert "missing.dot" in job.stdout and "Traceback" not in job.stdout + job.stderr
    assert refs(fake) == []


def test_a_budget_input_that_is_not_tokens_or_dollars_is_refused_before_any_event_is_read(
        actions: Actions, fake: FakeGitHub) -> None:
    job = actions.job("issues", labeled(sender="mallory"), {**inputs(fake), "budget": "lots"})
    assert job.code == 2 and job.outputs["status"] == "refused"
    assert "budget 'lots'" in job.stdout and "$5" in job.stdout
    assert "Traceback" not in job.stdout + job.stderr
    assert refs(fake) == []


def test_the_budget_input_bounds_the_run_and_a_higher_one_in_a_later_job_raises_it(
        actions: Actions, fake: FakeGitHub) -> None:
    fake.hold_checks(REPO)  # CI still running: the run pauses at its wait
    started = actions.job("issues", labeled(), {**inputs(fake), "budget": "100k"})
    assert started.outputs["status"] == "paused", started.stdout + started.stderr
    run_id = started.outputs["run-id"]
    ref = f"refs/delivery/runs/{run_id}"
    saved = fake.repository(REPO).path
    info = json.loads(subprocess.run(["git", "show", f"{ref}:run.json"], cwd=saved,
                                     capture_output=True, text=True, check=True).stdout)
    assert info["budget_tokens"] == 100_000
    # every job of the run gets the same input: nothing raised, nothing recorded
    same = actions.job("schedule", {"schedule": "17 * * * *"}, {**inputs(fake), "budget": "100k"})
    assert same.outputs["status"] == "paused"
    assert '"budget_raised"' not in saved_log(saved, ref)
    raised = actions.job("schedule", {"schedule": "17 * * * *"},
                         {**inputs(fake), "budget": "200k"})
    assert raised.outputs["status"] == "paused"
    [event] = [json.loads(line) for line in saved_log(saved, ref).splitlines()
               if '"budget_raised"' in line]
    assert event["limits"] == "200,000 tokens"


def test_a_max_parallel_input_below_one_is_refused_before_any_event_is_read(
        actions: Actions, fake: FakeGitHub) -> None:
    job = actions.job("issues", labeled(sender="mallory"),
                      {**inputs(fake), "max-parallel": "0"})
    assert job.code == 2 and job.outputs["status"] == "refused"
    assert "max-parallel: '0' is not a whole number of 1 or more" in job.stdout
    assert "Traceback" not in job.stdout + job.stderr
    assert refs(fake) == []


def test_the_max_parallel_input_is_the_runs_and_kept_for_its_later_jobs(
        actions: Actions, fake: FakeGitHub) -> None:
    fake.hold_checks(REPO)  # CI still running: the run pauses at its wait
    started = actions.job("issues", labeled(), {**inputs(fake), "max-parallel": "3"})
    assert started.outputs["status"] == "paused", started.stdout + started.stderr
    ref = f"refs/delivery/runs/{started.outputs['run-id']}"
    info = json.loads(subprocess.run(["git", "show", f"{ref}:run.json"],
                                     cwd=fake.repository(REPO).path, capture_output=True,
                                     text=True, check=True).stdout)
    assert info["max_parallel"] == 3


def test_a_scripts_escape_sequences_reach_the_runners_log_as_text(
        actions: Actions, fake: FakeGitHub) -> None:
    (actions.workspace / "hostile.dot").write_text("""
digraph D {
  graph [goal="Deliver", inputs="ticket,notes?", defaults="notes=''"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  check [shape=parallelogram, script="printf '\\\\033]0;owned\\\\007 \\\\033[2J broke' >&2; exit 1"]
  start -> check -> exit
}
""", encoding="utf-8")
    job = actions.job("issues", labeled(), {**inputs(fake), "workflow": "hostile.dot"})
    assert job.outputs["status"] == "failed", job.stdout + job.stderr
    assert "\\u001b]0;owned\\u0007" in job.stdout
    assert "\x1b" not in job.stdout + job.stderr and "\x07" not in job.stdout + job.stderr
