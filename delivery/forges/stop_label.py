"""The stop switch's read (SPEC §7.1): is the label `delivery:stop` on an open PR of the
run, or on the ticket, and who set it?

One GraphQL query covers the whole set: per folder an alias over the open PR of the run's
branch, and the ticket issue when the ticket is a GitHub issue. Who set the label comes
from the timeline's latest `LabeledEvent` for it (GitHub's record, not text anyone can
write), so the person named is the one GitHub says labelled it. Values travel as
variables; the text is validated against GitHub's schema in the tests.

Only people who may merge steer a run (SPEC §14): a label set by someone without write
permission, by a bot the workflow does not trust, or by no one GitHub can name does not
stop it — it is reported as ignored (`Stop.ignored`), once, and the run goes on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from probes.evidence import PrObservation, PrQuery, PullRequestSnapshot
from probes.github_query import split_repository
from probes.labels import (
    EVENTS_PAGE,
    LABELS_PAGE,
    StopMark,
    TicketLabels,
    stop_setter,
)
from probes.labels import STOP_LABEL as STOP_LABEL

# the probe's read of the labels (SPEC §7.1), for the stop switch at the next boundary:
# {} when no label stops the run, else a `Stop`'s fields; written only by a probe that read
# every PR of the run and the ticket, and consumed by the switch
PROBED_KEY = "internal.stop_label.probed"
# open PRs of a head branch read: those carrying the label; anyone may open PRs from a
# fork's branch of the same name, which are passed over (only a triage user could label
# them, and it would take this many to hide the run's own)
HEAD_PRS_PAGE = 10

FRAGMENTS = f"""
fragment StopLabels on Labelable {{ labels(first: {LABELS_PAGE}) {{ nodes {{ name }} }} }}
fragment StopLabeled on LabeledEvent {{
  createdAt actor {{ __typename login }} label {{ name }}
}}
"""
_TIMELINE = (f"timelineItems(itemTypes: [LABELED_EVENT], last: {EVENTS_PAGE}) "
             "{ nodes { ...StopLabeled } }")


@dataclass(frozen=True)
class StopTarget:
    """Where a stop label may be: a folder's open PR (by the run's branch) or the ticket."""

    where: str  # the folder, or "ticket"
    repository: str
    head_branch: str = ""  # a PR: found by head branch
    issue: int = 0  # the ticket: an issue number


@dataclass(frozen=True)
class Stop:
    where: str  # `api #3`, `ticket octo/web#7`
    by: str  # the login GitHub records as having set the label ("" when not known)
    at: str  # when (ISO 8601, from the timeline)
    url: str
    # why the label does not stop the run ("" when it does): who set it may not steer
    ignored: str = ""


@runtime_checkable
class StopLabelForge(Protocol):
    """A forge with labels (GitHub); the local forge has none, so no stop switch."""

    def stop_label(self, targets: Sequence[StopTarget]) -> Stop | None: ...


@runtime_checkable
class LabelledProbe(Protocol):
    """A forge whose probe reads the labels too, and the ticket issue's (GitHub)."""

    server_url: str

    def observe(self, queries: Sequence[PrQuery], ticket: tuple[str, int] | None
                ) -> tuple[Mapping[str, PrObservation], TicketLabels | None]: ...


def probed_stop(answers: Mapping[str, PrObservation], ticket: tuple[str, int] | None,
                read: TicketLabels | None) -> dict[str, str] | None:
    """What the probe's read says to the stop switch (`PROBED_KEY`): the first stop label
    set by someone who steers (folders in order, then the ticket), else the first one
    ignored, as a `Stop`'s fields; {} when there is none; None when the read is not whole
    (a PR or the ticket unread): the switch then reads for itself where it must."""
    if ticket is not None and read is None:
        return None
    marks: list[tuple[str, str, StopMark]] = []
    for folder, seen in answers.items():
        if not isinstance(seen, PullRequestSnapshot) and seen is not None:
            return None
        if isinstance(seen, PullRequestSnapshot) and seen.stop is not None:
            marks.append((f"{folder} #{seen.number}", seen.url, seen.stop))
    if ticket is not None and read is not None and read.stop is not None:
        marks.append((f"ticket {ticket[0]}#{read.number}", read.url, read.stop))
    found = [Stop(where, mark.by, mark.at, url, mark.ignored)
             for where, url, mark in marks]
    chosen = next((s for s in found if not s.ignored), found[0] if found else None)
    return {} if chosen is None else {"where": chosen.where, "by": chosen.by,
                                      "at": chosen.at, "url": chosen.url,
                                      "ignored": chosen.ignored}


def ticket_issue(ticket: str, server_url: str = "") -> tuple[str, int] | None:
    """(`owner/name`, number) of a ticket that is a GitHub issue: `o/n#7`, or its URL
    (`https://github.com/o/n/issues/7`) on the forge's server (`server_url`; any server
    when empty) — an issue on another server is not the forge's to read; else None."""
    text = ticket.strip()
    short = re.fullmatch(r"([\w.-]+/[\w.-]+)#(\d+)", text)
    if short:
        return short.group(1), int(short.group(2))
    if "://" not in text:
        return None
    url = urlsplit(text)
    if server_url and url.netloc.lower() != urlsplit(server_url).netloc.lower():
        return None
    parts = [p for p in url.path.split("/") if p]
    if len(parts) >= 4 and parts[-2] == "issues" and parts[-1].isdigit():
        return f"{parts[-4]}/{parts[-3]}", int(parts[-1])
    return None


def stop_query(targets: Sequence[StopTarget]) -> tuple[str, dict[str, Any]]:
    """The text and variables of one read of every target (aliases `s0`, `s1`, …)."""
    decls: list[str] = []
    fields: list[str] = []
    variables: dict[str, Any] = {}
    for i, target in enumerate(targets):
        owner, name = split_repository(target.repository)
        decls += [f"$o{i}: String!", f"$n{i}: String!"]
        variables[f"o{i}"], variables[f"n{i}"] = owner, name
        if target.issue:
            decls.append(f"$i{i}: Int!")
            variables[f"i{i}"] = target.issue
            inner = f"issue(number: $i{i}) {{ number url ...StopLabels {_TIMELINE} }}"
        else:
            decls.append(f"$h{i}: String!")
            variables[f"h{i}"] = target.head_branch
            inner = (f"pullRequests(headRefName: $h{i}, states: [OPEN], labels: $stop, "
                     f"first: {HEAD_PRS_PAGE}) {{ nodes {{ number url isCrossRepository "
                     f"...StopLabels {_TIMELINE} }} }}")
            if "stop" not in variables:
                decls.append("$stop: [String!]")
                variables["stop"] = [STOP_LABEL]
        fields.append(f"  s{i}: repository(owner: $o{i}, name: $n{i}) {{ {inner} }}")
    text = f"query StopSwitch({', '.join(decls)}) {{\n" + "\n".join(fields) + "\n}\n" + FRAGMENTS
    return text, variables


def first_stop(targets: Sequence[StopTarget], data: Mapping[str, Any],
               steer: Callable[[str, str], str | None] | None = None) -> Stop | None:
    """The first target (in order) carrying the label set by someone who steers, from the
    query's `data`; `steer(repository, login)` says why a setter does not (None: they do;
    without it everyone does). When every label found was set by someone who does not
    steer, the first of them with `ignored` saying why; None when there is no label."""
    ignored: Stop | None = None
    for i, target in enumerate(targets):
        repo = data.get(f"s{i}") or {}
        if target.issue:
            node = repo.get("issue")
        else:  # the repository's own PR of the branch, never a fork's
            nodes = (repo.get("pullRequests") or {}).get("nodes") or []
            node = next((n for n in nodes if isinstance(n, Mapping)
                         and n.get("isCrossRepository") is False), None)
        if not isinstance(node, Mapping):
            continue
        names = [str((label or {}).get("name") or "")
                 for label in (node.get("labels") or {}).get("nodes") or []]
        if STOP_LABEL not in names:
            continue
        by, at = stop_setter(node)
        where = (f"ticket {target.repository}#{node.get('number')}" if target.issue
                 else f"{target.where} #{node.get('number')}")
        reason = steer(target.repository, by) if steer is not None else None
        stop = Stop(where, by, at, str(node.get("url") or ""), ignored=reason or "")
        if reason is None:
            return stop
        ignored = ignored or stop
    return ignored
