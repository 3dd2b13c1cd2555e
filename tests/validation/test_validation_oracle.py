"""The fast builder and validator give exactly the diagnostics the earlier ones
(tests/validation/oracle_*.py) gave: same rules, positions, messages, order.

Workflows are generated from a pool of pieces that every rule cares about (types and
shapes, outputs and facts, template reads, conditions on outcomes and choices, retry
targets, goal gates, parallel sections, loop restarts, bad values), so most files have a
mix of problems; the benchmark's generated workflow is checked as a whole too."""

from __future__ import annotations

import sys
from pathlib import Path

import oracle_builder
import oracle_validator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.lang.diagnostics import Diagnostic, sort_diagnostics
from delivery.lang.parser import parse_dot
from delivery.validation.agent_rules import check_model_attributes
from delivery.validation.loader import check_source

ROOT = Path(__file__).resolve().parents[2]
AGREE = settings(max_examples=250, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def oracle_check(source: str, file: str = "f.dot") -> list[Diagnostic]:
    """check_source as it was: the earlier builder and validator (the parser is held to its
    own oracle by tests/lang/test_dot_oracle.py)."""
    workflow, diagnostics = oracle_builder.build_workflow(parse_dot(source, file))
    diagnostics += oracle_validator.validate(workflow)
    diagnostics += check_model_attributes(workflow)
    return sort_diagnostics(diagnostics)


def new_check(source: str, file: str = "f.dot") -> list[Diagnostic]:
    workflow, diagnostics = check_source(source, file)
    assert workflow is not None
    return diagnostics


NODE_IDS = ["a", "b", "c", "d", "e", "g", "h"]
KEYS = ["v", "c", "t.n", "pr.state", "web.pr.state", "goal", "ticket", "x", "v.sub",
        "parallel.results.0.context.v", "parallel.results.3", "outcome", "b.failed",
        "human.gate.selected", "response.a", "current_work", "stack.child.status"]
KINDS = st.sampled_from([
    "", "shape=box", "shape=diamond", "shape=hexagon", "shape=component",
    "shape=tripleoctagon", "shape=parallelogram", "shape=Msquare", "type=prompt",
    "type=script", "type=probe", "type=publish", "type=respond", "type=wait", "type=human",
    "type=bogus", "shape=blob", "type=manager_loop", "type=worktree_remove"])
EXTRA = st.sampled_from([
    "", 'outputs="v:text, c:choice"', 'outputs="v:json"', 'outputs="x:work"',
    'outputs="report.md"', 'outputs="goal:text"', 'facts="t.n"', 'facts="b.failed"',
    "retry_target=a", "retry_target=nowhere", "fallback_retry_target=b", "goal_gate=true",
    "goal_gate=maybe", "max_retries=-1", "timeout=30s", "timeout=soon", 'threads="v"',
    'script="echo {{ v }}"', 'tool_command="ls {{ x }}"', "folder=web", "probe=pr",
    "label=L", "colour=red", "fidelity=full", "fidelity=odd", "join=all",
    "reasoning_effort=low", "reasoning_effort=huge", 'llm_prompt="Use {{ x }}"'])
PROMPT = st.lists(st.sampled_from(KEYS), max_size=3).map(
    lambda keys: "prompt=\"Work" + "".join(f" {{{{ {k} }}}}" for k in keys) + "\"")
CONDITIONS = st.sampled_from([
    "", 'condition="outcome=failed"', 'condition="outcome=succeeded"', 'condition="c=left"',
    'condition="c=right || c=both"', 'condition="v!=again"', 'condition="t.n >= 0 && v"',
    'condition="pr.state=OPEN"', 'condition="pr.state=open"', 'condition="x and y"',
    'condition="outcome=custom"', 'condition="a=="', 'condition="b.failed=true"',
    'condition="parallel.results.0.context.v"', 'condition="outcome!=succeeded"',
    "loop_restart=true", "weight=2", "weight=x", 'label="go"'])


@st.composite
def workflows(draw: st.DrawFn) -> str:
    count = draw(st.integers(min_value=1, max_value=len(NODE_IDS)))
    ids = NODE_IDS[:count]
    graph = ", ".join(draw(st.lists(st.sampled_from([
        'goal="G"', 'inputs="ticket"', "retry_target=a", "retry_target=c",
        "fallback_retry_target=d", 'folders="web,api"', 'defaults="goal=x, other=y"',
        "default_max_retry=2", "template=plain", 'model_stylesheet="* { llm_model: m; }"',
        'extra_attributes="colour"']), max_size=3, unique=True)))
    lines = ["digraph w {"]
    if graph:
        lines.append(f"    graph [{graph}]")
    if draw(st.booleans()):
        lines.append('    node [shape=box, timeout=10s]')
    lines += ["    start [shape=Mdiamond]", "    exit [shape=Msquare]"]
    for node_id in ids:
        parts = [p for p in (draw(KINDS), draw(PROMPT), draw(EXTRA), draw(EXTRA)) if p]
        lines.append(f"    {node_id} [{', '.join(parts)}]")
    targets = [*ids, "exit"]
    lines.append(f"    start -> {ids[0]}")
    for _ in range(draw(st.integers(min_value=0, max_value=2 * count + 2))):
        source = draw(st.sampled_from(["start", *ids]))
        target = draw(st.sampled_from([*targets, "stray"]))
        attrs = draw(CONDITIONS)
        lines.append(f"    {source} -> {target}" + (f" [{attrs}]" if attrs else ""))
    lines.append(f"    {ids[-1]} -> exit")
    lines.append("}")
    return "\n".join(lines) + "\n"


@AGREE
@given(workflows())
def test_diagnostics_are_the_oracles(source: str) -> None:
    assert new_check(source) == oracle_check(source)


def test_the_benchmarks_workflow_and_a_broken_one_check_as_the_oracle_checks_them() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from validate_scaling import generate_workflow
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    source = generate_workflow(300)
    broken = (source.replace('facts="t3.n"', 'facts="t3.m"')
              .replace("g5 -> a5", "g5 -> a5 [loop_restart=true]")
              .replace('g7 -> s7 [condition="v7!=again"]', 'g7 -> s7 [condition="c7!=up"]'))
    assert new_check(source) == oracle_check(source)
    found = oracle_check(broken)
    assert {d.rule for d in found} >= {"availability", "impossible_literal"}
    assert new_check(broken) == found


def test_bundled_workflows_check_as_the_oracle_checks_them() -> None:
    for path in sorted((ROOT / "workflows").glob("*.dot")):
        source = path.read_text(encoding="utf-8")
        assert new_check(source, str(path)) == oracle_check(source, str(path))
