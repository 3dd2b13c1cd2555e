"""Each folder's own local check command is in the run's context from its start, as
`<f>.check_command` (SPEC §8.1): from `--check F=CMD`, else the workspace's `delivery.toml`
profile (`[forge.local.checks]`). A folder without one has no such key, so a foreach
script runs `{{ folder.check_command | default(check_command) }}`: the run's input."""

from __future__ import annotations

import json
from pathlib import Path

from engine_helpers import cli

FLOW = """digraph t {
  graph [goal="Check every folder", inputs="check_command?", defaults="check_command='true'"]
  start [shape=Mdiamond]; exit [shape=Msquare]
  look [type=script, foreach="folders", facts="command",
        script="echo command={{ folder.check_command | default(check_command) }} \\
                >> $DELIVERY_FACTS"]
  start -> look -> exit
}
"""


def _workspace(tmp_path: Path, names: tuple[str, ...]) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "flow.dot").write_text(FLOW, encoding="utf-8")
    for name in names:
        (tmp_path / name).mkdir()
    return workspace


def _run(workspace: Path, *args: str) -> dict[str, object]:
    code, out, err = cli("run", workspace / "flow.dot", "--workspace", workspace, "--json",
                         *args)
    assert code == 0, out + err
    context: dict[str, object] = json.loads(out)["context"]
    return context


def test_a_check_given_on_the_command_line_is_the_folders_check_command(
        tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, ("web", "api"))
    context = _run(workspace, "--repo", f"web={tmp_path / 'web'}",
                   "--repo", f"api={tmp_path / 'api'}",
                   "--check", "web=python -m unittest", "--input", "check_command=make test")
    assert context["web.check_command"] == "python -m unittest"
    assert context["web.command"] == "python -m unittest"
    assert "api.check_command" not in context
    assert context["api.command"] == "make test"  # the run's input, run in api's folder


def test_the_profiles_check_is_the_folders_check_command_unless_the_command_line_says(
        tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, ("web", "api"))
    (workspace / "delivery.toml").write_text(
        '[forge.local.checks]\nweb = "npm test"\napi = "pytest -q"\n', encoding="utf-8")
    context = _run(workspace, "--repo", f"web={tmp_path / 'web'}",
                   "--repo", f"api={tmp_path / 'api'}", "--check", "api=tox")
    assert context["web.command"] == "npm test"
    assert context["api.command"] == "tox"
