"""Route scenarios of foreach stages (SPEC §8.1, §12.1): a foreach script's visits are
scripted per folder (`"checks@api"`, else the node's list with a cursor per folder, as
replies are), and `expect.visits` counts one folder's runs of a node (`"fix@api"`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from engine_helpers import cli

from delivery.testing import flow

FLOW = flow("""
implement [prompt="Change {{ folder.name }}", outputs="summary:text", foreach="folders"]
checks [type=script, foreach="folders", script="make test", facts="tests.count"]
fix [prompt="Fix {{ folder.name }}", outputs="summary:text", foreach="folders",
     only="folder.checks.failed=true"]
plain [type=script, script="true"]
start -> implement -> checks
checks -> plain [condition="outcome=succeeded"]
checks -> fix [condition="outcome!=succeeded"]
fix -> checks
plain -> exit
""", goal="Ship")

DONE = '{"context_updates": {"summary": "done"}}'


def scenario_file(tmp_path: Path, body: str) -> Path:
    (tmp_path / "flow.dot").write_text(FLOW, encoding="utf-8")
    path = tmp_path / "flow.test.toml"
    path.write_text('workflow = "flow.dot"\n' + textwrap.dedent(body).replace("DONE", DONE),
                    encoding="utf-8")
    return path


def run(tmp_path: Path, body: str) -> tuple[int, str]:
    code, out, err = cli("test", scenario_file(tmp_path, body))
    return code, out + err


def test_a_folders_own_script_visits_are_played_for_it_and_the_nodes_for_the_others(
        tmp_path: Path) -> None:
    code, out = run(tmp_path, """
        [[scenario]]
        name = "api's checks fail once"
        folders = ["api", "web", "cli"]
        replies = { implement = ['DONE'], fix = ['DONE'] }
        scripts = { "checks@api" = [ { exit = 1 }, { exit = 0, facts = { "tests.count" = 3 } } ], checks = [ { exit = 0 }, { exit = 0 } ], plain = [ { exit = 0 } ] }
        expect = { status = "succeeded", path = ["start", "implement", "checks", "fix", "checks", "plain", "exit"], visits = { "fix@api" = 1, "fix@web" = 0, "checks@api" = 2, "checks@web" = 2, "implement@cli" = 1 }, context = { "checks.failed_folders" = "[]", "api.tests.count" = "3" } }
        """)
    assert code == 0, out


def test_a_nodes_script_is_played_for_each_folder_from_its_own_first_visit(
        tmp_path: Path) -> None:
    code, out = run(tmp_path, """
        [[scenario]]
        name = "every folder fails once"
        folders = ["api", "web"]
        replies = { implement = ['DONE'], fix = ['DONE'] }
        scripts = { checks = [ { exit = 1 }, { exit = 0 } ], plain = [ { exit = 0 } ] }
        expect = { status = "succeeded", visits = { fix = 1, "fix@api" = 1, "fix@web" = 1 } }
        """)
    assert code == 0, out


def test_a_wrong_per_folder_count_is_reported_with_the_folders_runs(tmp_path: Path) -> None:
    code, out = run(tmp_path, """
        [[scenario]]
        name = "api's checks fail once"
        folders = ["api", "web"]
        replies = { implement = ['DONE'], fix = ['DONE'] }
        scripts = { "checks@api" = [ { exit = 1 }, { exit = 0 } ], checks = [ { exit = 0 }, { exit = 0 } ], plain = [ { exit = 0 } ] }
        expect = { visits = { "fix@web" = 1 } }
        """)
    assert code == 1
    assert "visits of fix@web: expected 1, got 0" in out


def test_a_folder_running_out_of_its_scripted_visits_is_named(tmp_path: Path) -> None:
    code, out = run(tmp_path, """
        [[scenario]]
        name = "api's checks never pass"
        folders = ["api", "web"]
        replies = { implement = ['DONE'], fix = ['DONE', 'DONE'] }
        scripts = { "checks@api" = [ { exit = 1 } ], checks = [ { exit = 0 }, { exit = 0 } ], plain = [ { exit = 0 } ] }
        """)
    assert code == 1
    assert "node 'checks@api' ran out of scripted visits (visit 2 had none" in out


def test_a_folder_key_for_a_folder_the_scenario_does_not_have_names_its_line(
        tmp_path: Path) -> None:
    code, out = run(tmp_path, """
        [[scenario]]
        name = "a typo"
        folders = ["api", "web"]
        replies = { implement = ['DONE'] }
        scripts = { "checks@wbe" = [ { exit = 0 } ] }
        """)
    assert code == 1
    assert "flow.test.toml:7:" in out
    assert "scripts names folder 'wbe' (checks@wbe), which is not in the scenario's " \
           "folders" in out


def test_a_folder_key_for_a_node_run_once_for_all_folders_is_refused(tmp_path: Path) -> None:
    code, out = run(tmp_path, """
        [[scenario]]
        name = "plain is not per folder"
        folders = ["api", "web"]
        scripts = { "plain@api" = [ { exit = 0 } ] }
        """)
    assert code == 1
    assert "scripts names 'plain@api', but node 'plain' does not run per folder" in out
