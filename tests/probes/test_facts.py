"""Flat PR facts and roll-ups from observations, the same for every forge."""

import json
from dataclasses import replace

from probes.evidence import ProbeFailure, PullRequestSnapshot, ThreadNote
from probes.facts import pr_facts, roll_up_facts
from probes.pr_state import PrEvidence


def snapshot(number: int, **evidence: object) -> PullRequestSnapshot:
    base = {"merged": False, "closed": False, "mergeable": "MERGEABLE", "checks": "SUCCESS",
            "review": "APPROVED"}
    base.update(evidence)
    return PullRequestSnapshot(number=number, url=f"https://forge.test/pr/{number}",
                               head_ref="delivery/T-1", head_sha="abc", base_ref="main",
                               evidence=PrEvidence(**base))  # type: ignore[arg-type]


def test_folder_without_pr_has_neutral_facts_and_rollup_none() -> None:
    facts = pr_facts({"web": None}, ["web"]).facts
    assert facts["web.pr.state"] == "NONE"
    assert facts["web.pr.ready"] is False
    assert facts["web.pr.raw"] == "{}"
    assert facts["web.threads.ids"] == "[]"
    assert facts["pr.state"] == "NONE"
    assert facts["pr.ready"] is False


def test_rollup_is_worst_state_over_folders_with_a_pr() -> None:
    facts = pr_facts({"web": snapshot(1, checks="FAILURE"), "api": snapshot(2), "docs": None},
                     ["web", "api", "docs"]).facts
    assert facts["web.pr.state"] == "CI_FAILED"
    assert facts["api.pr.state"] == "WAITING"
    assert facts["pr.state"] == "CI_FAILED"
    assert facts["pr.ready"] is False


def test_ready_only_when_every_observed_pr_is_ready() -> None:
    facts = pr_facts({"web": snapshot(1), "api": snapshot(2), "docs": None},
                     ["web", "api", "docs"]).facts
    assert facts["pr.ready"] is True
    assert json.loads(str(facts["web.pr.raw"]))["number"] == 1


def test_a_merged_pr_does_not_keep_the_rest_from_being_ready() -> None:
    # a merge stage that stopped after the first PR: the second, once ready, can be merged
    facts = pr_facts({"web": snapshot(1, merged=True), "api": snapshot(2)},
                     ["web", "api"]).facts
    assert facts["web.pr.ready"] is False
    assert facts["pr.state"] == "WAITING"
    assert facts["pr.ready"] is True


def test_a_merged_pr_beside_an_unready_one_is_not_ready() -> None:
    facts = pr_facts({"web": snapshot(1, merged=True), "api": snapshot(2, checks="PENDING")},
                     ["web", "api"]).facts
    assert facts["pr.ready"] is False


def test_merged_only_when_every_pr_merged() -> None:
    one = pr_facts({"web": snapshot(1, merged=True), "api": snapshot(2)}, ["web", "api"])
    both = pr_facts({"web": snapshot(1, merged=True), "api": snapshot(2, merged=True)},
                    ["web", "api"])
    assert one.facts["pr.state"] == "WAITING"
    assert both.facts["pr.state"] == "MERGED"


def test_unreadable_folder_is_reported_not_counted() -> None:
    result = pr_facts({"web": ProbeFailure("web", "repository not found"), "api": snapshot(2)},
                      ["web", "api"])
    assert [f.folder for f in result.failures] == ["web"]
    assert "web.pr.state" not in result.facts
    assert result.facts["pr.state"] == "WAITING"


def test_threads_roll_up_as_a_sum() -> None:
    rolled = roll_up_facts({"a.pr.state": "WAITING", "a.threads.unresolved": 2,
                            "b.pr.state": "WAITING", "b.threads.unresolved": 3}, ["a", "b"])
    assert rolled["threads.unresolved"] == 5


def test_thread_ids_are_a_json_list_of_every_unresolved_thread_quoted_or_not() -> None:
    quoted = (ThreadNote("a.py", 1, "ada", "rename", id="T1"),)
    pr = replace(snapshot(1), unresolved_threads=2, threads=quoted, thread_ids=("T1", "T2"))
    facts = pr_facts({"web": pr}, ["web"]).facts
    assert json.loads(str(facts["web.threads.ids"])) == ["T1", "T2"]
    assert [t["id"] for t in json.loads(str(facts["web.pr.raw"]))["threads"]] == ["T1"]
