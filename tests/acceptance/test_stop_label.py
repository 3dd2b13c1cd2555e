"""Acceptance (issue 21, item 5) on the fake GitHub: the label `delivery:stop`, set by a
person mid-run on a PR of the run or on the ticket, pauses the run at the next stage
boundary, naming who set it (GitHub's LabeledEvent actor); removed, the run resumes. The
one query the switch sends is valid against GitHub's schema, and a probe round stays one
GraphQL request."""

from __future__ import annotations

import os
from pathlib import Path

from budget_helpers import events
from change_set_helpers import BRANCH, REPOS, change_script, shipping_flow
from engine_helpers import FakeClock, reply, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.forges.github import GitHubForge
from delivery.forges.stop_label import STOP_LABEL, StopTarget, stop_query, ticket_issue
from delivery.testing.github import FakeGitHub, faults
from delivery.testing.github.graphql_api import validate_query
from delivery.testing.person import PERSON, GitHubPeople, LabelsAfter

FLOW = shipping_flow(change_script(), then='after [shape=box, prompt="say what was published"]')


def world(github: FakeGitHub, root: Path) -> World:
    return World(agent=ReplayBackend({"after": [reply({})]}), clock=FakeClock(),
                 git_cache=root / "cache",
                 environ={**os.environ, **github.env()})


def start(github: FakeGitHub, root: Path, ticket: str, person: LabelsAfter) -> RunOutcome:
    for repository in REPOS.values():
        github.create_repo(repository, files={"app.py": "print(0)\n"})
    workspace = root / "ws"
    workspace.mkdir()
    request = RunRequest(workflow=write_flow(root, FLOW), workspace=workspace,
                         inputs={"ticket": ticket}, repos=dict(REPOS), branch=BRANCH)
    return start_run(request, world(github, root), observer=person)


def test_the_stop_query_is_valid_against_githubs_schema() -> None:
    text, _ = stop_query([StopTarget("api", "octo/api", head_branch=BRANCH),
                          StopTarget("ticket", "octo/web", issue=7)])
    assert validate_query(text) == []


def test_a_ticket_is_read_as_a_github_issue_from_its_url_or_short_form() -> None:
    assert ticket_issue("https://github.com/octo/web/issues/7") == ("octo/web", 7)
    assert ticket_issue("octo/web#12") == ("octo/web", 12)
    assert ticket_issue("https://tracker.example/browse/T-1") is None
    # an issue on another server than the forge's is not read there
    assert ticket_issue("https://github.com/octo/web/issues/7", "https://ghe.example") is None


def test_a_stop_label_set_on_a_pr_mid_run_pauses_at_the_next_boundary_naming_who(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        person = LabelsAfter(GitHubPeople(github), "octo/web", "ship", STOP_LABEL,
                             branch=BRANCH)
        outcome = start(github, tmp_path, "https://tracker.example/T-1", person)
        assert outcome.status == "paused" and outcome.pause_reason == "stop_label"
        # `look` is a probe (no read before it); the agent stage `after` is the next
        # boundary the switch holds
        assert outcome.path == ["start", "add", "change", "ship", "look"]
        assert f"set on web #1 by {PERSON}" in outcome.failure_reason
        [paused] = events(outcome.run_dir, "run_paused")
        assert paused["reason"] == "stop_label" and paused["by"] == PERSON
        assert paused["next_node"] == "after"


def test_removing_the_stop_label_and_resuming_continues_the_run(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        people = GitHubPeople(github)
        person = LabelsAfter(people, "octo/api", "ship", STOP_LABEL, branch=BRANCH)
        paused = start(github, tmp_path, "https://tracker.example/T-1", person)
        assert paused.status == "paused"
        again = resume_run(paused.run_dir, world(github, tmp_path))
        assert again.status == "paused" and again.pause_reason == "stop_label"  # still set
        people.unlabel("octo/api", 1, STOP_LABEL)
        outcome = resume_run(paused.run_dir, world(github, tmp_path))
        assert outcome.status == "succeeded", outcome.failure_reason
        assert outcome.path[-2:] == ["after", "exit"]


def test_a_stop_label_on_the_ticket_issue_pauses_the_run(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        github.create_repo("octo/tickets")
        number = github.create_issue("octo/tickets", "Say hello")
        person = LabelsAfter(GitHubPeople(github), "octo/tickets", "change", STOP_LABEL,
                             number=number)
        ticket = f"{github.server_url}/octo/tickets/issues/{number}"
        outcome = start(github, tmp_path, ticket, person)
        assert outcome.status == "paused" and outcome.path == ["start", "add", "change"]
        assert f"ticket octo/tickets#{number} by {PERSON}" in outcome.failure_reason


def test_a_probe_round_stays_one_graphql_request_with_the_stop_switch_on(
        tmp_path: Path) -> None:
    probes = """
    digraph P {
      graph [goal="Watch", inputs="ticket", folders="api,web"]
      start [shape=Mdiamond]
      exit [shape=Msquare]
      look [type=probe, probe="pr,threads"]
      again [type=probe, probe="pr,threads"]
      start -> look -> again -> exit
    }
    """
    with FakeGitHub() as github:
        for repository in REPOS.values():
            github.create_repo(repository, files={"app.py": "print(0)\n"})
            github.push_files(repository, BRANCH, {"app.py": "print(1)\n"})
            github.open_pull(repository, BRANCH)
        github.clear_requests()
        request = RunRequest(workflow=write_flow(tmp_path, probes), workspace=tmp_path,
                             inputs={"ticket": "octo/web#9"}, repos=dict(REPOS),
                             branch=BRANCH)
        assert start_run(request, world(github, tmp_path)).status == "succeeded"
        # one per probe and once who the token is (the sticky comment's author check):
        # no read of the stop label in a probe round
        assert github.count("POST", "/api/graphql") == 3


SOMETHING_WENT_WRONG = [{"message": "Something went wrong while executing your query. This "
                         "may be the result of a timeout, or it could be a GitHub bug."}]


def test_githubs_transient_graphql_error_is_retried_by_the_forges_reads() -> None:
    with FakeGitHub() as github:
        github.create_repo("octo/web")
        number = github.create_issue("octo/web", "Say hello")
        github.add_label("octo/web", number, STOP_LABEL, actor=PERSON)
        clock = FakeClock()
        forge = GitHubForge.from_environment(github.env(), sleep=clock.sleep,
                                             clock=clock.monotonic)
        github.inject(faults.graphql_errors(SOMETHING_WENT_WRONG, times=2))
        stop = forge.stop_label([StopTarget("ticket", "octo/web", issue=number)])
        assert stop is not None and stop.by == PERSON
        github.inject(faults.graphql_errors(SOMETHING_WENT_WRONG))
        assert forge.viewer_login("octo/web") == github.login
