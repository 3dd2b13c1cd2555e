"""What an agent stage is told about the run so far (fidelity, SPEC §5, Attractor §5.4).

The text is the one `templates/preamble.md.j2` gives; each mode shows visibly more than the
one before it:

* `truncate` — the goal and the run id;
* `summary:low` — + the completed stages with their outcomes;
* `summary:medium` — + the failure reason of the last stage and the context values;
* `compact` (the default) — nested bullets: stages and outcomes, each agent stage's first
  line of prose, files changed in the workspace, context values (shortened);
* `summary:high` — + each stage's response summary and the model and tokens it used;
* `full` — nothing: the stage continues its thread's session (after a resume, once,
  `summary:high` instead, because the session was lost).

Context values are the 40 written first most recently, without the engine's own keys
(`internal.*`, `graph.*`, `response.*`, …), so a preamble does not grow with the run;
a value offloaded to the artifact store is shown as a reference to its file, never inlined.

The template says what the text is; `_render` writes the same text with plain string joins,
because a preamble is built before every agent stage and the sandboxed template's loop over
fifty stages cost about a tenth of a stage's CPU (issue 23). tests/engine/
test_preamble_template.py renders both for arbitrary facts and compares them.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from delivery.engine.context import HIDDEN_KEYS, HIDDEN_PREFIXES, POINTER_PREFIX, ArtifactStore
from delivery.lang.model import NodeType, Workflow

RECENT_STAGES = 50
# context values a preamble shows at most: the newest ones
MAX_VALUES = 40
SCAN_FACTOR = 10  # keys looked at per value shown, at most
_SKIPPED = (NodeType.START, NodeType.CONDITIONAL, NodeType.EXIT)
LEVELS = {"truncate": 0, "summary:low": 1, "summary:medium": 2, "compact": 3,
          "summary:high": 4}
_VALUE_CHARS = {"summary:medium": 200, "compact": 120, "summary:high": 500}
_SUMMARY_CHARS = 500
_CONTRACT = re.compile(r"```json|\{\s*\"context_updates\"")


def listed_nodes(workflow: Workflow) -> frozenset[str]:
    """The nodes a preamble lists when they ran (not start, conditionals or exits)."""
    return frozenset(node_id for node_id, node in workflow.nodes.items()
                     if node.type not in _SKIPPED)


class RecentStages:
    """(node, outcome) of the last RECENT_STAGES completed stages of one run, each once,
    oldest first (`listed`: `listed_nodes(workflow)`), kept up to date as the run's path
    grows: each call reads only the path entries added since the last one. A walk back
    from the path's end, as this was first written, stops only at RECENT_STAGES
    distinct nodes, and a workflow has fewer listed nodes than that (deliver.dot has a
    dozen): every agent stage of a looping run walked its whole path, a cost growing with
    the run. Here the listed nodes are kept ordered by their latest run (at most one entry
    per node), so a call costs the new entries and the nodes, not the path.

    The path is a run's, only ever appended to — except cut back when a run pauses
    (`RunState.cut_path`): a path shorter than the one seen, another list, or one whose
    entry where the last call ended is not the one seen then is read again whole."""

    def __init__(self, listed: Container[str]) -> None:
        self._listed = listed
        self._order: dict[str, None] = {}  # listed nodes of the path, latest run last
        self._path: Sequence[str] | None = None
        self._seen = 0
        self._last: str | None = None
        self._lock = threading.Lock()  # agent stages of parallel branches ask at once

    def __call__(self, path: Sequence[str],
                 outcomes: Mapping[str, str]) -> list[tuple[str, str]]:
        with self._lock:
            seen = self._seen
            if path is not self._path or len(path) < seen or (
                    seen and path[seen - 1] != self._last):
                self._order, self._path, seen = {}, path, 0
            order, listed = self._order, self._listed
            for node_id in path[seen:]:  # (a slice: islice would step over the rest)
                if node_id in listed:
                    order.pop(node_id, None)
                    order[node_id] = None
            self._seen = len(path)
            self._last = path[-1] if path else None
            recent: list[tuple[str, str]] = []
            for node_id in reversed(order):
                if node_id in outcomes:
                    recent.append((node_id, outcomes[node_id]))
                    if len(recent) == RECENT_STAGES:
                        break
        recent.reverse()
        return recent


# fidelity -> node -> (the stored response, the outcome and the usage line its lines were
# rendered from, those lines)
PreambleMemo = dict[str, dict[str, tuple[Any, str, str | None, str]]]


@dataclass
class RunFacts:
    """What the preamble may tell, gathered by the engine before an agent stage."""

    goal: str
    run_id: str = ""
    stages: Sequence[tuple[str, str]] = ()
    context: Mapping[str, Any] = field(default_factory=dict)  # stored values (pointers kept)
    files: Sequence[str] = ()  # changed files, `folder: path`
    usage: Mapping[str, str] = field(default_factory=dict)  # node -> "model, N in / M out"
    # one run's memo, so the fifty stages listed are not rendered again before every
    # agent stage (see PreambleMemo)
    memo: PreambleMemo | None = None
    # what visible_keys(context) gives, from a Context that keeps its engine keys apart
    # (Context.newest_shown_keys); None: visible_keys walks `context`
    shown_keys: Callable[[], list[str]] | None = None


def response_summary(text: str, limit: int) -> str:
    """The prose of a reply without its closing contract object, shortened to `limit`."""
    cut = _CONTRACT.search(text)
    prose = (text[:cut.start()] if cut else text).strip()
    return prose if len(prose) <= limit else prose[:limit - 1].rstrip() + "…"


def shown_value(value: Any, limit: int) -> str:
    if ArtifactStore.is_pointer(value):
        return f"(large value, stored at {value[len(POINTER_PREFIX):]})"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                           ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def visible_keys(context: Mapping[str, Any], limit: int = MAX_VALUES) -> list[str]:
    """The `limit` context keys first written last, sorted, without the engine's own.

    Walking back from the newest key keeps a preamble's cost and size independent of how
    long the run has been going (a run that wrote thousands of keys shows the latest).
    """
    found: list[str] = []
    # dicts keep the order keys were first written in; the walk stops after a bounded
    # number of keys even when most are the engine's own (response.<node> per stage)
    newest_first: Iterator[str] = (
        reversed(context) if isinstance(context, (dict, MappingProxyType))
        else reversed(list(context)))
    for key in itertools.islice(newest_first, limit * SCAN_FACTOR):
        if key not in HIDDEN_KEYS and not key.startswith(HIDDEN_PREFIXES):
            found.append(key)
            if len(found) == limit:
                break
    return sorted(found)


def render_preamble(fidelity: str, facts: RunFacts) -> str:
    """The preamble text for `fidelity` (empty for `full`).

    A listed stage's lines are rendered once a run (`facts.memo`) and reused while its
    reply, outcome and usage line stay the same: the fifty listed stages change by one
    between two agent stages."""
    if fidelity not in LEVELS:
        return ""
    level = LEVELS[fidelity]
    context = facts.context
    limit = _VALUE_CHARS.get(fidelity, 0)
    if level >= 2:
        keys = facts.shown_keys() if facts.shown_keys is not None else visible_keys(context)
        values = [(key, shown_value(context[key], limit)) for key in keys]
    else:
        values = []
    stages: list[str] = []
    memo = facts.memo if facts.memo is not None else {}
    rendered = memo.get(fidelity)
    if rendered is None:
        rendered = memo[fidelity] = {}
    usage = facts.usage if level >= 4 else {}
    get = context.get
    for node, outcome in facts.stages if level >= 1 else ():
        response = get("response." + node) if level >= 3 else None
        model = usage.get(node)
        known = rendered.get(node)
        # the same stored reply (identity: strings are immutable), outcome and usage line
        if known is None or known[0] is not response or known[1] != outcome \
                or known[2] != model:
            details = []
            if isinstance(response, str):
                detail = _response_detail(fidelity, response)
                if detail is not None:
                    details.append(detail)
            if model is not None:
                details.append("Model: " + model)
            known = (response, outcome, model, _stage_text(node, outcome, details))
            rendered[node] = known
        stages.append(known[3])
    last_failure = str(context.get("failure_reason") or "") if level >= 2 else ""
    return _render(goal=facts.goal, run_id=facts.run_id if level == 0 else "", stages=stages,
                   failure=last_failure, files=list(facts.files) if level >= 3 else [],
                   values=values)


def _stage_text(node: str, outcome: str, details: Sequence[str]) -> str:
    """A listed stage's lines in the preamble (see _render)."""
    parts = ["\n- **", node, "**: ", outcome]
    for detail in details:
        parts += ["\n  - ", detail]
    return "".join(parts)


def _render(*, goal: str, run_id: str, stages: Sequence[str], failure: str,
            files: Sequence[str], values: Sequence[tuple[str, str]]) -> str:
    """What templates/preamble.md.j2 renders for these variables, line for line, each of
    `stages` being `_stage_text` of one listed stage's (node, outcome, details)."""
    parts = ["Goal: ", goal]
    if run_id:
        parts += ["\nRun: ", run_id]
    if stages:
        parts.append("\n\n## Completed stages")
        parts += stages
    if failure:
        parts += ["\n\nThe last stage failed: ", failure]
    if files:
        parts.append("\n\n## Files changed in the workspace")
        for name in files:
            parts += ["\n- ", name]
    if values:
        parts.append("\n\n## Context")
        for key, value in values:
            parts += ["\n- ", key, ": ", value]
    return "".join(parts).strip("\n")


def _response_detail(fidelity: str, response: str) -> str | None:
    """The line a listed stage's reply gets at `compact` and `summary:high`."""
    if ArtifactStore.is_pointer(response):
        return "Response: " + shown_value(response, 0)
    if fidelity == "compact":
        first = response_summary(response, 10_000).split("\n", 1)[0]
        return "Said: " + shown_value(first, 120) if first else None
    summary = response_summary(response, _SUMMARY_CHARS)
    return "Response: " + summary.replace("\n", "\n    ") if summary else None
