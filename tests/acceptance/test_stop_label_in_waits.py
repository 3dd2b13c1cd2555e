"""Acceptance (issue 37, item 4): the probe's one request reads the labels of the run's
PRs and of the ticket issue, so a `delivery:stop` label set by a person while a run loops
probe → route → wait is seen at the next boundary after the probe — within one wait
interval — naming who set it, with no request beyond the probe's one per 50 folders."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from budget_helpers import events
from change_set_helpers import BRANCH, REPOS
from engine_helpers import FakeClock, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.forges.stop_label import STOP_LABEL
from delivery.testing.github import FakeGitHub
from delivery.testing.github.graphql_api import validate_query
from delivery.testing.person import PERSON, GitHubPeople, LabelsAfter
from probes.evidence import PrQuery
from probes.github_query import probe_query

WAIT_LOOP = """
digraph W {
  graph [goal="Watch", inputs="ticket", folders="api,web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  look  [type=probe, probe="pr,threads"]
  route [shape=diamond]
  pause [type=wait, interval="60s", timeout="10m"]
  start -> look -> route
  route -> exit  [condition="pr.state=MERGED"]
  route -> pause
  pause -> look
  pause -> exit  [condition="outcome=failed"]
}
"""


def watch(github: FakeGitHub, root: Path, ticket: str, person: LabelsAfter
          ) -> tuple[RunOutcome, FakeClock]:
    for repository in REPOS.values():
        github.create_repo(repository, files={"app.py": "print(0)\n"})
        github.push_files(repository, BRANCH, {"app.py": "print(1)\n"})
        github.open_pull(repository, BRANCH)
    github.clear_requests()
    clock = FakeClock()
    request = RunRequest(workflow=write_flow(root, WAIT_LOOP), workspace=root,
                         inputs={"ticket": ticket}, repos=dict(REPOS), branch=BRANCH)
    world = World(agent=ReplayBackend({}), clock=clock, git_cache=root / "cache",
                  environ={**os.environ, **github.env()})
    return start_run(request, world, observer=person), clock


def graphql_operations(github: FakeGitHub) -> list[str]:
    """The operation name of every GraphQL request the fake received, in order."""
    names = []
    for request in github.requests:
        if request.method == "POST" and request.path == "/api/graphql":
            text = json.loads(request.body)["query"]
            found = re.search(r"(?:query|mutation)\s+(\w+)", text)
            names.append(found.group(1) if found else "anonymous")
    return names


def test_the_probe_query_with_labels_and_the_ticket_is_valid_against_githubs_schema() -> None:
    text, _ = probe_query([PrQuery("api", "octo/api", head_branch=BRANCH),
                           PrQuery("web", "octo/web", number=3)], ticket=("octo/web", 7))
    assert validate_query(text) == []


def test_a_stop_label_set_on_a_pr_during_a_wait_pauses_the_run_after_the_next_probe(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        person = LabelsAfter(GitHubPeople(github), "octo/web", "pause", STOP_LABEL,
                             branch=BRANCH)
        outcome, clock = watch(github, tmp_path, "https://tracker.example/T-1", person)
        assert outcome.status == "paused" and outcome.pause_reason == "stop_label"
        assert outcome.path == ["start", "look", "route", "pause", "look"]
        assert clock.sleeps == [60]  # within one interval
        assert f"set on web #1 by {PERSON}" in outcome.failure_reason
        [paused] = events(outcome.run_dir, "run_paused")
        assert paused["by"] == PERSON and paused["next_node"] == "route"
        # two probe rounds, one request each; once who set the label may steer (then
        # remembered) and who the token is: no read of the stop label of its own
        assert graphql_operations(github) == ["Probe", "anonymous", "Probe", "Stewards"]


def test_a_stop_label_on_the_ticket_issue_is_read_by_the_probe_too(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        github.create_repo("octo/tickets")
        number = github.create_issue("octo/tickets", "Say hello")
        person = LabelsAfter(GitHubPeople(github), "octo/tickets", "pause", STOP_LABEL,
                             number=number)
        ticket = f"{github.server_url}/octo/tickets/issues/{number}"
        outcome, clock = watch(github, tmp_path, ticket, person)
        assert outcome.status == "paused" and outcome.pause_reason == "stop_label"
        assert outcome.path[-2:] == ["pause", "look"] and clock.sleeps == [60]
        assert f"ticket octo/tickets#{number} by {PERSON}" in outcome.failure_reason
        assert graphql_operations(github) == ["Probe", "anonymous", "Probe", "Stewards"]
