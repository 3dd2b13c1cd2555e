"""The Action's `mode: join` after a round of worker jobs (SPEC §13 "Fan-out across
runners"; docs/github-action.md "A fan-out after a fan-out"): the chunks a next round must
run — those of the fan-out the run waits at that miss a result and no live worker holds —
as `chunks`, read from the state ref alone."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from action_helpers import Actions
from state_helpers import state_at
from test_action_job import REPO
from test_action_workers import actions_for, fake, fanned_out, inputs_for, worker_job

from delivery.state.chunks import ChunkSession
from delivery.testing.github import FakeGitHub

__all__ = ["fake"]  # the fixture, used by name


def _join(actions: Actions, fake: FakeGitHub, run_id: str) -> tuple[int, str, list[int]]:
    job = actions.job("workflow_run", {}, inputs_for(fake, mode="join", **{"run-id": run_id}))
    assert "Traceback" not in job.stdout + job.stderr, job.stdout + job.stderr
    return job.code, job.stdout, json.loads(job.outputs.get("chunks") or "null")


@pytest.mark.parametrize("run_id", ["not a run", "20260101T000000Z-abcdef"])
def test_a_run_id_that_is_bad_or_unknown_is_refused_in_one_line(
        tmp_path: Path, fake: FakeGitHub, run_id: str) -> None:
    actions = actions_for(tmp_path, fake, delay=0.0)
    code, told, chunks = _join(actions, fake, run_id)
    assert code == 2, told
    assert len([line for line in told.splitlines()
                if run_id in line and "refused" in line]) == 1, told
    assert chunks == []


def test_a_chunk_no_worker_claimed_and_one_whose_worker_died_go_to_the_next_round(
        tmp_path: Path, fake: FakeGitHub) -> None:
    actions = actions_for(tmp_path, fake, delay=0.0)
    run_id = fanned_out(actions, fake)
    assert _join(actions, fake, run_id)[2] == [1, 2]  # no worker ran yet
    # chunk 1's worker claimed it two hours ago and died: its claim is stale
    dead = state_at(fake.repository(REPO).path, tmp_path / "dead", now=time.time() - 7200)
    ChunkSession(dead, run_id, "1-implement", 1, "actions:octo/app/1/1").fetch().claim(
        stale_after=3600.0)
    assert _join(actions, fake, run_id)[2] == [1, 2]
    # a live worker holds chunk 2: it is not handed out again
    live = state_at(fake.repository(REPO).path, tmp_path / "live")
    ChunkSession(live, run_id, "1-implement", 2, "actions:octo/app/2/1").fetch().claim(
        stale_after=3600.0)
    assert _join(actions, fake, run_id)[2] == [1]


def test_a_run_not_paused_for_a_fan_out_gives_no_chunks(
        tmp_path: Path, fake: FakeGitHub) -> None:
    actions = actions_for(tmp_path, fake, delay=0.0)
    run_id = fanned_out(actions, fake)
    assert worker_job(actions, fake, run_id, 1).outputs["status"] == "chunk_done"
    assert worker_job(actions, fake, run_id, 2).outputs["status"] == "succeeded"
    code, told, chunks = _join(actions, fake, run_id)
    assert (code, chunks) == (0, []), told
    assert "the run is succeeded" in told
