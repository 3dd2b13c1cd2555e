"""Who may answer a human gate (SPEC §9.1): scripts, people, and in managed mode the node's
agent — only for gates marked delegatable=true."""

from __future__ import annotations

import json
from pathlib import Path

from engine_helpers import FakeClock, cli, reply, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.interviewer import ScriptedInterviewer
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.testing import flow

GATE = flow("""
approve [shape=hexagon, label="Ship it?", delegatable=%s]
ship    [type=script, script="true"]
rework  [type=script, script="true"]
denied  [type=script, script="true"]
start -> approve
approve -> ship   [label="[Y] Yes"]
approve -> rework [label="[N] No"]
approve -> denied [condition="outcome=failed"]
ship -> exit
rework -> exit
denied -> exit
""", goal="Ship")


def run_gate(tmp_path: Path, *, delegatable: bool, gates: str,
             gate_replies: list[str] | None = None,
             answers: dict[str, str] | None = None) -> tuple[RunOutcome, ReplayBackend]:
    flow = write_flow(tmp_path, GATE % ("true" if delegatable else "false"))
    backend = ReplayBackend({"approve": gate_replies or []})
    world = World(agent=backend, interviewer=ScriptedInterviewer(dict(answers or {})),
                  clock=FakeClock())
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path, gates=gates), world)
    return outcome, backend


def events(outcome: RunOutcome) -> list[dict[str, object]]:
    lines = (outcome.run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_managed_mode_lets_the_agent_answer_a_delegatable_gate(tmp_path: Path) -> None:
    outcome, backend = run_gate(tmp_path, delegatable=True, gates="managed",
                                gate_replies=[reply({"choice": "[N] No"})])
    assert outcome.path == ["start", "approve", "rework", "exit"]
    assert outcome.context["human.gate.answered_by"] == "agent"
    assert "Ship it?" in backend.prompts[0][1]
    answered = [e for e in events(outcome) if e["type"] == "gate_answered"]
    assert answered == [answered[0]] and answered[0]["by"] == "agent"
    assert answered[0]["label"] == "[N] No" and answered[0]["ts"]


def test_an_agent_answer_outside_the_choices_gets_a_correction_turn(tmp_path: Path) -> None:
    outcome, backend = run_gate(tmp_path, delegatable=True, gates="managed",
                                gate_replies=[reply({"choice": "ship it"}),
                                              reply({"choice": "[Y] Yes"})])
    assert outcome.path == ["start", "approve", "ship", "exit"]
    assert len(backend.prompts) == 2
    assert "ship it" in backend.prompts[1][1]  # the correction names what was wrong


def test_an_agent_that_never_picks_a_choice_fails_the_gate(tmp_path: Path) -> None:
    outcome, _ = run_gate(tmp_path, delegatable=True, gates="managed",
                          gate_replies=[reply({"choice": "maybe"})] * 3)
    assert outcome.path == ["start", "approve", "denied", "exit"]
    status = json.loads((outcome.run_dir / "approve" / "1" / "status.json").read_text())
    assert "not one of the choices" in status["failure_reason"]


def test_a_gate_that_is_not_delegatable_is_never_asked_of_the_agent(tmp_path: Path) -> None:
    outcome, backend = run_gate(tmp_path, delegatable=False, gates="managed",
                                gate_replies=[reply({"choice": "[Y] Yes"})])
    assert outcome.path == ["start", "approve", "denied", "exit"]
    assert backend.prompts == []
    status = json.loads((outcome.run_dir / "approve" / "1" / "status.json").read_text())
    assert "not delegatable" in status["failure_reason"]


def test_a_gate_that_is_not_delegatable_pauses_in_pause_mode(tmp_path: Path) -> None:
    outcome, backend = run_gate(tmp_path, delegatable=False, gates="pause",
                                gate_replies=[reply({"choice": "[Y] Yes"})])
    assert outcome.status == "paused"
    assert backend.prompts == []


def test_outside_managed_mode_even_a_delegatable_gate_is_not_asked_of_the_agent(
        tmp_path: Path) -> None:
    for gates, status in (("pause", "paused"), ("deny", "succeeded")):
        folder = tmp_path / gates
        folder.mkdir()
        outcome, backend = run_gate(folder, delegatable=True, gates=gates,
                                    gate_replies=[reply({"choice": "[Y] Yes"})])
        assert outcome.status == status
        assert backend.prompts == []


def test_a_scripted_answer_comes_before_the_agent(tmp_path: Path) -> None:
    outcome, backend = run_gate(tmp_path, delegatable=True, gates="managed",
                                gate_replies=[reply({"choice": "[N] No"})],
                                answers={"approve": "Y"})
    assert outcome.path == ["start", "approve", "ship", "exit"]
    assert outcome.context["human.gate.answered_by"] == "script"
    assert backend.prompts == []


def test_delegatable_must_be_true_or_false(tmp_path: Path) -> None:
    code, out, _ = cli("validate", write_flow(tmp_path, GATE % "maybe"))
    assert code == 1
    assert "delegatable='maybe' is not true or false" in out


def test_an_agent_reply_cannot_answer_a_gate_that_is_not_delegatable(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, GATE.replace("start -> approve", "start -> work -> approve")
                      .replace('delegatable=%s]', 'delegatable=false]\n    work [prompt="Work"]'))
    sneaky = reply({"human.gate.label": "[Y] Yes", "human.gate.answered_by": "person"},
                   preferred_label="[Y] Yes")
    backend = ReplayBackend({"work": [sneaky, reply(preferred_label="[Y] Yes")] * 2,
                             "approve": [reply({"choice": "[Y] Yes"})]})
    world = World(agent=backend, interviewer=ScriptedInterviewer({}), clock=FakeClock())
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path, gates="managed"), world)
    assert outcome.path == ["start", "work", "approve", "denied", "exit"]
    assert outcome.context.get("human.gate.label") != "[Y] Yes"
    assert [node for node, _ in backend.prompts].count("approve") == 0


def test_a_delegated_gate_asks_the_agent_profile_it_names(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, (GATE % "true").replace(
        'delegatable=true]', 'delegatable=true, agent="reviewer"]'))
    default = ReplayBackend({})
    reviewer = ReplayBackend({"approve": [reply({"choice": "[Y] Yes"})]})
    world = World(agent=default, agents={"reviewer": reviewer},
                  interviewer=ScriptedInterviewer({}), clock=FakeClock())
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path, gates="managed"), world)
    assert outcome.path == ["start", "approve", "ship", "exit"]
    assert default.prompts == [] and len(reviewer.prompts) == 1
