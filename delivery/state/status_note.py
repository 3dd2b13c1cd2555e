"""What `delivery runs --state` shows of a run beside its status (SPEC §12, §13): why a
paused run paused and until when (`paused: rate_limit until …`), and what it waits for
("web (checks: ci/test)"), kept in the small `status.json` each save writes beside the run
on its ref, so a listing reads no checkpoint or log.

`StatusNote` follows the context's changes a job saves (only the keys these need: the
pause's reason, the probes' `<f>.pr.*` facts) and says the fields at each save; `listed`
reads them back, or works them out from a checkpoint's context when a run was saved
without them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from delivery.errors import PAUSED_KEY, paused_why
from delivery.store.records import RunStatus
from probes.waiting import run_waiting_for, waiting_summary

_FACTS = (".pr.state", ".pr.ready", ".pr.raw")
# what `delivery runs` lists: a run's status, or why it has none
SummaryStatus = RunStatus | Literal["unknown", "unreadable", "interrupted"]


@dataclass
class RunSummary:
    """One line of `delivery runs` (`--json`: one object)."""

    run_id: str
    status: SummaryStatus
    next_node: str
    sha: str
    claimed_by: str = ""
    ticket: str = ""
    # why the status is what it is: a paused run's reason (SPEC §12), or why it is
    # `interrupted` (its process is gone)
    reason: str = ""
    until: str = ""  # when a run paused by GitHub's limits may go on (UTC)
    # what it waits for, from its last probe: "web (checks: ci/test), api (approval)"
    waiting: str = ""


def summary_status(value: Any) -> SummaryStatus:
    """A run's status read from the ref; `unknown` when it is not one."""
    return RunStatus(value) if value in RunStatus.__members__.values() else "unknown"


def _kept(key: str) -> bool:
    return key == PAUSED_KEY or (key.endswith(_FACTS) and not key.startswith("internal."))


class StatusNote:
    """The context keys `status.json`'s fields are made of, as the run saves them."""

    def __init__(self) -> None:
        self._context: dict[str, Any] = {}

    def seed(self, context: Mapping[str, Any]) -> None:
        """The whole context (a new run's first save, a resumed run's checkpoint)."""
        self._context = {key: value for key, value in context.items() if _kept(key)}

    def update(self, changed: Mapping[str, Any], deleted: Iterable[str]) -> None:
        """One save's changes."""
        for key in deleted:
            self._context.pop(key, None)
        self._context.update({key: value for key, value in changed.items() if _kept(key)})

    def fields(self, status: str, folders: Sequence[str]) -> dict[str, str]:
        """`reason`, `until` and `waiting` of a run with this status (folders in order)."""
        reason, until = paused_why(self._context) if status == "paused" else ("", "")
        waiting = waiting_summary(run_waiting_for(self._context, status, folders))
        return {"reason": reason, "until": until, "waiting": waiting}


def listed(saved: Mapping[str, Any]) -> dict[str, str]:
    """`reason`, `until` and `waiting` from a saved `status.json` (or a checkpoint read
    for its status, whose context is whole); anything else is left empty."""
    if "waiting" in saved:
        return {key: _text(saved.get(key)) for key in ("reason", "until", "waiting")}
    context = saved.get("context")
    if not isinstance(context, dict):
        return {"reason": "", "until": "", "waiting": ""}
    note = StatusNote()
    note.seed(context)
    return note.fields(str(saved.get("status") or ""), ())


def _text(value: Any, limit: int = 2000) -> str:
    """A label read from the ref: a short string, else nothing."""
    return value[:limit] if isinstance(value, str) else ""
