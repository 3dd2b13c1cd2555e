"""A foreach stage in event mode with more folders than it runs at once and `--max-runners`
above 1 stops for worker jobs (SPEC §13 "Fan-out across runners"): the run pauses, reason
`fan_out`, its folders split into chunks kept with the run; elsewhere nothing changes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from state_helpers import bare, git, state_at

from delivery.cli.main import main
from delivery.engine.fan_out_chunks import split
from delivery.state.chunks import ChunkSession

FOLDERS = [f"f{index:02}" for index in range(1, 13)]

# each folder's run appends its name to a log outside the workspace
FLOW = """digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [type=script, foreach="folders", max_parallel=2, script="cat NAME >> LOG"]
  start -> work -> exit
}
"""


def _workspace(tmp_path: Path) -> tuple[Path, list[str]]:
    work = tmp_path / "ws"
    work.mkdir()
    (work / "flow.dot").write_text(FLOW.replace("LOG", str(tmp_path / "ran.log")),
                                   encoding="utf-8")
    args = []
    for name in FOLDERS:
        folder = tmp_path / "repos" / name
        folder.mkdir(parents=True)
        (folder / "NAME").write_text(f"{name}\n", encoding="utf-8")
        args += ["--repo", f"{name}={folder}"]
    return work, args


def _run(work: Path, *argv: str) -> tuple[int, dict[str, object]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(work / "flow.dot"), "--workspace", str(work), "--json", "--quiet",
                 *argv], out, err)
    return code, json.loads(out.getvalue()) if out.getvalue().strip() else {"err": err.getvalue()}


def _ran(tmp_path: Path) -> list[str]:
    log = tmp_path / "ran.log"
    return log.read_text().split() if log.exists() else []


def test_a_stage_over_more_folders_than_it_runs_at_once_pauses_for_three_workers(
        tmp_path: Path) -> None:
    work, repos = _workspace(tmp_path)
    state_repo = bare(tmp_path / "state.git")
    code, shown = _run(work, *repos, "--state", str(state_repo), "--max-runners", "3")
    assert code == 3, shown
    assert shown["status"] == "paused" and shown["reason"] == "fan_out"
    assert shown["chunks"] == [1, 2, 3]
    assert _ran(tmp_path) == []  # no folder ran in the job that fanned out
    saved = json.loads(git(state_repo, "show",
                           f"refs/delivery/runs/{shown['run_id']}:checkpoint.json"))
    assert saved["context"]["internal.foreach.work.chunks"] == [
        FOLDERS[0:4], FOLDERS[4:8], FOLDERS[8:12]]
    info = json.loads(git(state_repo, "show", f"refs/delivery/runs/{shown['run_id']}:run.json"))
    assert info["max_runners"] == 3  # kept for the resumes


def test_chunks_are_balanced_and_never_more_than_the_folders() -> None:
    assert [len(chunk) for chunk in split(FOLDERS, 5)] == [3, 3, 2, 2, 2]
    assert split(FOLDERS[:3], 20) == [[FOLDERS[0]], [FOLDERS[1]], [FOLDERS[2]]]
    numbers = [str(n) for n in range(600)]
    assert [f for chunk in split(numbers, 1000) for f in chunk] == numbers
    assert len(split([str(n) for n in range(600)], 1000)) == 256  # GitHub's matrix limit


def test_with_one_runner_the_stage_runs_every_folder_in_the_job(tmp_path: Path) -> None:
    work, repos = _workspace(tmp_path)
    state_repo = bare(tmp_path / "state.git")
    code, shown = _run(work, *repos, "--state", str(state_repo))
    assert (code, shown["status"]) == (0, "succeeded"), shown
    assert sorted(_ran(tmp_path)) == FOLDERS
    assert "chunks" not in shown


def test_without_a_state_repository_max_runners_changes_nothing(tmp_path: Path) -> None:
    work, repos = _workspace(tmp_path)
    code, shown = _run(work, *repos, "--max-runners", "3")
    assert (code, shown["status"]) == (0, "succeeded"), shown
    assert sorted(_ran(tmp_path)) == FOLDERS


def test_a_max_runners_that_is_not_a_number_is_refused_before_the_run(tmp_path: Path) -> None:
    work, repos = _workspace(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(work / "flow.dot"), "--workspace", str(work), *repos,
                 "--max-runners", "many"], out, err)
    assert code == 2
    assert "--max-runners" in err.getvalue() and "whole number" in err.getvalue()
    assert "Traceback" not in err.getvalue()


def _work(tmp_path: Path, state_repo: Path, run_id: str, chunk: int, runner: str,
          *extra: str) -> tuple[int, dict[str, object]]:
    """`delivery work` as a fresh runner would run it: its own workspace and clone cache."""
    home = tmp_path / runner
    home.mkdir(exist_ok=True)
    out, err = io.StringIO(), io.StringIO()
    code = main(["work", run_id, "--chunk", str(chunk), "--state", str(state_repo),
                 "--workspace", str(home), "--cache", str(home / "cache"), "--json",
                 "--quiet", *extra], out, err)
    return code, json.loads(out.getvalue()) if out.getvalue().strip() else {"err": err.getvalue()}


def _fanned_out(tmp_path: Path) -> tuple[Path, str]:
    work, repos = _workspace(tmp_path)
    state_repo = bare(tmp_path / "state.git")
    code, shown = _run(work, *repos, "--state", str(state_repo), "--max-runners", "3")
    assert (code, shown.get("reason")) == (3, "fan_out"), shown
    return state_repo, str(shown["run_id"])


def test_three_workers_run_their_chunks_and_the_last_continues_the_run(
        tmp_path: Path) -> None:
    state_repo, run_id = _fanned_out(tmp_path)
    first = _work(tmp_path, state_repo, run_id, 1, "runner-1")
    second = _work(tmp_path, state_repo, run_id, 3, "runner-3")
    assert [first[0], first[1]["status"], second[1]["status"]] == [0, "chunk_done",
                                                                   "chunk_done"], first
    assert sorted(_ran(tmp_path)) == sorted(FOLDERS[0:4] + FOLDERS[8:12])
    code, last = _work(tmp_path, state_repo, run_id, 2, "runner-2")
    assert (code, last["status"]) == (0, "succeeded"), last
    assert sorted(_ran(tmp_path)) == FOLDERS  # each folder ran once, in its chunk's job
    context = last["context"]
    assert isinstance(context, dict)
    assert all(context[f"{name}.outcome"] == "succeeded" for name in FOLDERS)
    assert context["work.failed_folders"] == "[]"


def test_a_second_worker_for_a_chunk_being_run_is_superseded_before_running_anything(
        tmp_path: Path) -> None:
    state_repo, run_id = _fanned_out(tmp_path)
    remote = state_at(state_repo, tmp_path / "elsewhere")
    ChunkSession(remote, run_id, "1-work", 2, "a-live-job").fetch().claim(stale_after=3600.0)
    code, shown = _work(tmp_path, state_repo, run_id, 2, "runner-2")
    assert (code, shown["status"]) == (0, "superseded"), shown
    assert "chunk 2" in str(shown["failure_reason"])
    assert _ran(tmp_path) == []


def test_a_chunk_the_run_does_not_have_is_refused(tmp_path: Path) -> None:
    state_repo, run_id = _fanned_out(tmp_path)
    code, shown = _work(tmp_path, state_repo, run_id, 4, "runner-4")
    assert code == 2
    assert "chunks 1 to 3" in str(shown["err"])


def test_two_workers_at_once_and_the_last_continues_the_run(tmp_path: Path) -> None:
    state_repo, run_id = _fanned_out(tmp_path)
    assert _work(tmp_path, state_repo, run_id, 1, "runner-1")[1]["status"] == "chunk_done"
    with ThreadPoolExecutor(max_workers=2) as pool:
        ends = list(pool.map(lambda k: _work(tmp_path, state_repo, run_id, k, f"runner-{k}"),
                             [2, 3]))
    statuses = sorted(str(shown["status"]) for _, shown in ends)
    # one continued the run; the other saw the other chunk unfinished (chunk_done), or
    # saw every chunk done too and lost the run's claim (superseded, having changed
    # nothing) — or both saw the other's chunk unfinished
    assert statuses in (["chunk_done", "succeeded"], ["succeeded", "superseded"],
                        ["chunk_done", "chunk_done"]), ends
    if statuses == ["chunk_done", "chunk_done"]:  # a resume ends it, running nothing again
        out, err = io.StringIO(), io.StringIO()
        code = main(["resume", run_id, "--state", str(state_repo), "--workspace",
                     str(tmp_path / "runner-1"), "--json", "--quiet"], out, err)
        assert code == 0, err.getvalue()
    assert sorted(_ran(tmp_path)) == FOLDERS


KILLING = """digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [type=script, foreach="folders", max_parallel=1,
        script="cat NAME >> LOG; grep -q f06 NAME || exit 0
test -e KILLED && exit 0; touch KILLED; kill -9 $PPID; sleep 5"]
  start -> work -> exit
}
"""


def test_a_worker_killed_mid_chunk_leaves_only_its_unfinished_folders_to_the_resume(
        tmp_path: Path) -> None:
    work, repos = _workspace(tmp_path)
    (work / "flow.dot").write_text(KILLING.replace("LOG", str(tmp_path / "ran.log")).replace(
        "KILLED", str(tmp_path / "killed")), encoding="utf-8")
    state_repo = bare(tmp_path / "state.git")
    code, shown = _run(work, *repos, "--state", str(state_repo), "--max-runners", "3",
                       "--max-parallel", "1")
    assert (code, shown.get("reason")) == (3, "fan_out"), shown
    run_id = str(shown["run_id"])
    for chunk in (1, 3):
        assert _work(tmp_path, state_repo, run_id, chunk, f"runner-{chunk}")[0] == 0
    runner = tmp_path / "runner-2"
    runner.mkdir()
    killed = subprocess.run(
        [sys.executable, "-c", "from delivery.cli.main import entry; entry()", "work", run_id,
         "--chunk", "2", "--state", str(state_repo), "--workspace", str(runner), "--cache",
         str(runner / "cache"), "--quiet"], capture_output=True, text=True, timeout=120,
        check=False)
    assert killed.returncode == -9, killed.stderr
    assert _ran(tmp_path)[-2:] == ["f05", "f06"]  # f05 ended, f06 was running at the kill
    # the dead worker's chunk claim is taken over by a plain resume on another machine
    out, err = io.StringIO(), io.StringIO()
    code = main(["resume", run_id, "--state", str(state_repo), "--take-over", "--workspace",
                 str(tmp_path / "resumer"), "--cache", str(tmp_path / "resumer" / "cache"),
                 "--json", "--quiet"], out, err)
    assert code == 0, err.getvalue()
    assert json.loads(out.getvalue())["status"] == "succeeded"
    ran = _ran(tmp_path)
    assert sorted(ran) == sorted([*FOLDERS, "f06"])  # only f06 ran twice
    assert ran[-3:] == ["f06", "f07", "f08"]  # the resume ran chunk 2's unfinished folders
