"""The Attractor corpus (SPEC §1: an Attractor file parses, validates and runs unchanged):
each file's expected validation and, with the replay agent, its expected path."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import FakeClock

from delivery.agents.replay import ReplayBackend
from delivery.engine.interviewer import ScriptedInterviewer
from delivery.engine.runner import RunRequest, World, start_run
from delivery.lang.stylesheet import model_settings
from delivery.validation.loader import check_file

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CASES: list[dict[str, Any]] = tomllib.loads((HERE / "cases.toml").read_text("utf-8"))["case"]
RUNS = [(case, index, run) for case in CASES for index, run in enumerate(case.get("run", []))]


def _reply(entry: str | dict[str, Any]) -> str:
    if isinstance(entry, str):
        return entry
    extra = {key: value for key, value in entry.items() if key != "context_updates"}
    obj = {"context_updates": entry.get("context_updates", {}), **extra}
    return f"Done.\n\n```json\n{json.dumps(obj)}\n```\n"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["file"])
def test_corpus_file_validates_as_expected(case: dict[str, Any]) -> None:
    if "xfail" in case:
        pytest.xfail(case["xfail"])
    _, diagnostics = check_file(HERE / case["file"])
    errors = {d.rule for d in diagnostics if d.severity == "error"}
    warnings = {d.rule for d in diagnostics if d.severity == "warning"}
    described = "\n".join(d.format_text() for d in diagnostics)
    if case["valid"]:
        assert errors == set(), described
    else:
        assert set(case["errors"]) <= errors, described
    assert set(case.get("warnings", [])) <= warnings, described


MODELS = [case for case in CASES if "models" in case]


@pytest.mark.parametrize("case", MODELS, ids=lambda case: case["file"])
def test_corpus_stylesheet_chooses_each_nodes_model(case: dict[str, Any]) -> None:
    workflow, diagnostics = check_file(HERE / case["file"])
    assert workflow is not None, diagnostics
    for node_id, (model, provider, effort) in case["models"].items():
        chosen = model_settings(workflow, workflow.nodes[node_id])
        assert (chosen.model, chosen.provider, chosen.reasoning_effort) == (
            model, provider, effort), node_id


@pytest.mark.parametrize(("case", "index", "run"), RUNS,
                         ids=[f"{case['file']}#{index}" for case, index, _ in RUNS])
def test_corpus_file_runs_its_expected_path(case: dict[str, Any], index: int,
                                            run: dict[str, Any], tmp_path: Path) -> None:
    if "xfail" in run:
        pytest.xfail(run["xfail"])
    for name in run.get("files", []):
        (tmp_path / name).write_text("", encoding="utf-8")
    for name in run.get("copies", []):
        shutil.copyfile(HERE / name, tmp_path / name)
    replies = {node: [_reply(entry) for entry in entries]
               for node, entries in run.get("replies", {}).items()}
    backend = ReplayBackend(replies)
    world = World(agent=backend, interviewer=ScriptedInterviewer(run.get("answers", {})),
                  clock=FakeClock())
    request = RunRequest(workflow=HERE / case["file"], goal=run.get("goal"),
                         inputs=run.get("inputs", {}), workspace=tmp_path,
                         run_dir=tmp_path / "run")
    outcome = start_run(request, world)
    assert (outcome.path, outcome.status) == (run["path"], run["status"]), \
        outcome.failure_reason
    if "outcome" in run:
        assert outcome.context["outcome"] == run["outcome"]
    for key, value in run.get("context", {}).items():
        assert outcome.context[key] == value, (key, outcome.context[key])
    for text in run.get("failure", []):
        assert text in outcome.failure_reason, outcome.failure_reason
    for node, text in run.get("prompts", {}).items():
        assert any(text in message for node_id, message in backend.prompts
                   if node_id == node), text
    if "difference" in run:
        attractor = (run["attractor_path"], run.get("attractor_status", "succeeded"))
        assert attractor != (run["path"], run["status"])
        table = (ROOT / "docs" / "attractor.md").read_text(encoding="utf-8")
        assert f"| {run['difference']} |" in table, run["difference"]
