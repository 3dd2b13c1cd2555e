"""`delivery graph`: Mermaid and DOT drawings of a workflow, a run's path highlighted."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from engine_helpers import cli, reply, run_flow, write_flow

from delivery.testing import flow

FLOW = flow("""
check [type=probe, label="Look at the PRs"]
plan  [prompt="Plan it", label="Plan \\"quoted\\" | piped"]
start -> plan -> exit
plan -> check [condition="outcome=failed"]
check -> exit
""", goal="Ship")


def test_mermaid_is_printed_without_an_output_file(tmp_path: Path) -> None:
    code, out, _ = cli("graph", write_flow(tmp_path, FLOW))
    assert code == 0
    assert out.startswith("flowchart TD\n")
    assert '[("Look at the PRs (check)")]' in out  # a probe is drawn as a cylinder
    assert "#quot;quoted#quot; #124; piped" in out  # quotes and pipes cannot end the label
    assert "classDef visited" not in out


def test_run_path_nodes_and_edges_are_highlighted(tmp_path: Path) -> None:
    dot = flow("""
    plan  [prompt="Plan it"]
    other [prompt="Never runs"]
    start -> plan -> exit
    plan -> other [condition="outcome=failed"]
    other -> exit
    """, goal="Ship")
    ran = run_flow(tmp_path, dot, replies={"plan": [reply()]})
    assert ran.status == "succeeded"
    code, out, _ = cli("graph", tmp_path / "flow.dot", "--run", ran.outcome.run_dir)
    assert code == 0
    lines = out.splitlines()
    mermaid_id = {line.split('"')[1]: re.match(r"\s*(n\d+)", line).group(1)  # type: ignore[union-attr]
                  for line in lines if line.startswith("    n") and "-->" not in line}
    visited_line = next(line for line in lines if line.startswith("    class "))
    assert visited_line.split()[1].split(",") == [mermaid_id[n] for n in ("start", "plan", "exit")]
    styled = [line.split()[1] for line in lines if line.strip().startswith("linkStyle")]
    assert styled == ["0", "1"]  # start -> plan, plan -> exit; not the failure edges


def test_dot_output_keeps_resolved_shapes(tmp_path: Path) -> None:
    target = tmp_path / "out.dot"
    code, _, err = cli("graph", write_flow(tmp_path, FLOW), "-o", target)
    assert code == 0, err
    text = target.read_text(encoding="utf-8")
    assert '"check" [shape=cds' in text
    assert '"start" -> "plan";' in text


def test_svg_without_graphviz_is_refused_with_the_way_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, _, err = cli("graph", write_flow(tmp_path, FLOW), "-o", tmp_path / "out.svg")
    assert code == 2
    assert "Graphviz" in err and ".mmd" in err
    assert not (tmp_path / "out.svg").exists()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_svg_is_drawn_by_graphviz(tmp_path: Path) -> None:
    target = tmp_path / "out.svg"
    code, _, err = cli("graph", write_flow(tmp_path, FLOW), "-o", target)
    assert code == 0, err
    assert "<svg" in target.read_text(encoding="utf-8")


def test_unknown_output_format_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = cli("graph", write_flow(tmp_path, FLOW), "-o", tmp_path / "out.pdf")
    assert code == 2
    assert ".svg, .png, .dot or .mmd" in err


def test_unparsable_workflow_reports_its_position(tmp_path: Path) -> None:
    code, _, err = cli("graph", write_flow(tmp_path, "digraph g { a -> }"))
    assert code == 1
    assert "flow.dot:1:" in err


def test_workflow_that_is_not_utf8_is_refused_without_a_traceback(tmp_path: Path) -> None:
    flow = tmp_path / "flow.dot"
    flow.write_bytes(b"digraph g { a \xff }")
    code, _, err = cli("graph", flow)
    assert code == 2
    assert "flow.dot: cannot read" in err
    assert "Traceback" not in err


def test_run_that_is_not_found_is_refused_naming_it(tmp_path: Path) -> None:
    code, _, err = cli("graph", write_flow(tmp_path, FLOW), "--run", "no-such-run")
    assert code == 2
    assert "run 'no-such-run': is neither a run directory nor a run id" in err
