"""Draft PRs (SPEC §7.1, `publish [draft=true]`): a publish opens each new PR as a draft and
remembers it; a later probe marks it ready for review once its checks pass, so reviewers are
not asked to look at a broken change.

The probe decides, not the publish: it is the stage that reads the checks (one request on
GitHub), and a workflow waits in a probe loop anyway. "Checks pass" is the probe's own
reading — passed or none configured — which never counts the run's own
`delivery/change-set` status (the probe reads it apart): that status waits for every PR of
the set to be ready, and a draft never is, so counting it would keep every draft forever.
Only the drafts this run opened are marked ready: one a person turned into a draft is
theirs to decide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv
from delivery.errors import DeliveryError, StageProblem
from delivery.forges.base import LifecycleForge, PullRequestRef
from probes.evidence import PrObservation, PullRequestSnapshot

# `internal.draft.<folder>`: the number of the PR the run opened as a draft, until the run
# marks it ready ("" then)
DRAFT_KEY = "internal.draft."
PASSING = ("SUCCESS", "NONE")

Event = tuple[str, dict[str, Any]]


def opened_drafts(published: Mapping[str, PullRequestRef], had_pr: Mapping[str, bool]
                  ) -> dict[str, Any]:
    """What a publish with `draft=true` remembers: the drafts it opened, and a draft it
    found where the run had no PR yet (it opened it before a kill, and lost the record)."""
    return {DRAFT_KEY + folder: ref.number for folder, ref in published.items()
            if ref.draft and (ref.created or not had_pr.get(folder))}


def ready_drafts(env: StageEnv, context: Context, answers: Mapping[str, PrObservation]
                 ) -> tuple[dict[str, PrObservation], list[Event], dict[str, Any]]:
    """The probe's answers with the run's drafts whose checks pass marked ready for review
    (and observed as such: the stage's facts say ready without another round); the events
    and the context updates that forget them."""
    forge = env.forge
    seen = dict(answers)
    events: list[Event] = []
    updates: dict[str, Any] = {}
    if not isinstance(forge, LifecycleForge):
        return seen, events, updates
    for folder, pr in answers.items():
        number = context.get(DRAFT_KEY + folder)
        if not number or not isinstance(pr, PullRequestSnapshot) or pr.number != number:
            continue
        if not pr.evidence.draft or pr.evidence.merged or pr.evidence.closed:
            updates[DRAFT_KEY + folder] = ""  # a person marked it ready, or it ended
            continue
        if pr.evidence.checks not in PASSING:
            continue  # still a draft: checks pending or failing
        try:
            forge.mark_ready_for_review(env.repos[folder], pr.number)
        except DeliveryError as error:
            raise StageProblem(f"folder '{folder}': PR #{pr.number} could not be marked "
                               f"ready for review: {error}") from None
        seen[folder] = dataclasses.replace(
            pr, evidence=dataclasses.replace(pr.evidence, draft=False))
        updates[DRAFT_KEY + folder] = ""
        events.append(("pr_ready_for_review", {"folder": folder, "number": pr.number}))
    return seen, events, updates
