"""The change set's tables as text (SPEC §7.1): past 10 folders a PR's sticky comment
holds its own row and the dashboard's link; a dashboard past 60,000 characters is cut with
a link (GitHub refuses a comment or an issue body over 65,536)."""

from __future__ import annotations

from delivery.forges.change_set import TABLE_CHARS, dashboard_body, own_row_body
from probes.evidence import PullRequestSnapshot
from probes.pr_state import Checks, PrEvidence


def _pr(number: int, checks: Checks = "SUCCESS") -> PullRequestSnapshot:
    evidence = PrEvidence(merged=False, closed=False, mergeable="MERGEABLE",
                          checks=checks, review="APPROVED")
    return PullRequestSnapshot(number=number, url=f"https://github.test/o/r/pull/{number}",
                               head_ref="delivery/T-1", head_sha="abc", base_ref="main",
                               evidence=evidence)


def test_a_dashboard_past_60000_characters_is_cut_with_a_link_to_the_whole_table() -> None:
    order = [f"folder-with-a-rather-long-name-{i:04d}" for i in range(900)]
    observed = {folder: _pr(i + 1) for i, folder in enumerate(order)}
    body = dashboard_body("run-1", "delivery/T-1", observed, order,
                          whole="https://github.test/o/state/actions/runs/7")
    assert body is not None
    assert len(body) <= TABLE_CHARS
    assert order[0] in body and order[-1] not in body
    assert "https://github.test/o/state/actions/runs/7" in body.splitlines()[-1]


def test_a_prs_own_comment_changes_with_its_row_only() -> None:
    link = "https://github.test/o/r/issues/9"
    waiting = own_row_body("delivery/T-1", "api", _pr(1, "PENDING"), link)
    passed = own_row_body("delivery/T-1", "api", _pr(1, "SUCCESS"), link)
    assert waiting != passed
    assert link in waiting and "| api | [#1](" in waiting
