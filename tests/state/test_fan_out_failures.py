"""A fanned-out foreach stage whose folders fail (SPEC §13 "Fan-out across runners" with
§8.1): the stage's outcome is gathered from every chunk's results as if one job had run
them — `partial_success` with `<node>.failed_folders` naming exactly the failed folders
when one chunk's folders all fail, `failed` when every folder of every chunk does — and
the run routes on it as the workflow says."""

from __future__ import annotations

import io
import json
from pathlib import Path

from budget_helpers import events
from state_helpers import bare

from delivery.cli.main import main

FOLDERS = [f"f{index:02}" for index in range(1, 7)]

# a folder fails when its NAME file says `fail`; the route taken is logged
FLOW = """digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [type=script, foreach="folders", max_parallel=1,
        script="echo $(head -1 NAME) >> LOG; ! grep -q fail NAME"]
  all_ok [type=script, script="echo route:all_ok >> LOG"]
  some [type=script, script="echo route:some >> LOG"]
  none [type=script, script="echo route:none >> LOG"]
  start -> work
  work -> all_ok [condition="outcome=succeeded"]
  work -> some [condition="outcome=partial_success"]
  work -> none [condition="outcome=failed"]
  all_ok -> exit; some -> exit; none -> exit
}
"""


def _cli(argv: list[str]) -> tuple[int, dict[str, object]]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--json", "--quiet"], out, err)
    return code, json.loads(out.getvalue()) if out.getvalue().strip() else {"err": err.getvalue()}


def _fan_out(tmp_path: Path, failing: set[str]) -> tuple[Path, str]:
    """A run over six folders (those in `failing` fail), paused for three workers."""
    work = tmp_path / "ws"
    work.mkdir()
    (work / "flow.dot").write_text(FLOW.replace("LOG", str(tmp_path / "ran.log")),
                                   encoding="utf-8")
    repos = []
    for name in FOLDERS:
        folder = tmp_path / "repos" / name
        folder.mkdir(parents=True)
        mark = "\nfail" if name in failing else ""
        (folder / "NAME").write_text(f"{name}{mark}\n", encoding="utf-8")
        repos += ["--repo", f"{name}={folder}"]
    state_repo = bare(tmp_path / "state.git")
    code, shown = _cli(["run", str(work / "flow.dot"), "--workspace", str(work), *repos,
                        "--state", str(state_repo), "--max-runners", "3"])
    assert (code, shown.get("reason"), shown.get("chunks")) == (3, "fan_out", [1, 2, 3]), shown
    return state_repo, str(shown["run_id"])


def _workers(tmp_path: Path, state_repo: Path, run_id: str) -> list[tuple[int, dict[str, object]]]:
    """One worker per chunk, each a fresh runner (its own workspace and clone cache)."""
    ends = []
    for chunk in (1, 2, 3):
        runner = tmp_path / f"runner-{chunk}"
        runner.mkdir()
        ends.append(_cli(["work", run_id, "--chunk", str(chunk), "--state", str(state_repo),
                          "--workspace", str(runner), "--cache", str(runner / "cache")]))
    return ends


def _log(tmp_path: Path) -> list[str]:
    return (tmp_path / "ran.log").read_text(encoding="utf-8").split()


def _stage_outcome(shown: dict[str, object]) -> str:
    """The outcome the work stage ended with, as the continuing job's run recorded it."""
    [finished] = [event for event in events(Path(str(shown["run_dir"])), "stage_finished")
                  if event["node"] == "work"]
    return str(finished["outcome"])


def test_a_chunk_whose_folders_all_fail_makes_the_stage_a_partial_success_naming_them(
        tmp_path: Path) -> None:
    failing = {"f03", "f04"}  # chunk 2: f03 and f04
    state_repo, run_id = _fan_out(tmp_path, failing)
    ends = _workers(tmp_path, state_repo, run_id)
    assert [shown["status"] for _, shown in ends[:2]] == ["chunk_done", "chunk_done"], ends
    _, last = ends[2]
    assert last["status"] == "succeeded", last  # the run itself went on to its exit
    assert _stage_outcome(last) == "partial_success"
    assert last["path"] == ["start", "work", "some", "exit"]
    context = last["context"]
    assert isinstance(context, dict)
    assert json.loads(str(context["work.failed_folders"])) == ["f03", "f04"]
    assert {name: context[f"{name}.outcome"] for name in FOLDERS} == {
        name: "failed" if name in failing else "succeeded" for name in FOLDERS}
    log = _log(tmp_path)
    assert sorted(line for line in log if line.startswith("f")) == FOLDERS  # each once
    assert [line for line in log if line.startswith("route:")] == ["route:some"]


def test_a_fan_out_whose_every_folder_fails_makes_the_stage_failed(tmp_path: Path) -> None:
    state_repo, run_id = _fan_out(tmp_path, set(FOLDERS))
    ends = _workers(tmp_path, state_repo, run_id)
    _, last = ends[2]
    assert _stage_outcome(last) == "failed", ends
    assert last["path"] == ["start", "work", "none", "exit"]
    context = last["context"]
    assert isinstance(context, dict)
    assert json.loads(str(context["work.failed_folders"])) == FOLDERS
    log = _log(tmp_path)
    assert sorted(line for line in log if line.startswith("f")) == FOLDERS  # none twice
    assert [line for line in log if line.startswith("route:")] == ["route:none"]
