"""`delivery run | inspect | verify` (SPEC §12) on real runs: in-process through
`delivery.cli.main.main`, and a few through the installed `delivery` executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine_helpers import cli, reply, write_flow

from delivery.testing import flow

DELIVERY = Path(sys.executable).parent / "delivery"

FLOW = flow("""
review [type=prompt, prompt="Review {{ ticket }}", outputs="verdict:choice"]
check [shape=parallelogram, facts="checked",
       script="echo checked={{ verdict }} >> \\"$DELIVERY_FACTS\\"; test {{ verdict }} = pass"]
start -> review
review -> check [condition="verdict=pass || verdict=fail"]
review -> exit [condition="outcome=failed"]
check -> exit [condition="outcome=succeeded"]
check -> exit [condition="outcome=failed"]
""", goal="Ship it", graph='inputs="ticket"')

RUN_KEYS = {"run_id", "status", "failure_reason", "path", "context", "run_dir", "usage"}


def _setup(tmp_path: Path, verdict: str) -> tuple[Path, Path]:
    workflow = write_flow(tmp_path, FLOW)
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"review": [reply({"verdict": verdict})]}), encoding="utf-8")
    return workflow, replies


def _run_json(tmp_path: Path, verdict: str) -> tuple[int, dict[str, object], str]:
    workflow, replies = _setup(tmp_path, verdict)
    code, out, err = cli("run", workflow, "--input", "ticket=T-1", "--agent",
                         f"replay:{replies}", "--workspace", tmp_path, "--json")
    return code, json.loads(out), err


def test_run_json_prints_one_object_and_exits_0_on_success(tmp_path: Path) -> None:
    code, report, _ = _run_json(tmp_path, "pass")
    assert code == 0
    assert set(report) == RUN_KEYS
    assert report["status"] == "succeeded"
    assert report["failure_reason"] == ""
    assert report["path"] == ["start", "review", "check", "exit"]
    context = report["context"]
    assert isinstance(context, dict)
    assert context["verdict"] == "pass" and context["checked"] == "pass"
    assert context["inputs.ticket"] == "T-1"
    run_dir = Path(str(report["run_dir"]))
    assert run_dir.is_dir()
    assert run_dir.parent == (tmp_path / ".delivery" / "runs").resolve()
    assert run_dir.name == report["run_id"]


def test_run_json_exits_1_with_the_reason_on_a_failed_run(tmp_path: Path) -> None:
    code, report, _ = _run_json(tmp_path, "fail")
    assert code == 1
    assert report["status"] == "failed"
    assert "exited with code 1" in str(report["failure_reason"])
    assert report["path"] == ["start", "review", "check", "exit"]


def test_run_dir_option_names_the_run_directory(tmp_path: Path) -> None:
    workflow, replies = _setup(tmp_path, "pass")
    chosen = tmp_path / "my-run"
    code, out, _ = cli("run", workflow, "--input", "ticket=T", "--agent", f"replay:{replies}",
                       "--workspace", tmp_path, "--run-dir", chosen, "--json")
    assert code == 0
    assert Path(json.loads(out)["run_dir"]) == chosen.resolve()
    assert (chosen / "checkpoint.json").is_file()


def test_run_text_report_names_status_path_and_directory(tmp_path: Path) -> None:
    workflow, replies = _setup(tmp_path, "fail")
    code, out, _ = cli("run", workflow, "--input", "ticket=T", "--agent", f"replay:{replies}",
                       "--workspace", tmp_path)
    assert code == 1
    assert ": failed" in out
    assert "start -> review -> check -> exit" in out
    assert "failure:" in out


def test_answer_option_answers_a_human_gate(tmp_path: Path) -> None:
    dot = flow("""
    gate [shape=hexagon, label="Ship?"]
    no [shape=parallelogram, script="exit 1"]
    start -> gate
    gate -> exit [label="[Y] Yes"]
    gate -> no [label="[N] No"]
    no -> exit
    """)
    workflow = write_flow(tmp_path, dot)
    replies = tmp_path / "replies.json"
    replies.write_text("{}", encoding="utf-8")
    code, out, _ = cli("run", workflow, "--agent", f"replay:{replies}", "--workspace",
                       tmp_path, "--answer", "gate=Y", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["path"] == ["start", "gate", "exit"]
    assert report["context"]["human.gate.label"] == "[Y] Yes"


def test_inspect_json_reports_path_outcomes_stages_and_context(tmp_path: Path) -> None:
    _, report, _ = _run_json(tmp_path, "fail")
    code, out, err = cli("inspect", str(report["run_dir"]), "--json")
    assert code == 0, err
    inspected = json.loads(out)
    assert inspected["run_id"] == report["run_id"]
    assert inspected["status"] == "failed"
    assert inspected["path"] == report["path"]
    assert inspected["outcomes"]["review"] == "succeeded"
    assert inspected["outcomes"]["check"] == "failed"
    assert inspected["context"] == report["context"]
    stages = {(s["node"], s["attempt"]): s for s in inspected["stages"]}
    assert stages[("check", 1)]["outcome"] == "failed"
    assert "code 1" in stages[("check", 1)]["failure_reason"]


def test_inspect_text_lists_stages_and_context(tmp_path: Path) -> None:
    _, report, _ = _run_json(tmp_path, "pass")
    code, out, _ = cli("inspect", str(report["run_dir"]))
    assert code == 0
    assert f"run {report['run_id']}: succeeded" in out
    assert "review#1: succeeded" in out
    assert "verdict = pass" in out


def test_inspect_finds_a_run_by_id_from_the_workspace(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _, report, _ = _run_json(tmp_path, "pass")
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("inspect", str(report["run_id"]), "--json")
    assert code == 0
    assert json.loads(out)["run_id"] == report["run_id"]


def test_inspect_of_an_unknown_run_is_refused_with_exit_2(tmp_path: Path) -> None:
    code, out, err = cli("inspect", tmp_path / "nothing-here")
    assert code == 2
    assert "nothing-here" in err
    assert "Traceback" not in out + err


def test_verify_exits_0_on_an_intact_run(tmp_path: Path) -> None:
    _, report, _ = _run_json(tmp_path, "pass")
    code, out, _ = cli("verify", str(report["run_dir"]))
    assert code == 0
    assert "intact" in out


def test_verify_exits_1_when_an_event_was_altered(tmp_path: Path) -> None:
    _, report, _ = _run_json(tmp_path, "pass")
    events = Path(str(report["run_dir"])) / "events.jsonl"
    lines = events.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) > 3
    finished = next(i for i, line in enumerate(lines) if '"stage_finished"' in line)
    assert '"succeeded"' in lines[finished]
    lines[finished] = lines[finished].replace('"succeeded"', '"failed"', 1)
    events.write_text("".join(lines), encoding="utf-8")
    code, out, _ = cli("verify", str(report["run_dir"]))
    assert code == 1
    assert "BROKEN" in out


def test_resume_of_a_finished_run_reports_it_again(tmp_path: Path) -> None:
    _, report, _ = _run_json(tmp_path, "pass")
    code, out, _ = cli("resume", str(report["run_dir"]), "--json")
    assert code == 0
    again = json.loads(out)
    assert again["run_id"] == report["run_id"]
    assert again["status"] == "succeeded"
    assert again["path"] == report["path"]


# -- the real executable --------------------------------------------------------------


def _exe(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([str(DELIVERY), *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.slow
def test_the_delivery_executable_runs_inspects_and_verifies_a_run(tmp_path: Path) -> None:
    assert DELIVERY.is_file()
    workflow, replies = _setup(tmp_path, "pass")
    ran = _exe("run", workflow, "--input", "ticket=T-1", "--agent", f"replay:{replies}",
               "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["status"] == "succeeded"
    assert Path(report["run_dir"]).parent == (tmp_path / ".delivery" / "runs").resolve()
    inspected = _exe("inspect", report["run_id"], "--json", cwd=tmp_path)
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["context"]["verdict"] == "pass"
    verified = _exe("verify", report["run_id"], cwd=tmp_path)
    assert verified.returncode == 0
    assert "intact" in verified.stdout


@pytest.mark.slow
def test_the_delivery_executable_exits_1_on_a_failed_run(tmp_path: Path) -> None:
    workflow, replies = _setup(tmp_path, "fail")
    ran = _exe("run", workflow, "--input", "ticket=T-1", "--agent", f"replay:{replies}",
               "--json", cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert json.loads(ran.stdout)["status"] == "failed"


def test_the_delivery_executable_refuses_a_missing_input_with_exit_2(tmp_path: Path) -> None:
    workflow, replies = _setup(tmp_path, "pass")
    ran = _exe("run", workflow, "--agent", f"replay:{replies}", cwd=tmp_path)
    assert ran.returncode == 2
    assert "ticket" in ran.stderr
    assert "Traceback" not in ran.stderr + ran.stdout
    assert ran.stdout == ""


def test_run_of_a_workflow_that_is_not_utf8_is_refused_with_its_position(tmp_path: Path) -> None:
    flow = tmp_path / "flow.dot"
    flow.write_bytes(b"digraph g {\n  a \xff\n}\n")
    code, out, err = cli("run", flow)
    assert code == 2
    assert "flow.dot:2:5: expected UTF-8 text, found the byte 0xff" in err
    assert "Traceback" not in out + err
