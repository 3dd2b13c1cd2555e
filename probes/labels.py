"""The stop label as the probe reads it (SPEC §7.1 "Budget and stop switch"): the probe's
one request also reads the labels of each open PR and of the ticket issue, and who set
`delivery:stop` (the timeline's latest `LabeledEvent` for it: GitHub's record, not text
anyone can write), so a run in a wait loop is stopped at the next boundary at no extra
request. Whether the setter steers the run (SPEC §14) is decided by the caller's `steer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from probes.steering import actor_login

STOP_LABEL = "delivery:stop"
LABELS_PAGE = 50
EVENTS_PAGE = 100  # labelings read back to find who set the stop label

# spread on a PullRequest or an Issue (`timelineItems` is on each, not on `Labelable`)
LABEL_SELECTION = (f"labels(first: {LABELS_PAGE}) {{ nodes {{ name }} }} "
                   f"labelEvents: timelineItems(itemTypes: [LABELED_EVENT], "
                   f"last: {EVENTS_PAGE}) {{ nodes {{ ... on LabeledEvent {{ createdAt "
                   "actor { __typename login } label { name } } } }")


@dataclass(frozen=True)
class StopMark:
    """The stop label on one PR or issue: who set it, when, and why it does not stop the
    run ("" when it does: the setter steers)."""

    by: str
    at: str
    ignored: str = ""


@dataclass(frozen=True)
class TicketLabels:
    """The ticket issue as the probe read it: its number, link and stop label."""

    number: int
    url: str
    stop: StopMark | None = None


def stop_mark(node: Mapping[str, Any], repository: str,
              steer: Callable[[str, str], str | None] | None) -> StopMark | None:
    """The stop label on `node` (a PR or issue read with `LABEL_SELECTION`), None when it
    has none."""
    names = [str((label or {}).get("name") or "")
             for label in (node.get("labels") or {}).get("nodes") or []]
    if STOP_LABEL not in names:
        return None
    by, at = stop_setter(node)
    reason = steer(repository, by) if steer is not None else None
    return StopMark(by, at, reason or "")


def stop_setter(node: Mapping[str, Any]) -> tuple[str, str]:
    """Who set the stop label on `node` last, and when ("" each when not known)."""
    events = (node.get("labelEvents") or node.get("timelineItems") or {}).get("nodes") or []
    for event in reversed(events):
        if isinstance(event, Mapping) and \
                (event.get("label") or {}).get("name") == STOP_LABEL:
            return actor_login(event.get("actor")), str(event.get("createdAt") or "")
    return "", ""
