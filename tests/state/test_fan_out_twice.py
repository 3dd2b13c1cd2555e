"""Two foreach stages one after the other, each fanned out across runners (SPEC §13
"Fan-out across runners"): the worker that continues the run after the first reaches the
second, which pauses `fan_out` again; its chunks are run by the next round of workers, each
folder once per stage — the first fan-out's results are never taken for the second's."""

from __future__ import annotations

import io
import json
from pathlib import Path

from state_helpers import bare

from delivery.cli.main import main

FOLDERS = [f"f{index:02}" for index in range(1, 7)]

# each folder's run of each stage appends `<stage>:<folder>` to a log outside the workspace
FLOW = """digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  first [type=script, foreach="folders", max_parallel=1, script="echo first:$(cat NAME) >> LOG"]
  second [type=script, foreach="folders", max_parallel=1,
          script="echo second:$(cat NAME) >> LOG"]
  start -> first -> second -> exit
}
"""


def _started(tmp_path: Path) -> tuple[Path, str]:
    """A run over six folders, paused for three workers at its first stage."""
    work = tmp_path / "ws"
    work.mkdir()
    (work / "flow.dot").write_text(FLOW.replace("LOG", str(tmp_path / "ran.log")),
                                   encoding="utf-8")
    repos = []
    for name in FOLDERS:
        folder = tmp_path / "repos" / name
        folder.mkdir(parents=True)
        (folder / "NAME").write_text(f"{name}\n", encoding="utf-8")
        repos += ["--repo", f"{name}={folder}"]
    state_repo = bare(tmp_path / "state.git")
    shown = _cli(["run", str(work / "flow.dot"), "--workspace", str(work), *repos,
                  "--state", str(state_repo), "--max-runners", "3"])
    assert (shown["status"], shown["reason"], shown["chunks"]) == \
        ("paused", "fan_out", [1, 2, 3]), shown
    return state_repo, str(shown["run_id"])


def _cli(argv: list[str]) -> dict[str, object]:
    out, err = io.StringIO(), io.StringIO()
    main([*argv, "--json", "--quiet"], out, err)
    return json.loads(out.getvalue()) if out.getvalue().strip() else {"err": err.getvalue()}


def _round(tmp_path: Path, state_repo: Path, run_id: str, name: str) -> list[dict[str, object]]:
    """One worker per chunk, each on a fresh runner, one after the other."""
    shown = []
    for chunk in (1, 2, 3):
        runner = tmp_path / f"{name}-{chunk}"
        runner.mkdir()
        shown.append(_cli(["work", run_id, "--chunk", str(chunk), "--state", str(state_repo),
                           "--workspace", str(runner), "--cache", str(runner / "cache")]))
    return shown


def _ran(tmp_path: Path, stage: str) -> list[str]:
    lines = (tmp_path / "ran.log").read_text(encoding="utf-8").split()
    return [line.split(":")[1] for line in lines if line.startswith(f"{stage}:")]


def test_the_second_fanned_out_stage_runs_every_folder_in_the_next_round_of_workers(
        tmp_path: Path) -> None:
    state_repo, run_id = _started(tmp_path)
    first = _round(tmp_path, state_repo, run_id, "round-1")
    last = first[-1]
    # the worker that continued the run reached the second stage, and fanned it out
    assert (last["status"], last["reason"], last["chunks"]) == \
        ("paused", "fan_out", [1, 2, 3]), first
    assert sorted(_ran(tmp_path, "first")) == FOLDERS and _ran(tmp_path, "second") == []
    second = _round(tmp_path, state_repo, run_id, "round-2")
    assert [shown["status"] for shown in second] == ["chunk_done", "chunk_done",
                                                     "succeeded"], second
    assert sorted(_ran(tmp_path, "second")) == FOLDERS  # each folder once, in its chunk
    assert sorted(_ran(tmp_path, "first")) == FOLDERS  # and the first stage never again
