"""Run files under attack and accident (SPEC §11, §12, §14): symlinks planted in the run
directory are refused, never written through; damaged files give one line, never a
traceback; a disk that fills up mid-run fails the run (exit 1) and it resumes once there is
room; large values are shown as pointer and size unless asked; runs are found by id or
`--last`."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, resume_run, start_run
from delivery.errors import RunStoreError
from delivery.store.records import StageRecord
from delivery.store.runstore import LocalRunStore, LocalRunStores
from delivery.testing import flow
from delivery.testing.cli import invoke

DELIVERY = Path(sys.executable).with_name("delivery")

FLOW = flow("""
plan  [type=prompt, prompt="Plan it", outputs="plan:text"]
write [type=prompt, prompt="Write {{ plan }}", outputs="essay:text"]
ship  [type=prompt, prompt="Ship", outputs="tag:text"]
start -> plan -> write -> ship -> exit
""", goal="Keep the files in the run", name="Files")
BIG = 300 * 1024


def _reply(updates: dict[str, Any]) -> str:
    return "ok\n" + json.dumps({"context_updates": updates})


REPLIES = {"plan": [_reply({"plan": "three parts"})],
           "write": [_reply({"essay": "e" * BIG})],
           "ship": [_reply({"tag": "v1"})]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "flow.dot").write_text(FLOW, encoding="utf-8")
    (tmp_path / "replies.json").write_text(json.dumps(REPLIES), encoding="utf-8")
    return tmp_path


def run_args(run: Path) -> list[str]:
    return ["run", "flow.dot", "--agent", "replay:replies.json", "--json", "--run-dir", str(run)]


def delivery(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DELIVERY), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr


@pytest.fixture
def finished(workspace: Path) -> Path:
    run = workspace / "run"
    done = invoke(*run_args(run), cwd=workspace)
    assert done.code == 0, done.err
    return run


# -- symlinks ---------------------------------------------------------------------------
@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside.txt"
    target.write_text("precious", encoding="utf-8")
    return target


def _interrupt(run: Path) -> None:
    """Make the finished run look killed before `ship` (an edit: no checksum)."""
    data = json.loads((run / "checkpoint.json").read_bytes())
    data.update(status="running", next_node="ship")
    del data["checksum"]
    (run / "checkpoint.json").write_text(json.dumps(data), encoding="utf-8")


def test_an_event_log_that_is_a_symlink_is_refused_not_written_through(
        finished: Path, outside: Path, workspace: Path) -> None:
    _interrupt(finished)
    (finished / "events.jsonl").unlink()
    (finished / "events.jsonl").symlink_to(outside)
    done = delivery("resume", finished, cwd=workspace)
    assert done.returncode == 2
    assert "events.jsonl: is a symlink" in one_line(done)
    assert outside.read_text(encoding="utf-8") == "precious"


def test_a_checkpoint_that_is_a_symlink_is_never_followed(
        finished: Path, outside: Path, workspace: Path) -> None:
    _interrupt(finished)
    (finished / "checkpoint.json").unlink()
    (finished / "checkpoint.json").symlink_to(outside)
    done = delivery("resume", finished, "--json", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert outside.read_text(encoding="utf-8") == "precious"
    # the link was not read (the state was rebuilt from the log) and is replaced, not followed
    assert not (finished / "checkpoint.json").is_symlink()
    assert "rebuilt from the event log" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("planted", ["ship/1/prompt.md", "ship/1", "ship", "artifacts/values"])
def test_a_stage_or_artifact_path_that_is_a_symlink_stops_the_run_resumably(
        workspace: Path, outside: Path, tmp_path: Path, planted: str) -> None:
    run = workspace / "run"
    first = invoke(*run_args(run), cwd=workspace)
    assert first.code == 0
    # a fresh run with the same folder names planted before they are written
    run2 = workspace / "run2"
    run2.mkdir()
    link = run2 / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    folder = tmp_path / "outside-folder"
    folder.mkdir()
    link.symlink_to(outside if planted.endswith(".md") else folder)
    done = delivery(*run_args(run2), cwd=workspace)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "failed" and "symlink" in report["failure_reason"]
    assert "resume" in report["failure_reason"]
    assert outside.read_text(encoding="utf-8") == "precious" and not any(folder.iterdir())
    link.unlink()
    again = delivery("resume", run2, "--json", cwd=workspace)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["context"]["tag"] == "v1"


# -- garbage in run files -----------------------------------------------------------------
@pytest.mark.slow
def test_inspect_shows_a_value_with_a_lone_surrogate(finished: Path, workspace: Path) -> None:
    # replies are cleaned when accepted; a value read back from a run file may still hold
    # one (json.loads accepts "\\ud800")
    text = (finished / "checkpoint.json").read_text(encoding="utf-8")
    data = json.loads(text)
    del data["checksum"]
    data["context"]["plan"] = "odd \ud800 text"
    (finished / "checkpoint.json").write_text(json.dumps(data), encoding="utf-8")
    for extra in ([], ["--json"]):
        done = delivery("inspect", finished, *extra, cwd=workspace)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert "odd \\ud800 text" in done.stdout


def test_inspect_and_verify_on_an_event_log_with_random_bytes_appended(
        finished: Path, workspace: Path) -> None:
    with (finished / "events.jsonl").open("ab") as log:
        log.write(os.urandom(3000) + b"\n" + os.urandom(500))
    inspected = delivery("inspect", finished, cwd=workspace)
    assert inspected.returncode == 2
    assert "events.jsonl: line" in one_line(inspected)
    verified = delivery("verify", finished, cwd=workspace)
    assert verified.returncode == 1 and "Traceback" not in verified.stderr
    assert "event chain BROKEN" in verified.stdout


def test_inspect_of_a_checkpoint_whose_context_is_a_list(finished: Path,
                                                        workspace: Path) -> None:
    data = json.loads((finished / "checkpoint.json").read_bytes())
    data["context"] = [1, 2]
    del data["checksum"]
    (finished / "checkpoint.json").write_text(json.dumps(data), encoding="utf-8")
    done = delivery("inspect", finished, "--json", cwd=workspace)
    assert done.returncode == 0, done.stderr  # the state is rebuilt from the log
    assert json.loads(done.stdout)["context"]["tag"] == "v1"
    verified = delivery("verify", finished, cwd=workspace)
    assert verified.returncode == 1
    assert "'context' should be a JSON object" in verified.stdout


# -- a disk that fills up -------------------------------------------------------------------
class _FullAfter(LocalRunStore):
    """The local store on a disk that is full from the `left`-th stage record on."""

    left = 2

    def _append_record(self, record: StageRecord) -> None:
        _FullAfter.left -= 1
        if _FullAfter.left < 0:
            raise RunStoreError(f"{self.events_path}: cannot append event: "
                                f"{os.strerror(errno.ENOSPC)}")
        super()._append_record(record)


class _FullDisk(LocalRunStores):
    def create(self, location: Path) -> LocalRunStore:
        return _FullAfter.create_dir(location)


def test_a_store_that_fails_mid_run_fails_the_run_and_it_resumes(workspace: Path) -> None:
    _FullAfter.left = 2  # the start and `plan` are saved, then the disk is full
    replies = {node: list(items) for node, items in REPLIES.items()}
    request = RunRequest(workflow=workspace / "flow.dot", workspace=workspace,
                         run_dir=workspace / "run")
    outcome = start_run(request, World(agent=ReplayBackend(replies), stores=_FullDisk()))
    assert outcome.status == "failed"
    assert "No space left on device" in outcome.failure_reason
    assert "resume" in outcome.failure_reason
    resumed = resume_run(workspace / "run", World(agent=ReplayBackend(replies)))
    assert resumed.status == "succeeded", resumed.failure_reason
    assert resumed.path == ["start", "plan", "write", "ship", "exit"]
    assert resumed.context["tag"] == "v1" and len(resumed.context["essay"]) == BIG


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1200 KiB tmpfs: the log's 1 MiB tail file fits, a 300 KB reply does not (needs
    the right to mount, as root in a container has)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs",
                           str(mount_point)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.slow
def test_a_run_on_a_disk_that_fills_up_exits_1_and_resumes_once_there_is_room(
        workspace: Path, small_disk: Path) -> None:
    run = small_disk / "run"
    done = delivery(*run_args(run), cwd=workspace)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "failed" and "No space left on device" in report["failure_reason"]
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    again = delivery("resume", run, "--json", cwd=workspace)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["context"]["tag"] == "v1"
    assert delivery("verify", run, cwd=workspace).returncode == 0


# -- large values, run ids, --last ---------------------------------------------------------
def test_run_json_shows_a_large_value_as_its_pointer_and_size_unless_full(
        workspace: Path) -> None:
    done = invoke(*run_args(workspace / "run"), cwd=workspace)
    essay = json.loads(done.out)["context"]["essay"]
    assert set(essay) == {"artifact", "bytes"} and essay["bytes"] == BIG  # the text, UTF-8
    assert essay["artifact"].startswith(f"file://{(workspace / 'run').resolve()}/artifacts/")
    assert len(done.out) < 20_000
    full = invoke(*run_args(workspace / "run-full"), "--full", cwd=workspace)
    assert json.loads(full.out)["context"]["essay"] == "e" * BIG


def test_inspect_resume_and_verify_find_the_last_run_of_a_workspace(workspace: Path) -> None:
    args = ["run", "flow.dot", "--agent", "replay:replies.json", "--json"]
    first = json.loads(invoke(*args, cwd=workspace).out)
    second = json.loads(invoke(*args, cwd=workspace).out)
    elsewhere = workspace.parent
    for command in ("inspect", "verify", "resume"):
        done = invoke(command, "--last", "--workspace", workspace, cwd=elsewhere)
        assert done.code == 0, (command, done.err)
        assert second["run_id"] in done.out or str(second["run_dir"]) in done.out
    by_id = invoke("inspect", first["run_id"], "--workspace", workspace, "--json",
                   cwd=elsewhere)
    assert json.loads(by_id.out)["run_id"] == first["run_id"]
    nothing = invoke("inspect", "--last", cwd=elsewhere)
    assert nothing.code == 2 and "there is no run under" in nothing.err
