"""`--answer GATE=LABEL` checked against the gate before the run (SPEC §12, issue 39): a
label that is not one of the gate's choices, or a GATE that is no human gate of the
workflow, is refused (exit 2, one line listing what may be given) — before, the run
started and the gate "got no answer and was denied". Through the `delivery` executable,
stderr in a file."""

from __future__ import annotations

from pathlib import Path

import pytest
from logged_cli_helpers import delivery

from delivery.testing import flow

GATED = flow("""
approve [shape=hexagon, label="Ship it?"]
build [type=script, script="echo built > built.txt"]
start -> approve
approve -> build [label="[Y] Yes"]
approve -> exit [label="[N] No"]
build -> exit
""", name="Gated")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "gated.dot").write_text(GATED, encoding="utf-8")
    return tmp_path


def test_a_label_that_is_no_choice_of_the_gate_is_refused_before_the_run(
        workspace: Path) -> None:
    code, stdout, log = delivery(workspace, "run", "gated.dot", "--answer", "approve=maybe",
                                 "--run-dir", workspace / "run")
    assert (code, stdout) == (2, "")
    assert log == ("delivery run: refused: --answer approve=maybe: is not one of the "
                   "choices of human gate 'approve' — answer with one of: [Y] Yes, [N] No "
                   "(a label, or its key)\n")
    assert not (workspace / "run").exists() and not (workspace / "built.txt").exists()


def test_a_gate_the_workflow_does_not_have_is_refused_naming_its_gates(
        workspace: Path) -> None:
    code, stdout, log = delivery(workspace, "run", "gated.dot", "--answer", "aprove=yes",
                                 "--run-dir", workspace / "run")
    assert (code, stdout) == (2, "")
    assert log == ("delivery run: refused: --answer aprove=yes: names no human gate of the "
                   "workflow — the human gates are: approve\n")
    assert not (workspace / "run").exists()


def test_a_choice_given_by_its_key_or_label_runs(workspace: Path) -> None:
    for given, run in (("approve=y", "by-key"), ("approve=yes", "by-label")):
        code, stdout, log = delivery(workspace, "run", "gated.dot", "--answer", given,
                                     "--run-dir", workspace / run, "--quiet")
        assert code == 0, log
        assert "succeeded" in stdout.splitlines()[0]


def test_a_resume_answer_that_is_no_choice_is_refused_and_the_run_stays_paused(
        workspace: Path) -> None:
    code, _, _ = delivery(workspace, "run", "gated.dot", "--gates", "pause", "--run-dir",
                          workspace / "run", "--quiet")
    assert code == 3
    code, stdout, log = delivery(workspace, "resume", workspace / "run", "--answer",
                                 "approve=later")
    assert (code, stdout) == (2, "")
    assert log == ("delivery resume: refused: --answer approve=later: is not one of the "
                   "choices of human gate 'approve' — answer with one of: [Y] Yes, [N] No "
                   "(a label, or its key)\n")
    code, stdout, log = delivery(workspace, "resume", workspace / "run", "--answer",
                                 "approve=Yes", "--quiet")
    assert code == 0, log
    assert (workspace / "built.txt").exists()
