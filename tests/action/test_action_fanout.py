"""The Action's side of a stage fanned out across runners (SPEC §13 "Fan-out across
runners", "Setting it up"): the repositories read from `.github/delivery-repos` when the
`repos` input is empty, the `max-runners` input checked before any event is read, the
`chunks` output the worker matrix reads, mode `work`'s own refusals, and the job summary
of a fan-out."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from action_helpers import Actions
from github_helpers import CI
from test_action_job import FLOW, REPO, inputs, labeled, refs

from delivery.action.main import Result
from delivery.action.report import summary_markdown
from delivery.store.records import RunStatus
from delivery.testing.github import FakeGitHub


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.create_repo(REPO, files={"app.py": "print('v1')\n"},
                           check_rules=(CI,), require_checks=True,
                           collaborators={"alice": "write"})
        yield server


@pytest.fixture
def actions(tmp_path: Path, fake: FakeGitHub) -> Actions:
    env = fake.env()
    env.pop("GITHUB_TOKEN")
    runner = Actions(tmp_path, env, REPO)
    (runner.workspace / "flow.dot").write_text(FLOW, encoding="utf-8")
    return runner


def run_info(fake: FakeGitHub, run_id: str) -> dict[str, object]:
    shown = subprocess.run(["git", "show", f"refs/delivery/runs/{run_id}:run.json"],
                           cwd=fake.repository(REPO).path, capture_output=True, text=True,
                           check=True).stdout
    info: dict[str, object] = json.loads(shown)
    return info


def test_without_a_repos_input_the_folders_come_from_the_delivery_repos_file(
        actions: Actions, fake: FakeGitHub) -> None:
    fake.hold_checks(REPO)  # CI still running: the run pauses at its wait
    listing = actions.workspace / ".github" / "delivery-repos"
    listing.parent.mkdir()
    listing.write_text(f"# the delivery's repositories\napp={REPO}\n", encoding="utf-8")
    given = {**inputs(fake), "repos": ""}
    job = actions.job("issues", labeled(), given)
    assert job.outputs["status"] == "paused", job.stdout + job.stderr
    assert run_info(fake, job.outputs["run-id"])["repos"] == {"app": REPO}


def test_a_repos_input_wins_over_the_delivery_repos_file(
        actions: Actions, fake: FakeGitHub) -> None:
    fake.hold_checks(REPO)
    listing = actions.workspace / ".github" / "delivery-repos"
    listing.parent.mkdir()
    listing.write_text("app=octo/elsewhere\n", encoding="utf-8")
    job = actions.job("issues", labeled(), inputs(fake))
    assert job.outputs["status"] == "paused", job.stdout + job.stderr
    assert run_info(fake, job.outputs["run-id"])["repos"] == {"app": REPO}


@pytest.mark.parametrize("value", ["0", "257", "many"])
def test_a_max_runners_input_outside_one_to_256_is_refused_before_any_event_is_read(
        actions: Actions, fake: FakeGitHub, value: str) -> None:
    job = actions.job("issues", labeled(), {**inputs(fake), "max-runners": value})
    assert job.code == 2 and job.outputs["status"] == "refused"
    assert f"max-runners {value!r}: is not a number from 1 to 256" in job.stdout
    assert "Traceback" not in job.stdout + job.stderr
    assert refs(fake) == []


def test_a_run_paused_for_a_wait_hands_the_matrix_no_chunks(
        actions: Actions, fake: FakeGitHub) -> None:
    fake.hold_checks(REPO)
    job = actions.job("issues", labeled(), inputs(fake))
    assert job.outputs["status"] == "paused", job.stdout + job.stderr
    assert json.loads(job.outputs["chunks"]) == []


@pytest.mark.parametrize(("given", "wanted"), [
    ({"run-id": "", "chunk": "1"}, "mode work: needs the run whose chunk to run"),
    ({"run-id": "r1", "chunk": ""}, "chunk '': is not a chunk number"),
])
def test_mode_work_without_a_run_or_a_chunk_is_refused_in_one_line(
        actions: Actions, fake: FakeGitHub, given: dict[str, str], wanted: str) -> None:
    job = actions.job("workflow_dispatch", {}, {**inputs(fake), "mode": "work", **given})
    assert job.code == 2 and job.outputs["status"] == "refused", job.stdout + job.stderr
    assert wanted in job.stdout
    assert "Traceback" not in job.stdout + job.stderr


def test_the_summary_of_a_fan_out_lists_the_chunks_handed_to_worker_jobs() -> None:
    text = summary_markdown([Result("r1", RunStatus.PAUSED, chunks=[1, 2, 3])])
    assert "**Fan-out:** 3 chunks for worker jobs (1, 2, 3)" in text


def test_the_summary_of_a_worker_counts_its_folders_done_running_and_failed() -> None:
    answer = {"chunk": "2", "status": "chunk_done",
              "folders": {"api": "succeeded", "web": "failed", "ui": "running",
                          "db": "succeeded"}}
    text = summary_markdown([Result("r1", "chunk_done", work=answer)])
    assert "**Chunk 2:** 2 folders done, 1 folder running, 1 folder failed" in text
