"""The stop label counts only when someone who steers the run set it (SPEC §14): the
GitHub forge's read of `delivery:stop` against the fake GitHub, where a stranger (triage:
may label, may not merge), an untrusted bot and a maintainer label the run's PRs."""

from __future__ import annotations

import pytest
from github_helpers import ManualClock

from delivery.forges.github import GitHubForge
from delivery.forges.stop_label import STOP_LABEL, StopTarget
from delivery.testing.github import FakeGitHub
from probes.github import RetryBudget

BRANCH = "delivery/T-40"
TARGETS = [StopTarget("web", "octo/web", head_branch=BRANCH),
           StopTarget("api", "octo/api", head_branch=BRANCH)]


@pytest.fixture
def forge(fake: FakeGitHub, clock: ManualClock) -> GitHubForge:
    for repository in ("octo/web", "octo/api"):
        fake.create_repo(repository, collaborators={"eve": "triage", "ada": "maintain"},
                         default_permission="read")
        fake.push_files(repository, BRANCH, {"app.py": "print(1)\n"})
        fake.open_pull(repository, BRANCH)
    return GitHubForge.from_environment(fake.env(), sleep=clock.sleep, clock=clock,
                                        budget=RetryBudget(attempts=4))


def test_a_label_set_by_someone_without_write_permission_is_reported_ignored(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    fake.add_label("octo/web", 1, STOP_LABEL, actor="eve")
    stop = forge.stop_label(TARGETS)
    assert stop is not None and (stop.by, stop.ignored) == ("eve", "no write permission")


def test_a_maintainers_label_stops_even_after_a_strangers(forge: GitHubForge,
                                                          fake: FakeGitHub) -> None:
    fake.add_label("octo/web", 1, STOP_LABEL, actor="eve")
    fake.add_label("octo/api", 1, STOP_LABEL, actor="ada")
    stop = forge.stop_label(TARGETS)
    assert stop is not None and (stop.where, stop.by, stop.ignored) == ("api #1", "ada", "")


def test_a_bots_label_counts_only_when_the_workflow_trusts_it(forge: GitHubForge,
                                                              fake: FakeGitHub) -> None:
    fake.add_label("octo/web", 1, STOP_LABEL, actor="guard[bot]")
    stop = forge.stop_label(TARGETS)
    assert stop is not None and stop.by == "guard[bot]"
    assert stop.ignored == "bot account, not in trusted_bots"
    forge.trust_bots({"guard[bot]"})
    trusted = forge.stop_label(TARGETS)
    assert trusted is not None and trusted.ignored == ""


def test_the_setters_permission_is_read_once(forge: GitHubForge, fake: FakeGitHub) -> None:
    fake.add_label("octo/web", 1, STOP_LABEL, actor="eve")
    forge.stop_label(TARGETS)
    fake.clear_requests()
    forge.stop_label(TARGETS)
    assert fake.count("POST", "/api/graphql") == 1  # the label's read, no look-up again
