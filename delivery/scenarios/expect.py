"""Checking a scenario's expectations against what the run did.

A path may use `"..."` for any run of nodes (none included). When the path does not match,
the first divergence is reported: the step, the node(s) the expectation allowed there and
the node the run took.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from delivery.lang.paths import string_form
from delivery.scenarios.model import ANY_NODES, Expectation


@dataclass(frozen=True)
class PathDivergence:
    step: int  # 0-based index into the run's path
    expected: tuple[str, ...]  # nodes the expectation allowed at this step; () = the end
    taken: str | None  # the node the run took; None when the run ended here


def first_divergence(pattern: Sequence[str], path: Sequence[str]) -> PathDivergence | None:
    """None when `path` matches `pattern`; else where it stops matching.

    The pattern is matched like a glob in which `...` matches any run of nodes: the set of
    pattern positions still possible is advanced over the path, one node at a time.
    """
    def closure(positions: set[int]) -> set[int]:
        result = set(positions)
        stack = list(positions)
        while stack:
            at = stack.pop()
            if at < len(pattern) and pattern[at] == ANY_NODES and at + 1 not in result:
                result.add(at + 1)
                stack.append(at + 1)
        return result

    live = closure({0})
    for step, node in enumerate(path):
        following: set[int] = set()
        for at in live:
            if at < len(pattern):
                if pattern[at] == ANY_NODES:
                    following.add(at)
                elif pattern[at] == node:
                    following.add(at + 1)
        if not following:
            return PathDivergence(step, _allowed(pattern, live), node)
        live = closure(following)
    if len(pattern) in live:
        return None
    return PathDivergence(len(path), _allowed(pattern, live), None)


def _allowed(pattern: Sequence[str], live: set[int]) -> tuple[str, ...]:
    names = {pattern[at] for at in live if at < len(pattern) and pattern[at] != ANY_NODES}
    return tuple(sorted(names))


@dataclass(frozen=True)
class Mismatch:
    what: str  # status | path | visits | context | failure_reason
    message: str
    divergence: PathDivergence | None = None


def check_expectation(expect: Expectation, *, status: str, path: Sequence[str],
                      context: Mapping[str, Any], failure_reason: str,
                      folder_runs: Mapping[str, int] | None = None) -> list[Mismatch]:
    """What differs from `expect`; a visit count of `node@folder` is compared with
    `folder_runs` (one folder's runs of a foreach node, each attempt counted)."""
    found: list[Mismatch] = []
    if expect.path is not None:
        divergence = first_divergence(expect.path, path)
        if divergence is not None:
            found.append(Mismatch("path", _describe(divergence), divergence))
    if expect.status is not None and expect.status != status:
        found.append(Mismatch("status", f"status: expected {expect.status}, got {status}"
                              + (f" ({failure_reason})" if failure_reason else "")))
    for node_id, count in expect.visits.items():
        visits = (folder_runs or {}).get(node_id, 0) if "@" in node_id else \
            sum(1 for step in path if step == node_id)
        if visits != count:
            found.append(Mismatch("visits", f"visits of {node_id}: expected {count}, "
                                  f"got {visits}"))
    for key, wanted in expect.context.items():
        if key not in context:
            found.append(Mismatch("context", f"context {key}: expected {string_form(wanted)!r}, "
                                  "but the run never wrote it"))
        elif string_form(context[key]) != string_form(wanted):
            found.append(Mismatch("context", f"context {key}: expected "
                                  f"{string_form(wanted)!r}, got {string_form(context[key])!r}"))
    if expect.failure_reason is not None and expect.failure_reason not in failure_reason:
        found.append(Mismatch("failure_reason", f"failure_reason: expected it to contain "
                              f"{expect.failure_reason!r}, got {failure_reason!r}"))
    return found


def _describe(divergence: PathDivergence) -> str:
    expected = " or ".join(divergence.expected) if divergence.expected else "the end of the run"
    taken = divergence.taken if divergence.taken is not None else "the end of the run"
    return f"path diverges at step {divergence.step + 1}: expected {expected}, took {taken}"
