"""Human gates (SPEC §1.2) and parallel sections (SPEC §8) through whole runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import reply, run_flow

from delivery.testing import flow

GATE = flow("""
gate [shape=hexagon, label="Ship it?"]
ship [shape=parallelogram, script="true"]
rework [shape=parallelogram, script="true"]
denied [shape=parallelogram, script="true"]
start -> gate
gate -> ship [label="[A] Approve"]
gate -> rework [label="[R] Rework"]
gate -> denied [condition="outcome=failed"]
ship -> exit
rework -> exit
denied -> exit
""")


@pytest.mark.parametrize("answer", ["Approve", "A", "a", "[A] Approve", "approve"])
def test_an_answer_routes_the_gate_by_label_and_is_recorded(tmp_path: Path,
                                                            answer: str) -> None:
    ran = run_flow(tmp_path, GATE, answers={"gate": answer})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["start", "gate", "ship", "exit"]
    assert ran.context["human.gate.label"] == "[A] Approve"
    assert ran.context["human.gate.selected"] == "A"


def test_the_other_answer_takes_the_other_edge(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, GATE, answers={"gate": "R"})
    assert ran.outcome.path == ["start", "gate", "rework", "exit"]
    assert ran.context["human.gate.label"] == "[R] Rework"
    assert ran.context["human.gate.selected"] == "R"


def test_a_gate_without_an_answer_is_denied_and_follows_failure_routing(
        tmp_path: Path) -> None:
    ran = run_flow(tmp_path, GATE)
    assert ran.outcome.path == ["start", "gate", "denied", "exit"]
    status = json.loads((ran.outcome.run_dir / "gate" / "1" / "status.json").read_text())
    assert status["outcome"] == "failed"
    assert "no answer" in status["failure_reason"]
    assert "human.gate.label" not in ran.context


def test_an_answer_that_names_no_choice_denies_the_gate(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, GATE, answers={"gate": "Maybe"})
    assert ran.outcome.path == ["start", "gate", "denied", "exit"]


def test_a_denied_gate_with_no_failure_edge_fails_the_run(tmp_path: Path) -> None:
    dot = flow("""
    gate [shape=hexagon, label="Go?"]
    start -> gate
    gate -> exit [label="[Y] Yes"]
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.status == "failed"
    assert "gate" in ran.outcome.failure_reason and "denied" in ran.outcome.failure_reason


UNLABELED = flow("""
gate [shape=hexagon, label="Which way?"]
ship [shape=parallelogram, script="true"]
rework [shape=parallelogram, script="true"]
denied [shape=parallelogram, script="true"]
start -> gate
gate -> ship
gate -> rework [label="Rework"]
gate -> denied [condition="outcome=failed"]
ship -> exit
rework -> exit
denied -> exit
""")


def test_an_unlabeled_gate_edge_is_chosen_by_its_target_id(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, UNLABELED, answers={"gate": "ship"})
    assert ran.outcome.path == ["start", "gate", "ship", "exit"]
    assert ran.context["human.gate.label"] == "ship"


def test_a_failure_edge_of_a_gate_is_not_a_choice(tmp_path: Path) -> None:
    # answering with the failure edge's target names no choice: the gate is denied
    ran = run_flow(tmp_path, UNLABELED, answers={"gate": "denied"})
    assert ran.outcome.path == ["start", "gate", "denied", "exit"]
    assert "human.gate.label" not in ran.context
    status = json.loads((ran.outcome.run_dir / "gate" / "1" / "status.json").read_text())
    assert status["outcome"] == "failed"
    assert "choices: ship, Rework" in status["failure_reason"]


def test_an_agent_preferring_an_unlabeled_edge_by_target_takes_it(tmp_path: Path) -> None:
    dot = flow("""
    ask [type=prompt, prompt="Pick"]
    alpha [shape=parallelogram, script="true"]
    zulu [shape=parallelogram, script="true"]
    start -> ask
    ask -> alpha
    ask -> zulu
    alpha -> exit
    zulu -> exit
    """)
    ran = run_flow(tmp_path, dot, replies={"ask": [reply(preferred_label="zulu")]})
    assert ran.outcome.path == ["start", "ask", "zulu", "exit"]


# -- parallel ---------------------------------------------------------------------------


def _rendezvous(me: str, other: str) -> str:
    """A script that marks itself, then waits (bounded) until the sibling has marked too."""
    return (f"touch {me}.mark; i=0; while [ ! -f {other}.mark ] && [ $i -lt 100 ]; "
            f"do sleep 0.05; i=$((i+1)); done; test -f {other}.mark")


def test_parallel_branches_run_concurrently(tmp_path: Path) -> None:
    dot = flow(f"""
    split [shape=component]
    left [shape=parallelogram, script="{_rendezvous('left', 'right')}"]
    right [shape=parallelogram, script="{_rendezvous('right', 'left')}"]
    join [shape=tripleoctagon]
    start -> split
    split -> left
    split -> right
    left -> join
    right -> join
    join -> exit
    """)
    # Each branch fails unless its sibling marked itself while it waited: run one after the
    # other, the first would give up waiting (bounded, 5 s) and fail.
    ran = run_flow(tmp_path, dot)
    assert ran.status == "succeeded", ran.outcome.failure_reason
    results = ran.context["parallel.results"]
    assert [r["outcome"] for r in results] == ["succeeded", "succeeded"]
    assert set(ran.outcome.path) >= {"split", "left", "right", "join"}


SAME_KEY = """
digraph F {
  graph [goal="g"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  split [shape=component]
  first [shape=parallelogram, facts="view",
         script="echo view=from-first >> \\"$DELIVERY_FACTS\\""]
  second [shape=parallelogram, facts="view",
          script="sleep 0.2; echo view=from-second >> \\"$DELIVERY_FACTS\\""]
  join [shape=tripleoctagon]
  summary [type=prompt, prompt="A={{ parallel.results['0'].context.view }}
B={{ parallel.results['1'].context.view }}"]
  start -> split
  split -> second
  split -> first
  first -> join
  second -> join
  join -> summary -> exit
}
"""


def test_branches_writing_the_same_key_keep_both_values_in_edge_order(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, SAME_KEY, replies={"summary": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    results = ran.context["parallel.results"]
    # edge order: split -> second comes first
    assert [r["node"] for r in results] == ["second", "first"]
    assert results[0]["context"]["view"] == "from-second"
    assert results[1]["context"]["view"] == "from-first"
    assert set(results[0]) == {"node", "outcome", "failure_reason", "context"}
    # the branch key is not merged into the context after the join
    assert "view" not in ran.context


def test_a_prompt_after_the_join_reads_branch_results_by_index(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, SAME_KEY, replies={"summary": [reply()]})
    assert "A=from-second\nB=from-first" in ran.prompts_of("summary")[0]


def test_a_branch_cannot_see_what_a_sibling_writes(tmp_path: Path) -> None:
    dot = """
    digraph F {
      graph [goal="g"]
      start [shape=Mdiamond]
      exit [shape=Msquare]
      split [shape=component]
      writer [shape=parallelogram, facts="secret",
              script="echo secret=s3 >> \\"$DELIVERY_FACTS\\"; touch writer.done"]
      reader [type=prompt, prompt="secret=<{{ secret | default('unseen') }}>
flag=<{{ writer.failed | default('unseen') }}>"]
      gatekeeper [shape=parallelogram, script="WAIT"]
      join [shape=tripleoctagon]
      start -> split
      split -> writer
      split -> gatekeeper
      gatekeeper -> reader
      writer -> join
      reader -> join
      join -> exit
    }
    """.replace("WAIT", "i=0; while [ ! -f writer.done ] && [ $i -lt 100 ]; "
                        "do sleep 0.05; i=$((i+1)); done; sleep 0.3")
    ran = run_flow(tmp_path, dot, replies={"reader": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert (tmp_path / "writer.done").exists()
    assert "secret=<unseen>\nflag=<unseen>" in ran.prompts_of("reader")[0]
    writer_result = ran.context["parallel.results"][0]
    assert writer_result["context"]["secret"] == "s3"
    assert "secret" not in ran.context["parallel.results"][1]["context"]


def _join_flow(join: str, max_parallel: str = "") -> str:
    extra = f", max_parallel={max_parallel}" if max_parallel else ""
    return flow(f"""
    split [shape=component, join={join}{extra}]
    good [shape=parallelogram, script="true"]
    bad [shape=parallelogram, script="echo nope >&2; exit 4"]
    join [shape=tripleoctagon]
    start -> split
    split -> good
    split -> bad
    good -> join
    bad -> join [condition="outcome=failed"]
    bad -> join [condition="outcome=succeeded"]
    join -> exit
    """)


def test_wait_all_is_a_partial_success_when_one_branch_fails(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, _join_flow("all"))
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["outcome"] == "partial_success"
    results = ran.context["parallel.results"]
    assert [(r["node"], r["outcome"]) for r in results] == [("good", "succeeded"),
                                                            ("bad", "failed")]
    assert "code 4" in results[1]["failure_reason"]


def test_wait_all_fails_when_every_branch_fails(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, _join_flow("wait_all").replace('script="true"', 'script="exit 3"')
                   .replace("join=wait_all", "join_policy=wait_all"))
    assert ran.status == "failed"
    assert "code 3" in ran.outcome.failure_reason and "code 4" in ran.outcome.failure_reason


def test_first_success_cancels_the_branches_still_running(tmp_path: Path) -> None:
    dot = flow("""
    split [shape=component, join_policy=first_success, max_parallel=1]
    fast [shape=parallelogram, tool_command="true"]
    slow [shape=parallelogram, tool_command="exit 9"]
    join [shape=tripleoctagon]
    start -> split
    split -> fast -> join
    split -> slow -> join
    join -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot)
    assert ran.status == "succeeded", ran.outcome.failure_reason
    results = ran.context["parallel.results"]
    assert [(r["node"], r["outcome"]) for r in results] == [("fast", "succeeded"),
                                                            ("slow", "skipped")]
    assert "cancelled" in results[1]["failure_reason"]
    assert "slow" not in ran.outcome.path


def test_join_any_succeeds_when_one_branch_succeeds(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, _join_flow("any"))
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["outcome"] == "succeeded"
    results = ran.context["parallel.results"]
    # the failing branch either failed first or was cancelled once the other succeeded
    assert results[0]["outcome"] == "succeeded"
    assert results[1]["outcome"] in ("failed", "skipped")


def test_max_parallel_one_still_runs_every_branch(tmp_path: Path) -> None:
    dot = flow("""
    split [shape=component, max_parallel=1]
    a [shape=parallelogram, script="echo a >> order"]
    b [shape=parallelogram, script="echo b >> order"]
    c [shape=parallelogram, script="echo c >> order"]
    join [shape=tripleoctagon]
    start -> split
    split -> a
    split -> b
    split -> c
    a -> join
    b -> join
    c -> join
    join -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert sorted((tmp_path / "order").read_text().split()) == ["a", "b", "c"]
    assert [r["node"] for r in ran.context["parallel.results"]] == ["a", "b", "c"]


def test_a_large_value_written_in_a_branch_reads_as_its_value_after_the_join(
        tmp_path: Path) -> None:
    size = 150_000
    (tmp_path / "blob.sh").write_text(
        "printf 'blob=' >> \"$DELIVERY_FACTS\"\n"
        f"head -c {size} /dev/zero | tr '\\0' x >> \"$DELIVERY_FACTS\"\n"
        "echo >> \"$DELIVERY_FACTS\"\n", encoding="utf-8")
    dot = flow("""
    split [shape=component]
    big [shape=parallelogram, facts="blob", script="bash blob.sh"]
    small [shape=parallelogram, script="true"]
    join [shape=tripleoctagon]
    use [type=prompt, prompt="PROMPT"]
    start -> split
    split -> big
    split -> small
    big -> join
    small -> join
    join -> use -> exit
    """).replace("PROMPT", "len={{ parallel.results['0'].context.blob | length }} "
                          "head={{ parallel.results['0'].context.blob[:4] }}")
    ran = run_flow(tmp_path, dot, replies={"use": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert f"len={size} head=xxxx" in ran.prompts_of("use")[0]
    assert ran.context["parallel.results"][0]["context"]["blob"] == "x" * size
    checkpoint = json.loads((ran.outcome.run_dir / "checkpoint.json").read_text())
    assert str(checkpoint["context"]["parallel.results"]).startswith("file://")
