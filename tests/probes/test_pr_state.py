from probes.pr_state import PrEvidence, PrState, classify, is_ready, roll_up


def evidence(**changes: object) -> PrEvidence:
    base: dict[str, object] = {"merged": False, "closed": False, "mergeable": "MERGEABLE",
                               "checks": "SUCCESS", "review": "APPROVED"}
    base.update(changes)
    return PrEvidence(**base)


def test_merged_wins_over_everything() -> None:
    assert classify(evidence(merged=True, closed=True, checks="FAILURE")) is PrState.MERGED


def test_conflicts_come_before_ci_failures() -> None:
    assert classify(evidence(mergeable="CONFLICTING", checks="FAILURE")) is PrState.CONFLICTS


def test_ci_failure_comes_before_requested_changes() -> None:
    assert classify(evidence(checks="FAILURE", review="CHANGES_REQUESTED")) is PrState.CI_FAILED


def test_pending_checks_and_unknown_mergeability_are_waiting() -> None:
    assert classify(evidence(checks="PENDING", mergeable="UNKNOWN")) is PrState.WAITING


def test_ready_pr_is_waiting_and_ready() -> None:
    pr = evidence()
    assert classify(pr) is PrState.WAITING
    assert is_ready(pr)


def test_review_required_is_not_ready() -> None:
    assert not is_ready(evidence(review="REVIEW_REQUIRED"))


def test_roll_up_takes_the_worst_state() -> None:
    assert roll_up([PrState.MERGED, PrState.WAITING, PrState.CI_FAILED]) is PrState.CI_FAILED
    assert roll_up([PrState.CONFLICTS, PrState.CLOSED]) is PrState.CLOSED


def test_roll_up_is_merged_only_when_every_pr_merged() -> None:
    assert roll_up([PrState.MERGED, PrState.MERGED]) is PrState.MERGED
    assert roll_up([PrState.MERGED, PrState.WAITING]) is PrState.WAITING


def test_roll_up_ignores_folders_without_a_pr() -> None:
    assert roll_up([PrState.NONE, PrState.MERGED]) is PrState.MERGED
    assert roll_up([PrState.NONE, PrState.NONE]) is PrState.NONE
    assert roll_up([]) is PrState.NONE


def test_a_draft_is_waiting_and_never_ready() -> None:
    pr = evidence(draft=True)
    assert classify(pr) is PrState.WAITING
    assert not is_ready(pr)
