"""benchmarks/template_reader.py measures what it says: its generated workflow is valid and
every template in it is one the light reader reads (else both modes would time Jinja2)."""

from __future__ import annotations

from types import ModuleType

from benchmark_helpers import load_benchmark

from delivery.lang.light_reads import light_reads
from delivery.lang.template_reads import _simple_reads
from delivery.validation.loader import check_source


def _benchmark() -> ModuleType:
    return load_benchmark("template_reader")


def test_the_generated_workflow_is_valid_and_read_by_the_light_reader() -> None:
    workflow, diagnostics = check_source(_benchmark().generate_workflow(40), "t.dot")
    assert workflow is not None
    assert [d.format_text() for d in diagnostics if d.severity == "error"] == []
    templates = [attr.text for node in workflow.nodes.values()
                 for attr in (node.prompt_attr, node.attrs.get("script")) if attr is not None]
    assert len(templates) >= 38
    for text in templates:
        assert _simple_reads(text) is None, text  # beyond plain `{{ x }}`: a reader's work
        assert light_reads(text) is not None, text
