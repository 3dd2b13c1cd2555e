"""What a run waits for (SPEC §7.1 `wait`, §12): per folder whose PR is WAITING and not
ready, from the probe's facts (`<f>.pr.raw`): the checks still pending by name, the
approval still missing, mergeability being computed, the unresolved threads.

One short line per folder, and a summary bounded whatever the number of folders (the
first few, then "and N more"), for the progress line, `inspect`, `runs`, the sticky
comment and the Action's job summary alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

CHECK_NAMES = 3  # pending checks named per folder, then "+N"
SUMMARY_FOLDERS = 5  # folders named in a summary, then "and N more"


class Facts(Protocol):
    """A run's context, or a mapping of its flat keys."""

    def get(self, key: str, /) -> Any: ...


def folder_waits(raw: Mapping[str, Any]) -> str:
    """What one WAITING PR waits for ("checks: ci/test; approval"), from its `pr.raw`."""
    parts: list[str] = []
    pending = [str(name) for name in raw.get("pending_checks") or [] if name]
    if pending:
        more = len(pending) - CHECK_NAMES
        parts.append("checks: " + ", ".join(pending[:CHECK_NAMES])
                     + (f" +{more}" if more > 0 else ""))
    elif raw.get("checks") == "PENDING":
        parts.append("checks")
    if raw.get("review") == "REVIEW_REQUIRED":
        needed = raw.get("approvals_required")
        parts.append(f"{needed} approval{'s' if needed != 1 else ''}"
                     if isinstance(needed, int) and needed > 0 else "approval")
    if raw.get("mergeable") == "UNKNOWN":
        parts.append("mergeability being computed")
    threads = raw.get("unresolved_threads")
    if isinstance(threads, int) and threads > 0:
        parts.append(f"{threads} unresolved thread{'s' if threads != 1 else ''}")
    if raw.get("draft"):
        parts.append("draft")
    return "; ".join(parts) or "to be ready"


def waiting_for(context: Facts, folders: Sequence[str]) -> dict[str, str]:
    """Folder → what its PR waits for, for the folders whose PR the last probe saw
    WAITING and not ready (in folder order); empty when nothing is awaited."""
    found: dict[str, str] = {}
    for folder in folders:
        if context.get(f"{folder}.pr.state") != "WAITING" \
                or context.get(f"{folder}.pr.ready") in (True, "true"):
            continue
        found[folder] = folder_waits(_raw(context.get(f"{folder}.pr.raw")))
    return found


def waiting_summary(waits: Mapping[str, str], limit: int = SUMMARY_FOLDERS) -> str:
    """"web (checks: ci/test), api (approval) and 3 more" ("" when nothing is awaited)."""
    named = [f"{folder} ({what})" for folder, what in list(waits.items())[:limit]]
    more = len(waits) - limit
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def context_folders(context: Mapping[str, Any]) -> list[str]:
    """The folders a probe wrote facts for (`<f>.pr.state`), in the context's order."""
    return [key[:-len(".pr.state")] for key in context
            if key.endswith(".pr.state") and key != "pr.state"
            and not key.startswith("internal.")]


def run_waiting_for(context: Mapping[str, Any], status: str,
                    folders: Sequence[str] = ()) -> dict[str, str]:
    """What a run that has not ended waits for (`waiting_for`), its `folders` in order
    (else those the context has facts for, sorted); {} once it has ended."""
    if status in ("succeeded", "failed", "cancelled"):
        return {}
    return waiting_for(context, list(folders) or sorted(context_folders(context)))


def _raw(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    try:
        parsed = json.loads(str(value or "{}"))
    except ValueError:
        return {}
    return parsed if isinstance(parsed, Mapping) else {}
