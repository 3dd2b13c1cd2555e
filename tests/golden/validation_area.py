"""The builder and validator over a fixed corpus: every diagnostic of `check_source` (rule,
severity, position, subject, message, fix), in order.

The corpus: the bundled workflows and the example, the validation benchmark's generated
workflow of 300 nodes and a broken copy of it, and workflows generated from a pool of
pieces that every rule cares about (types and shapes, outputs and facts, template reads,
conditions on outcomes and choices, retry targets, goal gates, parallel sections, loop
restarts, bad values), so most of them have a mix of problems (the pool of the property
test that held the validator to its earlier version)."""

from __future__ import annotations

import dataclasses
import importlib.util
import random
from types import ModuleType
from typing import Any

from delivery.validation.loader import check_source

from .store import ROOT

AREA = "validation"
FILES = ["workflows/deliver.dot", "workflows/campaign.dot", "workflows/review-prs.dot",
         "examples/review/review.dot"]
GENERATED = 150

NODE_IDS = ["a", "b", "c", "d", "e", "g", "h"]
KEYS = ["v", "c", "t.n", "pr.state", "web.pr.state", "goal", "ticket", "x", "v.sub",
        "parallel.results.0.context.v", "parallel.results.3", "outcome", "b.failed",
        "human.gate.selected", "response.a", "current_work", "stack.child.status"]
KINDS = [
    "", "shape=box", "shape=diamond", "shape=hexagon", "shape=component",
    "shape=tripleoctagon", "shape=parallelogram", "shape=Msquare", "type=prompt",
    "type=script", "type=probe", "type=publish", "type=respond", "type=wait", "type=human",
    "type=bogus", "shape=blob", "type=manager_loop", "type=worktree_remove"]
EXTRA = [
    "", 'outputs="v:text, c:choice"', 'outputs="v:json"', 'outputs="x:work"',
    'outputs="report.md"', 'outputs="goal:text"', 'facts="t.n"', 'facts="b.failed"',
    "retry_target=a", "retry_target=nowhere", "fallback_retry_target=b", "goal_gate=true",
    "goal_gate=maybe", "max_retries=-1", "timeout=30s", "timeout=soon", 'threads="v"',
    'script="echo {{ v }}"', 'tool_command="ls {{ x }}"', "folder=web", "probe=pr",
    "label=L", "colour=red", "fidelity=full", "fidelity=odd", "join=all",
    "reasoning_effort=low", "reasoning_effort=huge", 'llm_prompt="Use {{ x }}"']
CONDITIONS = [
    "", 'condition="outcome=failed"', 'condition="outcome=succeeded"', 'condition="c=left"',
    'condition="c=right || c=both"', 'condition="v!=again"', 'condition="t.n >= 0 && v"',
    'condition="pr.state=OPEN"', 'condition="pr.state=open"', 'condition="x and y"',
    'condition="outcome=custom"', 'condition="a=="', 'condition="b.failed=true"',
    'condition="parallel.results.0.context.v"', 'condition="outcome!=succeeded"',
    "loop_restart=true", "weight=2", "weight=x", 'label="go"']
GRAPH = ['goal="G"', 'inputs="ticket"', "retry_target=a", "retry_target=c",
         "fallback_retry_target=d", 'folders="web,api"', 'defaults="goal=x, other=y"',
         "default_max_retry=2", "template=plain", 'model_stylesheet="* { llm_model: m; }"',
         'extra_attributes="colour"']


def generate(rng: random.Random) -> str:
    count = rng.randint(1, len(NODE_IDS))
    ids = NODE_IDS[:count]
    graph = ", ".join(rng.sample(GRAPH, rng.randint(0, 3)))
    lines = ["digraph w {"]
    if graph:
        lines.append(f"    graph [{graph}]")
    if rng.random() < 0.5:
        lines.append('    node [shape=box, timeout=10s]')
    lines += ["    start [shape=Mdiamond]", "    exit [shape=Msquare]"]
    for node_id in ids:
        keys = [rng.choice(KEYS) for _ in range(rng.randint(0, 3))]
        prompt = "prompt=\"Work" + "".join(f" {{{{ {k} }}}}" for k in keys) + "\""
        parts = [p for p in (rng.choice(KINDS), prompt, rng.choice(EXTRA), rng.choice(EXTRA))
                 if p]
        lines.append(f"    {node_id} [{', '.join(parts)}]")
    targets = [*ids, "exit"]
    lines.append(f"    start -> {ids[0]}")
    for _ in range(rng.randint(0, 2 * count + 2)):
        source = rng.choice(["start", *ids])
        target = rng.choice([*targets, "stray"])
        attrs = rng.choice(CONDITIONS)
        lines.append(f"    {source} -> {target}" + (f" [{attrs}]" if attrs else ""))
    lines.append(f"    {ids[-1]} -> exit")
    lines.append("}")
    return "\n".join(lines) + "\n"


def benchmark_workflow() -> str:
    """benchmarks/validate_scaling.py's generated workflow of 300 nodes."""
    spec = importlib.util.spec_from_file_location(
        "validate_scaling", ROOT / "benchmarks" / "validate_scaling.py")
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source: str = module.generate_workflow(300)
    return source


def broken(source: str) -> str:
    """The benchmark's workflow with an unproven fact, a loop restart and a comparison
    with a value no choice has."""
    return (source.replace('facts="t3.n"', 'facts="t3.m"')
            .replace("g5 -> a5", "g5 -> a5 [loop_restart=true]")
            .replace('g7 -> s7 [condition="v7!=again"]', 'g7 -> s7 [condition="c7!=up"]'))


def cases() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in FILES:
        found["file-" + path.rsplit("/", 1)[-1].removesuffix(".dot")] = {"file": path}
    found["benchmark-300"] = {"benchmark": 300, "broken": False}
    found["benchmark-300-broken"] = {"benchmark": 300, "broken": True}
    rng = random.Random("validation")
    seen: set[str] = set()
    while len(seen) < GENERATED:
        source = generate(rng)
        if source not in seen:
            seen.add(source)
            # as lines, so that a diff of the corpus reads as one of the workflow
            found[f"generated-{len(seen):03}"] = {"lines": source.split("\n")}
    return found


def source_of(case: dict[str, Any]) -> tuple[str, str]:
    """(the workflow's text, the file name its diagnostics give)."""
    if "file" in case:
        return (ROOT / case["file"]).read_text(encoding="utf-8"), case["file"]
    if "benchmark" in case:
        source = benchmark_workflow()
        return (broken(source) if case["broken"] else source), "scaling.dot"
    return "\n".join(case["lines"]), "f.dot"


def output(case: dict[str, Any]) -> Any:
    source, file = source_of(case)
    workflow, diagnostics = check_source(source, file)
    assert workflow is not None, "the corpus is of workflows that parse"
    return [{k: v for k, v in dataclasses.asdict(d).items() if k != "file"}
            for d in diagnostics]
