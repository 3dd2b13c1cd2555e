"""`foreach` stages through the command line (SPEC §8.1, §10): `delivery validate --json`
names the foreach rules, and `folder` is refused as a folder name at run time as in
`folders=`."""

from __future__ import annotations

import json
from pathlib import Path

from engine_helpers import cli, write_flow
from git_helpers import make_remote

from delivery.testing import flow

MISUSED = flow("""
implement [prompt="Change {{ folder.name }}", outputs="summary:text", foreach="folders"]
ship [type=publish, foreach="folders"]
notes [prompt="Release notes: {{ summary }}", only="folder.pr.state=MERGED"]
start -> implement -> ship -> notes
notes -> exit [condition="folder.outcome=succeeded"]
notes -> exit
""")


def test_validate_json_names_each_foreach_rule(tmp_path: Path) -> None:
    path = write_flow(tmp_path, MISUSED)
    code, out, _ = cli("validate", path, "--format", "json")
    assert code == 1
    found = {(d["rule"], d["node"] or d["edge"]) for d in json.loads(out)["diagnostics"]
             if d["severity"] == "error"}
    assert found == {("foreach_type", "ship"), ("only_without_foreach", "notes"),
                     ("per_folder_read", "notes"),
                     ("folder_outside_foreach", "notes -> exit")}


def test_a_repo_folder_named_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    path = write_flow(tmp_path, flow("""
        add [type=worktree_add]
        start -> add -> exit
        """))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    code, out, err = cli("run", path, "--cache", tmp_path / "cache", "--workspace",
                         workspace, "--repo", f"folder={remote}")
    assert (code, out) == (2, "")
    assert f"--repo folder={remote}" in err and "reserved" in err and "foreach" in err
    assert len(err.strip().splitlines()) == 1
    assert list(workspace.iterdir()) == []
