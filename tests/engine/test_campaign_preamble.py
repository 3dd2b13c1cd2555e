"""Found by the campaign benchmark (benchmarks/campaign.py, issue 36): a plain stage of a
run over many folders is told about the run in a preamble of the 40 newest context values
(delivery/engine/preamble.py); the per-folder check commands written at the run's start
(`<f>.check_command`) filled it, and the run's own inputs (the ticket) were left out:
the inputs are always listed now."""

from __future__ import annotations

from pathlib import Path

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run
from delivery.testing.fleet import TICKET, Fleet
from delivery.testing.flows import flow

FLOW = flow("""
    graph [inputs="ticket"]
    scope [type=prompt, prompt="Scope the ticket.", outputs="scope:text"]
    start -> scope -> exit
""")


def test_a_plain_stage_of_a_run_over_fifty_folders_is_still_told_the_ticket(
        tmp_path: Path) -> None:
    fleet = Fleet.of(50)
    repos = fleet.local_remotes(tmp_path)
    (tmp_path / "ws").mkdir()
    (tmp_path / "flow.dot").write_text(FLOW, encoding="utf-8")
    agent = ReplayBackend({"scope": ['{"context_updates": {"scope": "one change"}}']})
    outcome = start_run(RunRequest(
        workflow=tmp_path / "flow.dot", goal="g", inputs={"ticket": TICKET},
        workspace=tmp_path / "ws", run_dir=tmp_path / "run", repos=repos, forge="local",
        checks=fleet.local_checks(tmp_path, tmp_path / "ws")), World(agent=agent))
    assert outcome.status == "succeeded", outcome.failure_reason
    [(_, prompt)] = agent.prompts
    assert f"- ticket: {TICKET}" in prompt
