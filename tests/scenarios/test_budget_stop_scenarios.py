"""Route scenarios script the budget and the stop label (SPEC §12.1, §7.1): `budget` and
`tokens` (what each reply of an agent node reports) pause a run before the agent stage
that would pass the budget; `stop` sets the delivery:stop label once a node has run."""

from __future__ import annotations

import textwrap
from pathlib import Path

from engine_helpers import cli

from delivery.testing import flow

FLOW = flow("""
implement [prompt="Do {{ ticket }}"]
observe [type=probe, probe="pr"]
repair  [prompt="Repair"]
land    [type=merge]
start -> implement -> observe
observe -> repair [condition="pr.state=CI_FAILED"]
observe -> land   [condition="pr.state=WAITING"]
repair -> observe
land -> exit
""", goal="Ship", graph='inputs="ticket"')

DONE = '{"context_updates": {}}'


def scenario_file(tmp_path: Path, body: str) -> Path:
    (tmp_path / "flow.dot").write_text(FLOW, encoding="utf-8")
    path = tmp_path / "flow.test.toml"
    text = 'workflow = "flow.dot"\n' + textwrap.dedent(body).replace("DONE", DONE)
    path.write_text(text, encoding="utf-8")
    return path


BUDGET = """
[[scenario]]
name = "the repair would pass the budget"
inputs = { ticket = "T-1" }
folders = ["api"]
budget = "1000"
replies = { implement = ['DONE'], repair = ['DONE', 'DONE'] }
tokens = { implement = [400], repair = [400] }
probes = { observe = [ { "api.pr.state" = "CI_FAILED" }, { "api.pr.state" = "CI_FAILED" } ] }
expect = { status = "paused", path = ["start", "implement", "observe", "repair", "observe"], failure_reason = "budget: 800 of 1,000 tokens used" }
"""


def test_scripted_tokens_and_a_budget_pause_the_scenario_before_the_next_agent_stage(
        tmp_path: Path) -> None:
    code, out, err = cli("test", scenario_file(tmp_path, BUDGET))
    assert code == 0, out + err


def test_a_raised_scenario_budget_lets_the_run_go_on(tmp_path: Path) -> None:
    body = BUDGET.replace('budget = "1000"', 'budget = "5000"')
    code, out, _ = cli("test", scenario_file(tmp_path, body))
    assert code == 1  # the scenario expects the pause the larger budget does not make
    assert "path taken: start -> implement -> observe -> repair -> observe -> repair" in out


STOP = """
[[scenario]]
name = "a stop label set after the probe holds the merge"
inputs = { ticket = "T-2" }
folders = ["api"]
replies = { implement = ['DONE'] }
probes = { observe = [ { "api.pr.state" = "WAITING", "api.pr.ready" = true } ] }
stop = { after = "observe", on = "api", by = "maria" }
expect = { status = "paused", path = ["start", "implement", "observe"], visits = { land = 0 }, failure_reason = "set on api by maria" }
"""


def test_a_scripted_stop_label_pauses_the_scenario_at_the_next_boundary(
        tmp_path: Path) -> None:
    code, out, err = cli("test", scenario_file(tmp_path, STOP))
    assert code == 0, out + err


def test_a_stop_on_a_folder_the_scenario_does_not_have_names_its_line(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, STOP.replace('on = "api"', 'on = "docs"'))
    code, _, err = cli("test", path)
    assert code == 1
    assert f"{path}:9: " in err and "stop.on names 'docs'" in err


def test_tokens_for_a_node_that_is_not_an_agent_are_refused(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, BUDGET.replace("tokens = { implement", "tokens = { land"))
    code, _, err = cli("test", path)
    assert code == 1
    assert "tokens names node 'land', a merge node, not an agent or prompt node" in err
