"""Only the owner's events steer a run (SPEC §13): `--for-pr` resumes the run whose marker a
PR carries only when that PR is the run's own — in one of its folders' repositories, on the
run's branch. A marker copied into another repository's PR, or into a PR from another
branch, is ignored and logged; the state ref does not move."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from action_helpers import Actions

from delivery.testing.github import FakeGitHub

REPO, OTHER = "octo/app", "octo/other"

WAITING = """
digraph D {
  graph [goal="Deliver", inputs="ticket,notes?", defaults="notes=''", folders="app"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="printf 'hello\\\\n' > app/hello.txt"]
  ship [type=publish]
  pause [type=wait, interval="60s"]
  start -> add -> change -> ship -> pause -> pause
  pause -> exit [condition="outcome=failed"]
}
"""


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        for name in (REPO, OTHER):
            server.create_repo(name, files={"app.py": "print('v1')\n"},
                               collaborators={"alice": "write"})
        yield server


def runner(tmp_path: Path, fake: FakeGitHub, repository: str) -> Actions:
    env = fake.env()
    env.pop("GITHUB_TOKEN")
    actions = Actions(tmp_path / repository.replace("/", "-"), env, repository)
    (actions.workspace / "flow.dot").write_text(WAITING, encoding="utf-8")
    return actions


def inputs(fake: FakeGitHub) -> dict[str, str]:
    return {"workflow": "flow.dot", "repos": f"app={REPO}", "github-token": fake.token,
            "state-repo": REPO}


def comment_on(repository: str, number: int) -> dict[str, Any]:
    return {"action": "created", "issue": {"number": number, "pull_request": {}},
            "comment": {"body": "looks good", "user": {"login": "alice", "type": "User"}},
            "sender": {"login": "alice", "type": "User"},
            "repository": {"full_name": repository}}


def run_head(fake: FakeGitHub, run_id: str) -> str:
    return subprocess.run(["git", "rev-parse", f"refs/delivery/runs/{run_id}"],
                          cwd=fake.repository(REPO).path, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_copied_marker_in_another_repository_or_branch_moves_nothing_the_own_pr_does(
        tmp_path: Path, fake: FakeGitHub) -> None:
    control = runner(tmp_path, fake, REPO)
    labeled = {"action": "labeled", "label": {"name": "delivery"},
               "issue": {"number": 7, "title": "Add hello", "body": "",
                         "html_url": f"https://github.com/{REPO}/issues/7"},
               "sender": {"login": "alice", "type": "User"},
               "repository": {"full_name": REPO}}
    started = control.job("issues", labeled, inputs(fake))
    assert started.outputs["status"] == "paused", started.stdout + started.stderr
    run_id = started.outputs["run-id"]
    [own] = fake.repository(REPO).pulls.values()
    before = run_head(fake, run_id)

    fake.push_files(OTHER, own.head, {"app.py": "copied\n"})  # even the same branch name
    elsewhere = fake.open_pull(OTHER, own.head, body=own.body, author="mallory")
    fake.push_files(REPO, "feature", {"app.py": "v2\n"})
    other_branch = fake.open_pull(REPO, "feature", body=own.body, author="mallory")

    relay = runner(tmp_path, fake, OTHER)  # the event arrives in the PR's own repository
    for actions, repository, number in ((relay, OTHER, elsewhere),
                                        (control, REPO, other_branch)):
        job = actions.job("issue_comment", comment_on(repository, number), inputs(fake))
        assert job.code == 0 and job.outputs["status"] == "ignored", job.stdout + job.stderr
        assert f"delivery: ignored: pull request {repository}#{number}" in job.stdout
        assert run_head(fake, run_id) == before  # nothing claimed, nothing ran

    moved = control.job("issue_comment", comment_on(REPO, own.number), inputs(fake))
    assert moved.outputs["status"] == "paused", moved.stdout + moved.stderr
    assert moved.outputs["run-id"] == run_id and run_head(fake, run_id) != before


def test_a_forks_pr_of_the_runs_branch_carrying_its_marker_moves_nothing(
        tmp_path: Path, fake: FakeGitHub) -> None:
    control = runner(tmp_path, fake, REPO)
    labeled = {"action": "labeled", "label": {"name": "delivery"},
               "issue": {"number": 7, "title": "Add hello", "body": "",
                         "html_url": f"https://github.com/{REPO}/issues/7"},
               "sender": {"login": "alice", "type": "User"},
               "repository": {"full_name": REPO}}
    started = control.job("issues", labeled, inputs(fake))
    run_id = started.outputs["run-id"]
    [own] = fake.repository(REPO).pulls.values()
    before = run_head(fake, run_id)
    fork = fake.open_fork_pull(REPO, own.head, fork_owner="mallory", body=own.body,
                               files={"app.py": "mine\n"})
    job = control.job("issue_comment", comment_on(REPO, fork), inputs(fake))
    assert job.code == 0 and job.outputs["status"] == "ignored", job.stdout + job.stderr
    assert f"its head mallory/app:{own.head} is not that run's branch" in job.stdout
    assert run_head(fake, run_id) == before


def test_the_cli_ignores_a_for_pr_whose_pr_the_run_did_not_open(
        tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from delivery.cli.main import main

    fake.push_files(REPO, "feature", {"app.py": "v2\n"})
    body = "<!-- delivery:begin run=20260101T000000Z-abcdef -->\ncopied\n"
    number = fake.open_pull(REPO, "feature", body=body)
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code = main(["resume", "--state", f"git:{REPO}", "--for-pr", f"{REPO}#{number}",
                 "--workspace", str(tmp_path)])
    assert code == 0
    assert "ignored: pull request" in capsys.readouterr().out


@pytest.mark.parametrize("run_id", ["..", "a..b", "x.lock", "-x", "a/../../b"])
def test_a_malformed_marker_is_ignored_and_logged_not_a_red_job(
        tmp_path: Path, fake: FakeGitHub, run_id: str) -> None:
    fake.push_files(REPO, "feature", {"app.py": "v2\n"})
    body = f"<!-- delivery:begin run={run_id} -->\nPull requests of this delivery:\n"
    number = fake.open_pull(REPO, "feature", body=body, author="mallory")
    job = runner(tmp_path, fake, REPO).job("issue_comment", comment_on(REPO, number),
                                           inputs(fake))
    assert job.code == 0, job.stdout + job.stderr
    assert job.outputs["status"] == "ignored", job.stdout + job.stderr
    assert f"delivery: ignored: pull request {REPO}#{number}" in job.stdout
    assert "not a run id" in job.stdout
