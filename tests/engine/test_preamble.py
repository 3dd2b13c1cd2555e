from delivery.engine.preamble import RECENT_STAGES, recent_stages, render_preamble
from delivery.validation.loader import check_source

STAGES = [("plan", "succeeded"), ("test", "failed")]


def test_compact_lists_the_goal_and_the_completed_stages() -> None:
    assert render_preamble("compact", "Ship it", STAGES) == (
        "Goal: Ship it\n\n## Completed stages\n- **plan**: succeeded\n- **test**: failed"
    )


def test_truncate_gives_the_goal_only() -> None:
    assert render_preamble("truncate", "Ship it", STAGES) == "Goal: Ship it"


def test_full_fidelity_needs_no_preamble() -> None:
    assert render_preamble("full", "Ship it", STAGES) == ""


def test_recent_stages_lists_each_stage_once_in_order_of_last_completion() -> None:
    workflow, _ = check_source(
        'digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; gate [shape=diamond]\n'
        '  start -> a -> b -> gate -> exit }'
    )
    assert workflow is not None
    path = ["start", "a", "b", "a", "gate"]
    outcomes = {"start": "succeeded", "a": "failed", "b": "succeeded", "gate": "succeeded"}
    assert recent_stages(workflow, path, outcomes) == [("b", "succeeded"), ("a", "failed")]


def test_recent_stages_keeps_only_the_latest_ones() -> None:
    ids = [f"s{i}" for i in range(RECENT_STAGES + 10)]
    chain = " -> ".join(ids)
    workflow, _ = check_source(f"digraph g {{ start [shape=Mdiamond]; exit [shape=Msquare]\n"
                               f"  start -> {chain} -> exit }}")
    assert workflow is not None
    stages = recent_stages(workflow, ids, {i: "succeeded" for i in ids})
    assert len(stages) == RECENT_STAGES
    assert stages[-1][0] == ids[-1] and stages[0][0] == ids[10]
