"""A claim of another Actions run: GitHub is asked whether that run has ended, through the
one GitHub client (against the fake GitHub over real HTTP)."""

from __future__ import annotations

import logging

import pytest

from delivery.state.claims import ActionsRuns
from delivery.testing.github import FakeGitHub, faults
from delivery.testing.github.state import ActionsRun

RUNS = "/api/v3/repos/octo/web/actions/runs"


@pytest.fixture
def runs(fake: FakeGitHub) -> ActionsRuns:
    fake.create_repo("octo/web")
    fake.repository("octo/web").actions_runs[7] = ActionsRun(7, status="completed",
                                                             conclusion="cancelled")
    fake.clear_requests()
    return ActionsRuns(fake.api_url, fake.token)


def test_a_run_github_reports_completed_has_ended(runs: ActionsRuns) -> None:
    assert runs.completed("octo/web", 7) is True


def test_a_server_error_is_asked_again_once(runs: ActionsRuns, fake: FakeGitHub) -> None:
    fake.inject(faults.server_error(502, method="GET", path=RUNS))
    assert runs.completed("octo/web", 7) is True
    assert fake.count("GET", f"{RUNS}/7") == 2


def test_a_token_without_actions_read_is_said_once_and_judged_by_age(
        runs: ActionsRuns, fake: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    fake.repository("octo/web").actions_readable = False
    with caplog.at_level(logging.WARNING, logger="delivery"):
        assert runs.completed("octo/web", 7) is None
        assert runs.completed("octo/web", 7) is None
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "the token needs actions: read" in said[0]
    assert fake.token not in said[0]
    assert fake.count("GET", f"{RUNS}/7") == 1


def test_without_a_token_github_is_not_asked(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web")
    fake.clear_requests()
    assert ActionsRuns(fake.api_url, "").completed("octo/web", 7) is None
    assert fake.count("GET") == 0
