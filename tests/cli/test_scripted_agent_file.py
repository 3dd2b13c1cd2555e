"""`--agent scripted:FILE` (docs/agents.md "An offline agent"): an agent a person runs on
their own repositories without a model or Python — per node (or `node@folder`) the files each
turn writes and its reply's context_updates, from a TOML or JSON file."""

from __future__ import annotations

import json
from pathlib import Path

from engine_helpers import cli
from git_helpers import git, make_remote

from delivery.testing import flow

WRITES = flow("""
work [prompt="Write the notes", outputs="summary:text"]
look [shape=parallelogram, facts="seen",
      script="echo seen=$(cat notes.txt) >> \\"$DELIVERY_FACTS\\""]
start -> work -> look -> exit
""")

TURNS = """
[[work]]
files = { "notes.txt" = "hello" }
reply = "Wrote them."
context_updates = { summary = "notes written" }
"""


def _run(workspace: Path, dot: str, *more: str) -> tuple[int, dict[str, object], str]:
    (workspace / "flow.dot").write_text(dot)
    code, out, err = cli("run", "flow.dot", "--json", *more, cwd=workspace)
    return code, json.loads(out) if out.startswith("{") else {}, err


def test_a_scripted_file_writes_its_files_and_replies_with_its_context_updates(
        tmp_path: Path) -> None:
    (tmp_path / "turns.toml").write_text(TURNS)
    code, report, err = _run(tmp_path, WRITES, "--agent", "scripted:turns.toml")
    assert code == 0, err
    context = report["context"]
    assert isinstance(context, dict)
    assert (context["summary"], context["seen"]) == ("notes written", "hello")


def test_a_json_file_scripts_the_same_turns(tmp_path: Path) -> None:
    (tmp_path / "turns.json").write_text(json.dumps({"work": [
        {"files": {"notes.txt": "hi"}, "context_updates": {"summary": "done"}}]}))
    code, report, err = _run(tmp_path, WRITES, "--agent", "scripted:turns.json")
    assert code == 0, err
    assert isinstance(report["context"], dict) and report["context"]["seen"] == "hi"


def test_the_file_is_named_from_where_the_person_stands_not_the_workspace(
        tmp_path: Path) -> None:
    (tmp_path / "turns.toml").write_text(TURNS)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "flow.dot").write_text(WRITES)
    code, _, err = cli("run", workspace / "flow.dot", "--workspace", workspace,
                       "--agent", "scripted:turns.toml", cwd=tmp_path)
    assert code == 0, err
    assert (workspace / "notes.txt").read_text() == "hello"


def test_a_script_for_a_node_the_workflow_lacks_is_refused_with_the_nearest_name(
        tmp_path: Path) -> None:
    (tmp_path / "turns.toml").write_text(TURNS.replace("[[work]]", "[[wrok]]"))
    code, _, err = _run(tmp_path, WRITES, "--agent", "scripted:turns.toml")
    assert code == 2
    assert "scripts node 'wrok', which is no agent stage of this workflow" in err
    assert "did you mean 'work'?" in err
    assert not (tmp_path / "notes.txt").exists()


def test_a_file_that_is_not_toml_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "turns.toml").write_text("[[work]\nfiles = 1\n")
    code, _, err = _run(tmp_path, WRITES, "--agent", "scripted:turns.toml")
    assert code == 2
    assert "is not valid TOML" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_turn_with_an_unknown_field_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "turns.toml").write_text("[[work]]\nfile = { 'a' = 'b' }\n")
    code, _, err = _run(tmp_path, WRITES, "--agent", "scripted:turns.toml")
    assert code == 2
    assert "turn 1 of 'work': file: Extra inputs are not permitted" in err


def test_a_missing_file_is_refused_naming_the_path(tmp_path: Path) -> None:
    code, _, err = _run(tmp_path, WRITES, "--agent", "scripted:nowhere.toml")
    assert code == 2
    assert f"cannot read {tmp_path / 'nowhere.toml'}" in err


PER_FOLDER = flow("""
add [type=worktree_add]
work [prompt="Edit {{ folder.name }}", foreach="folders", outputs="summary:text"]
start -> add -> work -> exit
""", graph='inputs="ticket", folders="a,b"')


def test_node_at_folder_gives_one_folder_its_own_turns_in_its_worktree(
        tmp_path: Path) -> None:
    for name in ("a", "b"):
        make_remote(tmp_path, name)
    (tmp_path / "turns.toml").write_text(
        "[[work]]\nfiles = { 'f.txt' = 'every folder' }\ncontext_updates = { summary = 's' }\n"
        "[['work@b']]\nfiles = { 'f.txt' = 'b alone' }\ncontext_updates = { summary = 's' }\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    code, _, err = _run(workspace, PER_FOLDER, "--input", "ticket=T-1",
                        "--agent", f"scripted:{tmp_path / 'turns.toml'}",
                        "--cache", str(tmp_path / "cache"),
                        "--repo", f"a={tmp_path / 'a.git'}", "--repo", f"b={tmp_path / 'b.git'}")
    assert code == 0, err
    assert (workspace / "a" / "f.txt").read_text() == "every folder"
    assert (workspace / "b" / "f.txt").read_text() == "b alone"
    assert git(workspace / "b", "status", "--porcelain") == "?? f.txt"
