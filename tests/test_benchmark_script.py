"""The scaling benchmark's generator stays valid, so the benchmark cannot rot."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from benchmark_helpers import load_benchmark

from delivery.lang.model import NodeType
from delivery.validation.loader import check_source

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "validate_scaling.py"


def validate_scaling() -> ModuleType:
    return load_benchmark("validate_scaling")


def test_generated_workflow_validates_without_errors() -> None:
    source = validate_scaling().generate_workflow(50)
    workflow, diagnostics = check_source(source, "scaling.dot")
    assert workflow is not None
    assert [d.format_text() for d in diagnostics if d.severity == "error"] == []
    assert 40 <= len(workflow.nodes) <= 50
    kinds = {node.type for node in workflow.nodes.values()}
    assert {NodeType.AGENT, NodeType.PROMPT, NodeType.CONDITIONAL, NodeType.SCRIPT} <= kinds
    assert any(edge.target == edge.source or workflow.nodes[edge.target].line <
               workflow.nodes[edge.source].line for edge in workflow.edges)  # a back edge


def test_breaking_a_generated_read_is_caught() -> None:
    # v7 is declared by a later stage: reading it earlier is an error; v30 is declared by
    # none, and agents without outputs= run before the read: availability unproven
    source = validate_scaling().generate_workflow(50).replace("{{ v3 }}", "{{ v7 }}", 1)
    _, diagnostics = check_source(source, "scaling.dot")
    assert [d.rule for d in diagnostics if d.severity == "error"] == ["availability"]
    source = validate_scaling().generate_workflow(50).replace("{{ v3 }}", "{{ v30 }}", 1)
    _, diagnostics = check_source(source, "scaling.dot")
    assert [d.rule for d in diagnostics] == ["availability_unproven"]


def test_measure_reports_sizes_and_times() -> None:
    nodes, edges, parse, check, chars = validate_scaling().measure(30, repeat=1)
    assert nodes >= 25 and edges > nodes and chars > 0
    assert parse > 0 and check > 0
