from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.engine.context import Context, is_hidden_key
from delivery.engine.preamble import (
    MAX_VALUES,
    RECENT_STAGES,
    SCAN_FACTOR,
    PreambleMemo,
    RecentStages,
    RunFacts,
    listed_nodes,
    render_preamble,
    visible_keys,
)
from delivery.testing import flow
from delivery.validation.loader import check_source

STAGES = [("plan", "succeeded"), ("test", "failed")]


FACTS = RunFacts(
    goal="Ship it", run_id="run-1", stages=STAGES,
    context={"goal": "Ship it", "verdict": "pass", "internal.run_id": "run-1",
             "response.plan": 'Planned three steps.\nDetails follow.\n```json\n{}\n```',
             "failure_reason": "tests failed", "graph.goal": "Ship it",
             "big": "file:///runs/r/artifacts/values/big-0123456789abcdef.json"},
    files=["src/app.py (M)"], usage={"plan": "gpt-x, 10 tokens in / 5 out"},
)


def test_compact_lists_stages_files_and_context() -> None:
    text = render_preamble("compact", FACTS)
    assert text.startswith("Goal: Ship it\n\n## Completed stages\n- **plan**: succeeded\n")
    assert "  - Said: Planned three steps." in text
    assert "- src/app.py (M)" in text and "- verdict: pass" in text


def test_truncate_gives_the_goal_and_the_run_id_only() -> None:
    assert render_preamble("truncate", FACTS) == "Goal: Ship it\nRun: run-1"


def test_full_fidelity_needs_no_preamble() -> None:
    assert render_preamble("full", FACTS) == ""


def test_each_summary_level_shows_more_than_the_one_before() -> None:
    low, medium, high = (render_preamble(f"summary:{level}", FACTS)
                         for level in ("low", "medium", "high"))
    assert "- **test**: failed" in low and "verdict" not in low
    assert low in medium and "- verdict: pass" in medium and "Response:" not in medium
    assert "Response: Planned three steps.\n    Details follow." in high
    assert "Model: gpt-x, 10 tokens in / 5 out" in high
    assert len(low) < len(medium) < len(high)


def test_engine_keys_stay_out_and_artifacts_are_referenced_not_inlined() -> None:
    text = render_preamble("summary:high", FACTS)
    assert "internal." not in text and "graph.goal" not in text and "response.plan" not in text
    assert "- big: (large value, stored at /runs/r/artifacts/values/big-0123456789abcdef.json)" \
        in text


def test_recent_stages_lists_each_stage_once_in_order_of_last_completion() -> None:
    workflow, _ = check_source(flow("""
        gate [shape=diamond]
        start -> a -> b -> gate -> exit
    """, goal=None))
    assert workflow is not None
    path = ["start", "a", "b", "a", "gate"]
    outcomes = {"start": "succeeded", "a": "failed", "b": "succeeded", "gate": "succeeded"}
    recent = RecentStages(listed_nodes(workflow))
    assert recent(path, outcomes) == [("b", "succeeded"), ("a", "failed")]


def test_recent_stages_keeps_only_the_latest_ones() -> None:
    ids = [f"s{i}" for i in range(RECENT_STAGES + 10)]
    chain = " -> ".join(ids)
    workflow, _ = check_source(flow(f"start -> {chain} -> exit", goal=None))
    assert workflow is not None
    stages = RecentStages(listed_nodes(workflow))(ids, {i: "succeeded" for i in ids})
    assert len(stages) == RECENT_STAGES
    assert stages[-1][0] == ids[-1] and stages[0][0] == ids[10]


def test_a_preamble_shows_only_the_newest_context_values() -> None:
    context = {f"key{i:04d}": f"value {i}" for i in range(3 * MAX_VALUES)}
    context["response.plan"] = "hidden"
    text = render_preamble("summary:medium", RunFacts(goal="Ship", context=context))
    shown = [i for i in range(3 * MAX_VALUES) if f"key{i:04d}" in text]
    assert shown == list(range(2 * MAX_VALUES, 3 * MAX_VALUES))


# Keys a run may write: the engine's own (hidden from a preamble) and a stage's, few
# enough that sets, deletes and re-sets of the same key happen often.
_KEYS = st.sampled_from([*(f"response.s{i}" for i in range(6)), "outcome", "goal",
                         "current_node", "internal.x", "graph.goal", "current_work",
                         *(f"k{i}" for i in range(8)), "a.b", "a.b.c", "response"])
_OPS = st.lists(st.tuples(st.sampled_from(["set", "delete", "fork", "restore"]), _KEYS),
                max_size=80)


@settings(max_examples=200, deadline=None)
@given(ops=_OPS, limit=st.integers(1, 6), factor=st.integers(1, 4))
def test_a_context_picks_the_same_shown_keys_as_a_walk_of_its_stored_map(
        ops: list[tuple[str, str]], limit: int, factor: int) -> None:
    # Context keeps its engine keys apart so that the preamble need not classify each of
    # the newest keys before every stage: what it picks must be what the walk picks.
    context = Context()
    for number, (op, key) in enumerate(ops):
        if op == "set":
            context.set(key, number)
        elif op == "delete":
            context.delete(key)
        elif op == "fork":
            context = context.fork()
        else:
            context = Context.restore(dict(context.stored()))
        assert context.newest_shown_keys(limit, limit * factor) == \
            _walked(context.stored(), limit, limit * factor)
    assert context.newest_shown_keys(MAX_VALUES, MAX_VALUES * SCAN_FACTOR) == \
        visible_keys(context.stored())


def _walked(stored: Mapping[str, object], limit: int, scan: int) -> list[str]:
    newest = list(reversed(list(stored)))[:scan]
    return sorted([key for key in newest if not is_hidden_key(key)][:limit])


def test_a_preamble_from_a_context_reads_as_one_from_its_stored_map() -> None:
    context = Context()
    for i in range(3 * MAX_VALUES):
        context.set(f"key{i:04d}", f"value {i}")
        context.set(f"response.s{i}", "Done.")
    stages = [(f"s{i}", "succeeded") for i in range(RECENT_STAGES)]
    walked = RunFacts(goal="Ship", stages=stages, context=context.stored())
    kept = RunFacts(goal="Ship", stages=stages, context=context.stored(),
                    shown_keys=lambda: context.newest_shown_keys(MAX_VALUES,
                                                                 MAX_VALUES * SCAN_FACTOR))
    for fidelity in ("summary:medium", "compact", "summary:high"):
        assert render_preamble(fidelity, kept) == render_preamble(fidelity, walked)
    assert "key0119: value 119" in render_preamble("compact", kept)


_NODES = st.sampled_from(["plan", "code", "test"])
_STEP = st.tuples(_NODES, st.sampled_from(["succeeded", "failed"]),
                  st.sampled_from(["Did it.", "Did it again.\nMore.", None]),
                  st.sampled_from([None, "gpt-x, 1 tokens in / 2 out"]))


@given(steps=st.lists(_STEP, min_size=1, max_size=12),
       fidelities=st.lists(st.sampled_from(["summary:low", "compact", "summary:high"]),
                           min_size=12, max_size=12))
def test_a_run_s_preamble_memo_renders_what_a_fresh_render_does(
        steps: list[tuple[str, str, str | None, str | None]], fidelities: list[str]) -> None:
    """The memo keeps a listed stage's lines across stages: a stage run again with another
    outcome, reply or usage line must show the new one, and stages of another fidelity
    their own lines."""
    memo: PreambleMemo = {}
    context: dict[str, str] = {"goal": "g"}
    outcomes: dict[str, str] = {}
    usage: dict[str, str] = {}
    for (node, outcome, reply, model), fidelity in zip(steps, fidelities, strict=False):
        outcomes.pop(node, None)
        outcomes[node] = outcome
        if reply is None:
            context.pop("response." + node, None)
        else:
            context["response." + node] = reply
        if model is None:
            usage.pop(node, None)
        else:
            usage[node] = model
        stages = list(outcomes.items())
        shared = RunFacts(goal="g", stages=stages, context=context, usage=usage, memo=memo)
        fresh = RunFacts(goal="g", stages=stages, context=context, usage=usage)
        assert render_preamble(fidelity, shared) == render_preamble(fidelity, fresh)


# A run's path as the engine changes it: nodes appended (loops over a few of them make it
# long), and now and then cut back (a pause) or replaced (another run).
_NODE_IDS = [f"n{i}" for i in range(RECENT_STAGES + 20)]
_STEPS = st.lists(st.one_of(
    st.tuples(st.just("run"), st.lists(st.sampled_from(_NODE_IDS), min_size=1, max_size=8)),
    st.tuples(st.just("loop"), st.lists(st.sampled_from(_NODE_IDS[:4]), min_size=1,
                                        max_size=3)),
    st.tuples(st.just("cut"), st.integers(0, 400)),
    st.tuples(st.just("new"), st.lists(st.sampled_from(_NODE_IDS), max_size=5))),
    max_size=30)


@settings(max_examples=300, deadline=None)
@given(steps=_STEPS, not_done=st.sets(st.sampled_from(_NODE_IDS), max_size=8),
       unlisted=st.sets(st.sampled_from(_NODE_IDS), max_size=8))
def test_recent_stages_kept_up_to_date_list_what_a_walk_of_the_path_lists(
        steps: list[tuple[str, Any]], not_done: set[str], unlisted: set[str]) -> None:
    listed = frozenset(_NODE_IDS) - unlisted
    recent = RecentStages(listed)
    path: list[str] = []
    outcomes: dict[str, str] = {}
    for number, (step, value) in enumerate(steps):
        if step == "run":
            path += value
        elif step == "loop":
            path += value * 60
        elif step == "cut":
            del path[value:]
        else:
            path = list(value)
        for node in path[-3:]:  # a node's outcome is set (or changed) once it has run
            if node not in not_done:
                outcomes[node] = f"outcome {number}"
        assert recent(path, outcomes) == _walked_recent_stages(path, outcomes, listed)


def _walked_recent_stages(path: list[str], outcomes: Mapping[str, str],
                          listed: frozenset[str]) -> list[tuple[str, str]]:
    """What RecentStages replaced (the oracle): a walk back from the path's end to
    RECENT_STAGES distinct nodes, before every agent stage."""
    recent: dict[str, str] = {}
    for node_id in reversed(path):
        if len(recent) == RECENT_STAGES:
            break
        if node_id not in recent and node_id in outcomes and node_id in listed:
            recent[node_id] = outcomes[node_id]
    return list(reversed(recent.items()))
