"""The state ref's files are untrusted input (SPEC §13, §14): anyone who can push to the
state repository can plant a claim, a status or a huge file there. Each is a one-line
refusal or is ignored — never a traceback, a hang, unbounded memory, or a claim that stays
live forever — and a resume claims the run only after every check that could refuse it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from state_helpers import WAITING, bare, git, head, huge_blob, plant, started, state_at

from delivery.cli.main import main
from delivery.errors import DeliveryError, RunRefused, Superseded
from delivery.state.remote import StateRunStores

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "20")), deadline=None,
                derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def state_repo(tmp_path: Path) -> Path:
    return bare(tmp_path / "state.git")


@pytest.fixture
def paused(tmp_path: Path, state_repo: Path) -> str:
    return started(tmp_path, state_repo).run_id


def fetch_and_claim(state_repo: Path, home: Path, run_id: str) -> None:
    stores = StateRunStores(state_at(state_repo, home).session(run_id, "newcomer"))
    stores.open(home / "run").claim()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8)
claims = st.one_of(
    st.binary(max_size=64),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.fixed_dictionaries({"job": json_values, "at": json_values}).map(
        lambda value: json.dumps(value).encode()))


@FUZZ
@given(claim=claims)
@example(claim=b'{"job": "x", "at": "soon"}')
@example(claim=b'{"job": "x", "at": [1]}')
@example(claim=b'{"job": "x", "at": 1e999}')
@example(claim=b'[1]')
@example(claim=b'{"job": "x", "at": 1e300}')
def test_any_claim_file_is_a_one_line_refusal_or_a_claim_never_a_traceback(
        tmp_path: Path, state_repo: Path, paused: str, claim: bytes) -> None:
    plant(state_repo, paused, {"claim.json": claim})
    try:
        fetch_and_claim(state_repo, tmp_path / "job", paused)
    except (RunRefused, Superseded) as refused:
        assert "\n" not in str(refused)
        assert "claim" in str(refused)


def test_a_claim_dated_far_in_the_future_is_refused_not_live_forever(
        tmp_path: Path, state_repo: Path, paused: str) -> None:
    plant(state_repo, paused, {"claim.json": b'{"job": "x", "at": 1e300}'})
    before = head(state_repo, paused)
    with pytest.raises(RunRefused, match=r"in the future.*--take-over"):
        fetch_and_claim(state_repo, tmp_path / "job", paused)
    assert head(state_repo, paused) == before
    home = tmp_path / "rescuer"
    stores = StateRunStores(state_at(state_repo, home).session(paused, "rescuer"),
                            take_over=True)
    stores.open(home / "run").claim()  # --take-over replaces what is not a claim
    assert head(state_repo, paused) != before


def test_an_oversized_claim_is_refused_naming_its_real_size(
        tmp_path: Path, state_repo: Path, paused: str) -> None:
    plant(state_repo, paused, {"claim.json": b"x" * 70_000})
    with pytest.raises(RunRefused, match=r"claim.json on the state ref: is 70000 bytes, "
                       r"over the limit of 65536"):
        fetch_and_claim(state_repo, tmp_path / "job", paused)


def test_a_claim_whose_process_has_ended_is_not_live(tmp_path: Path, state_repo: Path,
                                                      paused: str) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    claim = {"job": "actions:octo/app/77/1", "at": time.time(),
             "host": os.uname().nodename, "pid": ended.pid}
    plant(state_repo, paused, {"claim.json": json.dumps(claim).encode()})
    fetch_and_claim(state_repo, tmp_path / "job", paused)  # taken over, not superseded
    log = git(state_repo, "log", "--format=%s", "-1", f"refs/delivery/runs/{paused}")
    assert log == "claimed by newcomer (taking over from actions:octo/app/77/1)"


@FUZZ
@given(status=st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()),
       name=st.sampled_from(["status.json", "checkpoint.json", "claim.json"]))
def test_runs_lists_a_run_whatever_its_status_files_hold(
        tmp_path: Path, state_repo: Path, paused: str, status: bytes, name: str) -> None:
    plant(state_repo, paused, {name: status})
    [listed] = state_at(state_repo, tmp_path / "lister").runs()
    assert listed.run_id == paused and isinstance(listed.status, str)


@pytest.fixture
def planted_size(request: pytest.FixtureRequest) -> int:
    """The huge file planted on the ref: 100 MiB with --long; 24 MiB (over the 16 MiB
    limit all the same) otherwise — git alone takes ~10 s to hash, pack and fetch 100 MiB
    on a loaded CI machine, whatever delivery does with it."""
    return (100 if request.config.getoption("--long") else 24) << 20


def test_a_huge_file_planted_on_the_ref_is_refused_in_one_line_without_being_read(
        tmp_path: Path, state_repo: Path, paused: str, planted_size: int) -> None:
    planted = huge_blob(state_repo, planted_size)  # a real blob, from a generated stream
    plant(state_repo, paused, {"tick/1/stdout.txt": planted, "status.json": planted})
    before = head(state_repo, paused)
    tracemalloc.start()
    try:
        with pytest.raises(DeliveryError) as refused:
            fetch_and_claim(state_repo, tmp_path / "job", paused)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"is {planted_size} bytes" in str(refused.value)
    assert "over the state limit" in str(refused.value) and "\n" not in str(refused.value)
    assert peak < 8 << 20  # the archive's header read, the file never: not held whole
    assert not (tmp_path / "job" / "run" / "tick" / "1" / "stdout.txt").exists()
    assert head(state_repo, paused) == before  # nothing claimed
    listed = state_at(state_repo, tmp_path / "lister").runs()
    assert [run.run_id for run in listed] == [paused]  # the status is ignored, not loaded


def test_a_100_mb_stage_file_is_saved_as_a_pointer_hashed_once_and_never_committed(
        tmp_path: Path, state_repo: Path) -> None:
    from delivery.git.runref import POINTER_SUFFIX, RunRef

    run_dir = tmp_path / "run"
    (run_dir / "tick" / "1").mkdir(parents=True)
    with (run_dir / "tick" / "1" / "stdout.txt").open("wb") as handle:
        handle.truncate(100 << 20)  # sparse: 100 MiB to read, nothing to write
    ref = RunRef(str(state_repo), tmp_path / "scratch.git")
    tracemalloc.start()
    try:
        first = ref.commit(run_dir, None, "save")
        (run_dir / "events.jsonl").write_text("{}\n", encoding="utf-8")
        second = ref.commit(run_dir, first, "save again")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # streamed into its digest
    assert len(ref._pointers) == 1  # hashed once: the second save reused it by stat
    pointer = ref.read_file(second, "tick/1/stdout.txt" + POINTER_SUFFIX)
    assert pointer is not None and b"size 104857600" in pointer
    assert ref.push("r", second, None)
    for repo in (tmp_path / "scratch.git", state_repo):  # no object anywhere near its size
        sizes = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectsize)")
        assert max(int(size) for size in sizes.split()) < 1 << 20


def test_a_large_stage_file_is_saved_as_a_pointer_and_hashed_once(
        tmp_path: Path, state_repo: Path) -> None:
    from delivery.git.runref import FILE_LIMIT, POINTER_SUFFIX, RunRef

    run_dir = tmp_path / "run"
    (run_dir / "tick" / "1").mkdir(parents=True)
    (run_dir / "tick" / "1" / "stdout.txt").write_bytes(b"y" * (FILE_LIMIT + 1))
    ref = RunRef(str(state_repo), tmp_path / "scratch.git")
    first = ref.commit(run_dir, None, "save")
    assert ref.read_file(first, "tick/1/stdout.txt") is None
    pointer = ref.read_file(first, "tick/1/stdout.txt" + POINTER_SUFFIX)
    assert pointer is not None and f"size {FILE_LIMIT + 1}".encode() in pointer
    assert len(ref._pointers) == 1  # its digest, kept by stat for the next saves
    second = ref.commit(run_dir, first, "save again")
    assert git(tmp_path / "scratch.git", "rev-parse", f"{second}^{{tree}}") == \
        git(tmp_path / "scratch.git", "rev-parse", f"{first}^{{tree}}")


PROFILED = WAITING.replace('tick [shape=parallelogram, script="true"]',
                           'tick [shape=parallelogram, script="true"]\n'
                           '  think [prompt="never asked", agent="mine"]').replace(
    'w -> exit [condition="outcome=failed"]',
    'w -> think [condition="outcome=failed"]\n  think -> exit')
PROFILE = '[profiles.mine]\nbackend = "command"\ncommand = "true"\n'


def test_a_refused_resume_leaves_no_claim_and_a_proper_one_then_advances(
        tmp_path: Path, state_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    starter = tmp_path / "starter"
    starter.mkdir()
    (starter / "delivery.toml").write_text(PROFILE, encoding="utf-8")
    run_id = started(tmp_path, state_repo, PROFILED, workspace=starter).run_id
    before = head(state_repo, run_id)

    bare_job = tmp_path / "no-profile"  # a workspace without the run's agent profile
    bare_job.mkdir()
    assert main(["resume", "--state", str(state_repo), run_id,
                 "--workspace", str(bare_job)]) == 2
    assert "agent profile 'mine': is unknown" in capsys.readouterr().err
    assert head(state_repo, run_id) == before  # refused: nothing claimed

    proper = tmp_path / "proper"
    proper.mkdir()
    (proper / "delivery.toml").write_text(PROFILE, encoding="utf-8")
    assert main(["resume", "--state", str(state_repo), run_id,
                 "--workspace", str(proper)]) == 3  # not superseded: it ran and paused
    assert "paused" in capsys.readouterr().out
    saved = json.loads(git(state_repo, "show", f"refs/delivery/runs/{run_id}:checkpoint.json"))
    assert saved["path"].count("tick") == 2
