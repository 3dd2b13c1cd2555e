"""Hostile workflow text (SPEC §14): deep nesting, huge strings, a byte order mark. Each
gets a one-line error with its position, never a traceback, a hang or unbounded memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from bounded import run_cli, run_python

from delivery.errors import ConditionSyntaxError
from delivery.lang.conditions import MAX_CONDITION_DEPTH, parse_condition
from delivery.lang.parser import parse_dot
from delivery.testing import flow
from delivery.validation.loader import MAX_WORKFLOW_BYTES, check_file, check_source


def _flow(condition: str = "outcome=succeeded", label: str = '"Work"') -> str:
    return flow(f"""
        work [prompt="Do it", label={label}]
        start -> work
        work -> exit [condition="{condition}"]
    """, goal=None)


@pytest.mark.parametrize("condition", ["!" * 10_000 + "outcome", "(" * 10_000 + "outcome" +
                                       ")" * 10_000], ids=["not", "parentheses"])
def test_condition_nested_10000_deep_is_a_syntax_diagnostic_not_a_recursion_error(
        condition: str) -> None:
    _, diagnostics = check_source(_flow(condition), "deep.dot")
    (diagnostic,) = [d for d in diagnostics if d.severity == "error"]
    assert diagnostic.rule == "condition_syntax"
    assert f"at most {MAX_CONDITION_DEPTH} nested" in diagnostic.message
    assert len(diagnostic.message) < 300  # the condition is shown cut short
    # at the first "!" or "(" over the limit: the value starts at column 28
    assert (diagnostic.line, diagnostic.column) == (6, 28 + MAX_CONDITION_DEPTH)


def test_condition_nesting_up_to_the_limit_still_parses() -> None:
    depth = MAX_CONDITION_DEPTH
    condition = parse_condition("(" * (depth - 1) + "!ok" + ")" * (depth - 1))
    assert condition.evaluate({"ok": "true"}) is False
    with pytest.raises(ConditionSyntaxError):
        parse_condition("!" * (depth + 1) + "ok")


@pytest.mark.parametrize("depth", [400, 10_000])
def test_deeply_nested_subgraphs_are_a_syntax_error_at_the_subgraph_too_deep(depth: int) -> None:
    source = "digraph g {\n" + "subgraph s {\n" * depth + "}\n" * depth + "}\n"
    _, diagnostics = check_source(source, "nested.dot")
    (diagnostic,) = diagnostics
    assert diagnostic.rule == "syntax"
    assert "at most 100 nested subgraphs" in diagnostic.message
    assert (diagnostic.line, diagnostic.column) == (102, 1)


def test_subgraphs_100_deep_still_parse() -> None:
    source = "digraph g {\n" + "subgraph s {\n" * 100 + "a\n" + "}\n" * 100 + "}\n"
    assert parse_dot(source).body


@pytest.mark.slow
def test_lexer_memory_stays_linear_for_a_20_mb_quoted_attribute(tmp_path: Path) -> None:
    # ~230 bytes per character before: 20 MB took 4.6 GB. The child may use 1 GiB in all
    # (the interpreter and its imports included). The workflow size limit is raised for it.
    path = tmp_path / "big.dot"
    path.write_text(_flow(label='"' + "x" * 10_000_000 + '\\"' * 5_000_000 + '"'),
                    encoding="utf-8")
    script = ("import sys\nimport delivery.validation.loader as loader\n"
              "loader.MAX_WORKFLOW_BYTES = 1 << 30\n"
              "from delivery.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
    done = run_python(script, "validate", path, timeout=60)
    assert done.code == 0, done.stderr[-2000:]
    assert "big.dot: ok" in done.stdout


@pytest.mark.slow
def test_workflow_file_over_the_size_limit_is_refused_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "huge.dot"
    path.write_text(_flow(label='"' + "x" * MAX_WORKFLOW_BYTES + '"'), encoding="utf-8")
    _, diagnostics = check_file(path)
    (diagnostic,) = diagnostics
    assert diagnostic.rule == "syntax" and (diagnostic.line, diagnostic.column) == (1, 1)
    assert "at most 8388608 bytes" in diagnostic.message
    done = run_cli("run", path, "--goal", "g")
    assert done.code == 2 and done.one_line_error, done.stderr
    assert "huge.dot:1:1" in done.stderr


def test_utf8_bom_at_the_start_of_a_workflow_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.dot"
    path.write_bytes(b"\xef\xbb\xbf" + _flow().encode())
    workflow, diagnostics = check_file(path)
    assert workflow is not None and [d for d in diagnostics if d.severity == "error"] == []
    assert parse_dot("\ufeff" + _flow()).name == "F"
