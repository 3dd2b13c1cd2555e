"""Flat facts from PR observations (SPEC §7): per folder under the folder's name, and
roll-ups across folders. Every forge and `delivery test`'s scenario probes go through here,
so the classification and roll-up are computed in one place."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from probes.evidence import ProbeFailure, PrObservation, PullRequestSnapshot
from probes.pr_state import PrState, roll_up

FactValue = str | int | bool


@dataclass(frozen=True)
class PrFacts:
    facts: dict[str, FactValue]
    failures: tuple[ProbeFailure, ...] = field(default=())


def neutral_pr_facts(folder: str) -> dict[str, FactValue]:
    """The facts of a folder with no PR."""
    return {
        f"{folder}.pr.state": PrState.NONE.value,
        f"{folder}.pr.ready": False,
        f"{folder}.pr.number": "",
        f"{folder}.pr.url": "",
        f"{folder}.pr.raw": "{}",
        f"{folder}.threads.unresolved": 0,
        f"{folder}.threads.ids": "[]",
    }


def snapshot_facts(folder: str, pr: PullRequestSnapshot) -> dict[str, FactValue]:
    return {
        f"{folder}.pr.state": pr.state.value,
        f"{folder}.pr.ready": pr.ready,
        f"{folder}.pr.number": pr.number,
        f"{folder}.pr.url": pr.url,
        f"{folder}.pr.raw": json.dumps(pr.raw(), sort_keys=True, ensure_ascii=False),
        f"{folder}.threads.unresolved": pr.unresolved_threads,
        f"{folder}.threads.ids": json.dumps(list(pr.thread_ids)),
    }


def roll_up_facts(per_folder: Mapping[str, Any],
                  folders: list[str]) -> dict[str, FactValue]:
    """Roll-ups from per-folder facts (`<f>.pr.state`, `<f>.pr.ready`,
    `<f>.threads.unresolved`); folders without a PR are left out of `pr.ready`, and so
    are merged PRs: the merge stage counts them as done, and counting them as not ready
    would keep the rest of a partly merged delivery from ever being merged."""
    states: list[PrState] = []
    ready: list[bool] = []
    threads = 0
    for folder in folders:
        state = PrState(str(per_folder.get(f"{folder}.pr.state", PrState.NONE.value)))
        states.append(state)
        if state not in (PrState.NONE, PrState.MERGED):
            ready.append(per_folder.get(f"{folder}.pr.ready") in (True, "true"))
        threads += int(per_folder.get(f"{folder}.threads.unresolved", 0) or 0)
    return {
        "pr.state": roll_up(states).value,
        "pr.ready": bool(ready) and all(ready),
        "threads.unresolved": threads,
    }


def pr_facts(observations: Mapping[str, PrObservation], folders: list[str]) -> PrFacts:
    """Per-folder facts and roll-ups. A folder that could not be read keeps no per-folder
    facts and is reported in `failures`; it counts as unobserved in the roll-ups."""
    facts: dict[str, FactValue] = {}
    failures: list[ProbeFailure] = []
    observed: list[str] = []
    for folder in folders:
        seen = observations.get(folder)
        if isinstance(seen, ProbeFailure):
            failures.append(seen)
            continue
        observed.append(folder)
        facts.update(neutral_pr_facts(folder) if seen is None else snapshot_facts(folder, seen))
    facts.update(roll_up_facts(facts, observed))
    return PrFacts(facts=facts, failures=tuple(failures))
