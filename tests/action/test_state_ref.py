"""Runs kept on a git ref (`--state`, SPEC §13) with a local bare repository as the state
remote: a save per stage by compare-and-swap, claims, races between resumes, a job killed
between a stage and its save, the CLI's `run/resume --state` and `runs --state`."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from engine_helpers import FakeClock

from delivery.cli.main import main
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.errors import Superseded
from delivery.git.runref import POINTER_SUFFIX, RunRef
from delivery.state.remote import RemoteState, StateRunStores, StateSession
from delivery.store.runstore import verify_run

TICKING = """
digraph T {
  graph [goal="tick"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  tick [shape=parallelogram, script="true"]
  w [type=wait, interval="60s"]
  start -> tick -> w -> tick
  w -> exit [condition="outcome=failed"]
}
"""


@pytest.fixture
def state_repo(tmp_path: Path) -> Path:
    path = tmp_path / "state.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    return path


def flow(tmp_path: Path, text: str = TICKING) -> Path:
    path = tmp_path / "flow.dot"
    path.write_text(text, encoding="utf-8")
    return path


def machine(tmp_path: Path, name: str) -> Path:
    """A fresh job's workspace (its own clone cache beside it)."""
    path = tmp_path / name
    path.mkdir()
    return path


def open_state(state_repo: Path, home: Path, now: float | None = None,
               ref: type[RunRef] = RunRef) -> RemoteState:
    scratch = home / "cache" / "state.git"
    return RemoteState(ref(str(state_repo), scratch), str(state_repo),
                       (lambda: now) if now is not None else time.time)


def session(state: RemoteState, run_id: str, job: str, *, take_over: bool = False,
            workspace: Path | None = None) -> World:
    stores = StateRunStores(state.session(run_id, job), take_over=take_over,
                            workspace=workspace)
    return World(stores=stores)


def start(tmp_path: Path, state_repo: Path, text: str = TICKING) -> RunOutcome:
    home = machine(tmp_path, "starter")
    request = RunRequest(workflow=flow(tmp_path, text), workspace=home)
    return start_run(request, session(open_state(state_repo, home), "", "starter"))


def resume(tmp_path: Path, state_repo: Path, run_id: str, name: str, *,
           state: RemoteState | None = None, take_over: bool = False) -> RunOutcome:
    home = machine(tmp_path, name)
    world = session(state or open_state(state_repo, home), run_id, name,
                    take_over=take_over, workspace=home)
    return resume_run(home / ".delivery" / "runs" / run_id, world)


def ref_log(state_repo: Path, run_id: str) -> list[str]:
    return subprocess.run(["git", "log", "--format=%s", f"refs/delivery/runs/{run_id}"],
                          cwd=state_repo, capture_output=True, text=True,
                          check=True).stdout.splitlines()


def test_a_wait_saves_and_pauses_with_every_stage_a_commit_on_the_ref(
        tmp_path: Path, state_repo: Path) -> None:
    outcome = start(tmp_path, state_repo)
    assert outcome.status == "paused" and outcome.path == ["start", "tick", "w"]
    log = ref_log(state_repo, outcome.run_id)
    assert log[-1].startswith(f"run {outcome.run_id} started")
    assert log[0].startswith("paused at step 3")
    assert len(log) == 4  # started, a save after tick, the pause after the wait


def test_a_resume_on_another_machine_continues_from_the_ref(tmp_path: Path,
                                                             state_repo: Path) -> None:
    run_id = start(tmp_path, state_repo).run_id
    outcome = resume(tmp_path, state_repo, run_id, "second")
    assert outcome.status == "paused"
    assert outcome.path == ["start", "tick", "w", "tick", "w"]
    assert verify_run(outcome.run_dir).ok


WAITING_ONLY = """
digraph W {
  graph [goal="wait"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  w [type=wait, interval="60s"]
  start -> w -> w
  w -> exit [condition="outcome=failed"]
}
"""


class BarrierRef(RunRef):
    """Two jobs that read the ref at the same moment: both fetch before either claims."""

    barrier: threading.Barrier

    def fetch(self, run_ids: Sequence[str]) -> dict[str, str]:
        found = super().fetch(run_ids)
        self.barrier.wait(timeout=30)
        return found


def test_of_two_resumes_at_the_same_moment_exactly_one_advances_twenty_times(
        tmp_path: Path, state_repo: Path) -> None:
    run_id = start(tmp_path, state_repo, WAITING_ONLY).run_id
    waits = 1
    for round_ in range(20):
        BarrierRef.barrier = threading.Barrier(2)
        results: dict[str, str] = {}

        def job(name: str, results: dict[str, str] = results) -> None:
            home = machine(tmp_path, name)
            state = open_state(state_repo, home, ref=BarrierRef)
            try:
                outcome = resume_run(home / ".delivery" / "runs" / run_id,
                                     session(state, run_id, name, workspace=home))
                results[name] = outcome.status
            except Superseded:
                results[name] = "superseded"

        threads = [threading.Thread(target=job, args=(f"r{round_}-{side}",))
                   for side in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results.values()) == ["paused", "superseded"], results
        waits += 1
        head = json.loads(subprocess.run(
            ["git", "show", f"refs/delivery/runs/{run_id}:checkpoint.json"], cwd=state_repo,
            capture_output=True, check=True).stdout)
        assert head["path"].count("w") == waits  # one step per round, never two


def test_a_live_claim_supersedes_a_newcomer_and_a_stale_one_is_taken_over(
        tmp_path: Path, state_repo: Path) -> None:
    run_id = start(tmp_path, state_repo).run_id
    holder_home = machine(tmp_path, "holder")
    holder = open_state(state_repo, holder_home).session(run_id, "holder")
    holder.claim(holder_home / "run", stale_after=lambda _: 3600.0)  # and then it died
    with pytest.raises(Superseded, match="holder claimed it"):
        resume(tmp_path, state_repo, run_id, "early")
    assert resume(tmp_path, state_repo, run_id, "forced", take_over=True).status == "paused"
    holder.claim(holder_home / "run2", stale_after=lambda _: 3600.0)
    later = open_state(state_repo, machine(tmp_path, "later-home"), now=time.time() + 7200)
    outcome = resume(tmp_path, state_repo, run_id, "later", state=later)
    assert outcome.status == "paused"
    assert any("taking over from holder" in line for line in ref_log(state_repo, run_id))


class KilledAfterStage(Exception):
    """The job dies after a stage's local save, before its state reached the ref."""


class DyingSession(StateSession):
    def save(self, run_dir: Path, message: str, settle: Iterable[str] = ()) -> None:
        if message.endswith("next w"):  # tick done, not pushed
            raise KilledAfterStage(message)
        super().save(run_dir, message, settle)


def test_a_job_killed_between_a_stage_and_its_push_loses_and_duplicates_nothing(
        tmp_path: Path, state_repo: Path) -> None:
    marker = tmp_path / "effects.txt"
    text = TICKING.replace('script="true"',
                           f'script="grep -qx once {marker} || echo once >> {marker}"')
    run_id = start(tmp_path, state_repo, text).run_id
    before = ref_log(state_repo, run_id)
    home = machine(tmp_path, "dying")
    state = open_state(state_repo, home)
    world = World(stores=StateRunStores(DyingSession(state, run_id, "dying"),
                                        workspace=home))
    marker.unlink()
    with pytest.raises(KilledAfterStage):
        resume_run(home / ".delivery" / "runs" / run_id, world)
    assert marker.read_text() == "once\n"  # the stage ran
    assert len(ref_log(state_repo, run_id)) == len(before) + 1  # only its claim is there
    outcome = resume(tmp_path, state_repo, run_id, "next", take_over=True)
    assert outcome.status == "paused"
    assert outcome.path == ["start", "tick", "w", "tick", "w"]  # the stage ran again
    assert marker.read_text() == "once\n"  # idempotently: once
    assert verify_run(outcome.run_dir).ok


def test_large_artifacts_stay_behind_as_a_pointer(tmp_path: Path, state_repo: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "artifacts").mkdir(parents=True)
    (run_dir / "artifacts" / "big.bin").write_bytes(b"x" * (2 << 20))
    (run_dir / "artifacts" / "small.txt").write_text("small")
    ref = RunRef(str(state_repo), tmp_path / "scratch.git")
    sha = ref.commit(run_dir, None, "save")
    assert ref.push("r1", sha, None)
    other = ref.commit(run_dir, None, "another start")
    assert not ref.push("r1", other, None)  # the ref exists now: a second create loses
    assert not ref.push("r1", other, "0" * 40)  # nor does a save on a stale parent win
    pointer = ref.read_file(sha, "artifacts/big.bin" + POINTER_SUFFIX)
    assert pointer is not None and b"size 2097152" in pointer
    assert ref.read_file(sha, "artifacts/big.bin") is None
    assert ref.read_file(sha, "artifacts/small.txt") == b"small"


def test_the_cli_pauses_with_exit_3_lists_runs_and_reports_a_lost_claim_as_superseded(
        tmp_path: Path, state_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    workflow = flow(tmp_path)
    first = machine(tmp_path, "first")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-cli"))
    code = main(["run", str(workflow), "--state", str(state_repo), "--workspace", str(first),
                 "--json"])
    assert code == 3
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["runs", "--state", str(state_repo), "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["run_id"] == run_id and listed["status"] == "paused"
    assert listed["next_node"] == "tick"
    holder = open_state(state_repo, machine(tmp_path, "holder")).session(run_id, "holder")
    holder.claim(tmp_path / "held", stale_after=lambda _: 3600.0)
    code = main(["resume", "--state", str(state_repo), run_id, "--workspace",
                 str(machine(tmp_path, "second")), "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["status"] == "superseded"
    code = main(["resume", "--state", str(state_repo), run_id, "--take-over", "--workspace",
                 str(machine(tmp_path, "third"))])
    assert code == 3
    assert "paused" in capsys.readouterr().out


def test_a_state_that_is_no_repository_is_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(flow(tmp_path)), "--state", str(tmp_path / "nothing")])
    assert code == 2
    assert "is neither git:OWNER/NAME nor a git repository" in capsys.readouterr().err


def test_runs_lists_the_local_runs_of_a_workspace(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    workspace = machine(tmp_path, "local")
    failing = flow(tmp_path, TICKING.replace('script="true"', 'script="false"'))
    assert main(["run", str(failing), "--workspace", str(workspace), "--json"]) == 1
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["runs", "--workspace", str(workspace)]) == 0
    assert capsys.readouterr().out.strip() == f"{run_id}  failed"


def test_a_job_whose_run_was_taken_over_stops_at_its_next_save(tmp_path: Path,
                                                               state_repo: Path) -> None:
    run_id = start(tmp_path, state_repo).run_id
    slow_home = machine(tmp_path, "slow")
    slow = open_state(state_repo, slow_home).session(run_id, "slow")
    slow.claim(slow_home / "run", stale_after=lambda _: 3600.0)
    resume(tmp_path, state_repo, run_id, "rescuer", take_over=True)
    before = ref_log(state_repo, run_id)
    with pytest.raises(Superseded, match="took the run over"):
        slow.save(slow_home / "run", "step 9: next tick")
    assert ref_log(state_repo, run_id) == before  # the slow job changed nothing


BRANCHED = """
digraph B {
  graph [goal="fan"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  fan [shape=component]
  a [type=wait, interval="30s"]
  b [shape=parallelogram, script="true"]
  join [shape=tripleoctagon]
  start -> fan
  fan -> a -> join
  fan -> b -> join
  join -> exit
}
"""


def test_a_wait_inside_a_parallel_branch_waits_instead_of_pausing_in_event_mode(
        tmp_path: Path, state_repo: Path) -> None:
    home = machine(tmp_path, "fan")
    clock = FakeClock()
    world = session(open_state(state_repo, home), "", "fan")
    world.clock = clock
    outcome = start_run(RunRequest(workflow=flow(tmp_path, BRANCHED), workspace=home), world)
    assert outcome.status == "succeeded", outcome.failure_reason
    assert clock.sleeps == [30.0]


def test_a_state_repository_lost_mid_run_fails_the_run_with_exit_1(
        tmp_path: Path, state_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-lost"))
    vanishing = TICKING.replace('script="true"', f'script="rm -rf {state_repo}"')
    code = main(["run", str(flow(tmp_path, vanishing)), "--state", str(state_repo),
                 "--workspace", str(machine(tmp_path, "lost"))])
    assert code == 1
    shown = capsys.readouterr()  # the failed run's report, with why it stopped
    assert "failure: the run's store failed" in shown.out
    assert "its state could not be saved to the state ref" in shown.out
    assert "Traceback" not in shown.err


def test_a_state_repository_lost_mid_run_ends_the_run_as_failed_with_its_reason(
        tmp_path: Path, state_repo: Path) -> None:
    """The claim is not given back after the failed save (that would push again, and could
    fail the same way): the outcome says why the run stopped, nothing raised over it."""
    vanishing = TICKING.replace('script="true"', f'script="rm -rf {state_repo}"')
    outcome = start(tmp_path, state_repo, vanishing)
    assert outcome.status == "failed"
    assert "its state could not be saved to the state ref" in outcome.failure_reason
    assert outcome.path == ["start", "tick"]


def test_each_save_on_the_ref_carries_its_status_and_next_node_for_runs(
        tmp_path: Path, state_repo: Path) -> None:
    run_id = start(tmp_path, state_repo).run_id
    saved = json.loads(subprocess.run(
        ["git", "show", f"refs/delivery/runs/{run_id}:status.json"], cwd=state_repo,
        capture_output=True, check=True).stdout)
    assert saved["status"] == "paused" and saved["next_node"] == "tick"
    outcome = resume(tmp_path, state_repo, run_id, "second")
    # what only the ref keeps is not part of the run directory a job works in
    assert not (outcome.run_dir / "status.json").exists()
    assert not (outcome.run_dir / "claim.json").exists()
    [listed] = open_state(state_repo, machine(tmp_path, "lister")).runs()
    assert (listed.run_id, listed.status, listed.next_node) == (run_id, "paused", "tick")
    assert listed.claimed_by == ""  # the pause let go of the run


ONE_STEP = """
digraph O {
  graph [goal="once"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  once [shape=parallelogram, script="true"]
  start -> once -> exit
}
"""


def test_runs_without_state_lists_the_local_runs_and_an_unreadable_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = machine(tmp_path, "local")
    assert main(["run", str(flow(tmp_path, ONE_STEP)), "--workspace", str(workspace),
                 "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    broken = workspace / ".delivery" / "runs" / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{", encoding="utf-8")
    (broken / "checkpoint.json").write_text("{", encoding="utf-8")
    assert main(["runs", "--workspace", str(workspace), "--json"]) == 0
    listed = {run["run_id"]: run["status"] for run in json.loads(capsys.readouterr().out)}
    assert listed == {run_id: "succeeded", "broken": "unreadable"}
