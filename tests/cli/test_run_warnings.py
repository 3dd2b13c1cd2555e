"""`run` and `resume` print the validator's warnings on stderr before the first stage, so a
typo'd attribute is never silent (SPEC §12); with --json stdout holds only the object."""

from __future__ import annotations

import json
from pathlib import Path

from delivery.testing import flow
from delivery.testing.cli import invoke

TYPO = flow("""
check [shape=parallelogram, script="true", titel="say hello"]
start -> check -> exit
""", goal="Check")
WARNING = "warning[unknown_attribute] [check] unknown node attribute 'titel'"


def test_run_prints_the_warnings_on_stderr_and_keeps_json_stdout_clean(
        tmp_path: Path) -> None:
    flow = tmp_path / "flow.dot"
    flow.write_text(TYPO)
    code, out, err = invoke("run", flow, "--json", "--run-dir", tmp_path / "run",
                            cwd=tmp_path)
    assert code == 0
    assert json.loads(out)["status"] == "succeeded"
    assert f"{flow}:5:" in err and WARNING in err and "did you mean title=?" in err


def test_resume_prints_the_warnings_of_the_runs_workflow(tmp_path: Path) -> None:
    flow = tmp_path / "flow.dot"
    flow.write_text(TYPO)
    assert invoke("run", flow, "--run-dir", tmp_path / "run", cwd=tmp_path).code == 0
    code, _, err = invoke("resume", tmp_path / "run", cwd=tmp_path)
    assert code == 0
    assert WARNING in err


def test_a_workflow_without_warnings_prints_nothing_on_stderr(tmp_path: Path) -> None:
    flow = tmp_path / "flow.dot"
    flow.write_text(TYPO.replace(', titel="say hello"', ""))
    code, _, err = invoke("run", flow, "--run-dir", tmp_path / "run", cwd=tmp_path)
    assert (code, err) == (0, "")


def test_a_typo_of_an_attribute_that_routes_refuses_the_run_before_any_stage(
        tmp_path: Path) -> None:
    flow = tmp_path / "flow.dot"
    flow.write_text(TYPO.replace("start -> check -> exit",
                                 'start -> check\ncheck -> exit [conditon="outcome=success"]'))
    code, out, err = invoke("run", flow, "--run-dir", tmp_path / "run", cwd=tmp_path)
    assert (code, out) == (2, "")
    assert "error[attribute_typo]" in err and "did you mean condition=?" in err
    assert not (tmp_path / "run").exists()
