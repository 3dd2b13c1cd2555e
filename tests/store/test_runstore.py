"""The durable run store: run directories, atomic checkpoints, the hash-chained event log."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from delivery.errors import RunError
from delivery.redact import Redactor
from delivery.store import runstore
from delivery.store import tail as tail_module
from delivery.store.eventchain import LogHead
from delivery.store.records import RunInfo, RunState, RunStatus
from delivery.store.runstore import (
    STAGE_FILES,
    ZERO_HASH,
    EventLog,
    LocalRunStore,
    RunDirectory,
    RunStoreError,
    new_run_id,
    verify_events,
    verify_run,
)

# --- run ids and run directories ------------------------------------------------------


def test_run_ids_are_utc_time_plus_six_hex_and_unique() -> None:
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", run_id) for run_id in ids)


INFO = RunInfo(run_id="r1", workflow="w.dot", workflow_sha256="0" * 64, workspace="/w",
               started="2026-01-01T00:00:00Z")


def test_create_makes_missing_parents(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "runs" / "r1")
    assert run.path.is_dir()
    assert run.run_json == tmp_path / "runs" / "r1" / "run.json"


def test_create_refuses_a_directory_that_already_holds_a_run(tmp_path: Path) -> None:
    RunDirectory.create(tmp_path).write_run_info(INFO)
    with pytest.raises(RunStoreError, match="already holds a run"):
        RunDirectory.create(tmp_path)


def test_open_refuses_a_directory_without_run_json(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError, match=r"not a run directory: .*"):
        RunDirectory.open(tmp_path)


def test_run_store_error_is_a_run_error() -> None:
    assert issubclass(RunStoreError, RunError)


def test_run_info_round_trips(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    run.write_run_info(INFO)
    assert RunDirectory.open(tmp_path).read_run_info() == INFO


@pytest.mark.parametrize("content", ['{"run_id": ', "[]", '{"run_id": 5}',
                                     '{"run_id": "r", "workflow": "w", "workflow_sha256": "x",'
                                     ' "workspace": "/w", "answers": {"g": "yes"}}'])
def test_a_malformed_run_json_is_one_error_naming_the_file(tmp_path: Path, content: str) -> None:
    run = RunDirectory.create(tmp_path)
    run.run_json.write_text(content)
    with pytest.raises(RunStoreError, match=r"run\.json"):
        run.read_run_info()


# --- saving the state -----------------------------------------------------------------


def started(tmp_path: Path) -> tuple[LocalRunStore, RunState]:
    run = RunDirectory.create(tmp_path / "run")
    run.write_run_info(INFO)
    run.open_log()
    state = RunState(run_id="r1", next_node="a", context={"goal": "g"}, initial={"goal": "g"})
    run.save_whole(state)
    return run, state


def stage(run: LocalRunStore, state: RunState, node: str, **context: object) -> None:
    """What the engine does after a stage: note the changes, hand over one record."""
    state.path.append(node)
    state.set_outcome(node, "succeeded")
    state.next_attempt(node)
    state.steps += 1
    state.next_node = f"after_{node}"
    state.context.update(context)
    record = state.take_record(dict(context), [], {"cursors": {node: 1}}, None)
    run.save_stage(record, lambda: state)


def test_load_is_none_before_anything_was_saved(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    run.write_run_info(INFO)
    assert run.load() is None


def test_a_resume_point_is_the_snapshot_plus_the_records_after_it(tmp_path: Path) -> None:
    run, state = started(tmp_path)
    for n in range(5):
        stage(run, state, f"n{n}", **{f"k{n}": [n]})
    run.close()
    loaded = RunDirectory.open(run.path).load()
    assert loaded is not None and loaded.recovered == ""
    got = loaded.state
    assert got.path == ["n0", "n1", "n2", "n3", "n4"] and got.next_node == "after_n4"
    assert got.context == {"goal": "g", **{f"k{n}": [n] for n in range(5)}}
    assert got.attempts == {f"n{n}": 1 for n in range(5)} and got.steps == 5
    assert got.agent_state == {"cursors": {f"n{n}": 1 for n in range(5)}}
    # only the start was snapshotted: the rest is records in the log
    snapshot = json.loads(run.checkpoint_path.read_bytes())
    assert snapshot["path"] == [] and snapshot["events"]["count"] == 1


def test_a_stage_appends_one_record_and_writes_no_snapshot(tmp_path: Path) -> None:
    run, state = started(tmp_path)
    before = run.checkpoint_path.read_bytes()
    lines = len(run.events_path.read_bytes().splitlines())
    stage(run, state, "a", x=1)
    assert run.checkpoint_path.read_bytes() == before
    added = run.events_path.read_bytes().splitlines()[lines:]
    assert len(added) == 1
    record = json.loads(added[0])
    assert record["type"] == "state" and record["context_set"] == {"x": 1}
    assert record["path_from"] == 0 and record["path_add"] == ["a"]


def test_a_snapshot_is_written_once_the_records_outgrow_the_last_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runstore, "SNAPSHOT_BYTES", 4096)
    run, state = started(tmp_path)
    counts = []
    for n in range(40):
        stage(run, state, f"n{n}", blob="x" * 400)
        counts.append(json.loads(run.checkpoint_path.read_bytes())["events"]["count"])
    assert len(set(counts)) > 2  # snapshots were written now and then, not after every stage
    assert counts[-1] < 1 + 40  # and not after the last one
    run.close()
    loaded = RunDirectory.open(run.path).load()
    assert loaded is not None and loaded.state.path == [f"n{n}" for n in range(40)]


def test_the_final_record_of_a_run_writes_a_snapshot(tmp_path: Path) -> None:
    run, state = started(tmp_path)
    stage(run, state, "a")
    state.status = RunStatus.SUCCEEDED
    run.save_stage(state.take_record({}, [], None, None), lambda: state)
    snapshot = json.loads(run.checkpoint_path.read_bytes())
    assert snapshot["status"] == "succeeded" and snapshot["path"] == ["a"]


@pytest.mark.parametrize("content", ['{"run_id": ', "", "[1, 2]", '{"run_id": 1}'])
def test_a_corrupt_snapshot_is_rebuilt_from_the_log(tmp_path: Path, content: str) -> None:
    run, state = started(tmp_path)
    stage(run, state, "a", x=1)
    run.close()
    run.checkpoint_path.write_text(content)
    with pytest.raises(RunStoreError, match=r"checkpoint\.json: corrupt checkpoint"):
        run.read_snapshot()
    loaded = run.load()
    assert loaded is not None and "rebuilt from the event log" in loaded.recovered
    assert loaded.state.context == {"goal": "g", "x": 1} and loaded.state.path == ["a"]


def test_a_snapshot_edited_without_its_checksum_is_taken_and_a_stale_one_is_not(
        tmp_path: Path) -> None:
    run, _ = started(tmp_path)
    run.close()
    data = json.loads(run.checkpoint_path.read_bytes())
    data["context"]["goal"] = "edited"
    run.checkpoint_path.write_text(json.dumps(data))  # the stale checksum is still there
    with pytest.raises(RunStoreError, match="checksum does not match"):
        run.read_snapshot()
    del data["checksum"]
    run.checkpoint_path.write_text(json.dumps(data))
    snapshot = run.read_snapshot()
    assert snapshot is not None and snapshot[0].context["goal"] == "edited"


SAVER = """
import sys
from pathlib import Path
from delivery.store.records import RunState
from delivery.store.runstore import RunDirectory

run = RunDirectory.open(Path(sys.argv[1]))
run.open_log()
state = RunState(run_id="r1", next_node="a", context={}, initial={})
run.save_whole(state)
n = 0
while True:
    n += 1
    state.steps = n
    state.path.append("a")
    record = state.take_record({"padding": "x" * 20000, "n": n}, [], None, None)
    run.save_stage(record, lambda: state)
    print(n, flush=True)
"""


def test_a_saver_killed_with_sigkill_leaves_a_complete_state(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "run")
    run.write_run_info(INFO)
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    with subprocess.Popen(
        [sys.executable, str(script), str(run.path)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        while int(child.stdout.readline()) < 80:
            pass
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        # what it printed before the signal landed (on a busy machine, saves after 80):
        # each number is printed once its save returned, durable
        last = max([80, *(int(line) for line in child.stdout.read().split())])
    run.open_log()  # cuts a torn record, as a resume does
    loaded = run.load()
    assert loaded is not None
    # every save that returned, and perhaps the one it was in when killed
    assert loaded.state.steps in (last, last + 1)
    assert loaded.state.context["n"] == loaded.state.steps == len(loaded.state.path)


def test_saving_leaves_no_temporary_files(tmp_path: Path) -> None:
    run, state = started(tmp_path)
    for n in range(5):
        stage(run, state, f"n{n}")
    state.status = RunStatus.FAILED
    run.save_stage(state.take_record({}, [], None, None), lambda: state)
    assert {p.name for p in run.path.iterdir()} == {"run.json", "checkpoint.json",
                                                     "events.jsonl", "events.tail"}


# --- stage directories ----------------------------------------------------------------


def test_stage_dir_is_node_then_attempt_and_is_created(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    assert run.stage_dir("plan_2", 3) == tmp_path / "plan_2" / "3"
    assert (tmp_path / "plan_2" / "3").is_dir()


@pytest.mark.parametrize(
    "node_id",
    ["../x", "a/b", "/etc", "..", ".", "", "1abc", "a-b", "artifacts", "Artifacts", "events",
     "a\n", "nul"],
)  # fmt: skip
def test_stage_dir_refuses_node_ids_that_could_escape_or_collide(
    tmp_path: Path, node_id: str
) -> None:
    run = RunDirectory.create(tmp_path / "run")
    with pytest.raises(RunStoreError, match="cannot name a stage directory"):
        run.stage_dir(node_id, 1)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == []


@pytest.mark.parametrize("attempt", [0, -1, True])
def test_stage_dir_refuses_attempts_below_one(tmp_path: Path, attempt: int) -> None:
    with pytest.raises(RunStoreError, match="expected an integer >= 1"):
        RunDirectory.create(tmp_path).stage_dir("plan", attempt)


def test_stage_dir_refuses_a_symlink_leading_outside_the_run(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    run = RunDirectory.create(tmp_path / "run")
    (run.path / "plan").symlink_to(outside)
    with pytest.raises(RunStoreError, match="outside the run"):
        run.stage_dir("plan", 1)
    assert list(outside.iterdir()) == []


def test_stage_dir_refuses_a_symlink_planted_as_the_attempt_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    run = RunDirectory.create(tmp_path / "run")
    (run.path / "plan").mkdir()
    (run.path / "plan" / "1").symlink_to(outside)
    with pytest.raises(RunStoreError, match="outside the run"):
        run.write_stage_file("plan", 1, "prompt.md", "x")
    assert list(outside.iterdir()) == []


def test_stage_files_round_trip(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    for name in STAGE_FILES:
        path = run.write_stage_file("plan", 1, name, f"text of {name}\n")
        assert path == tmp_path / "plan" / "1" / name
    assert run.read_stage_file("plan", 1, "response.md") == "text of response.md\n"


def test_read_stage_file_is_none_when_not_written_and_creates_nothing(tmp_path: Path) -> None:
    assert RunDirectory.create(tmp_path).read_stage_file("plan", 1, "stdout.txt") is None
    assert not (tmp_path / "plan").exists()


def test_stage_text_that_is_not_valid_unicode_is_still_written(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    run.write_stage_file("plan", 1, "stdout.txt", "bad byte: \udcff")
    assert run.read_stage_file("plan", 1, "stdout.txt") == "bad byte: \\udcff"


def test_stage_file_names_outside_the_list_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError, match="not a stage file"):
        RunDirectory.create(tmp_path).write_stage_file("plan", 1, "../run.json", "{}")


def test_write_stage_file_applies_the_redactor(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    path = run.write_stage_file(
        "plan", 1, "stdout.txt", "token=s3cr3t-value!", redactor=Redactor(["s3cr3t-value"])
    )
    assert path.read_text() == "token=***!"


# --- the event log --------------------------------------------------------------------


def write_events(path: Path, n: int) -> LogHead:
    with EventLog(path) as log:
        for i in range(n):
            log.append("stage_finished", node=f"n{i}", outcome="success")
        return log.head


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_events_carry_seq_ts_type_fields_and_prev(tmp_path: Path) -> None:
    with EventLog(tmp_path / "events.jsonl") as log:
        first = log.append("run_started", workflow="w.dot")
        second = log.append("stage_started", node="plan")
    assert first["seq"] == 1 and first["prev"] == ZERO_HASH
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", first["ts"])
    assert second["prev"] == first["hash"]
    stored = [json.loads(line) for line in lines_of(tmp_path / "events.jsonl")]
    assert list(stored[0]) == ["seq", "ts", "type", "workflow", "prev"]
    assert stored[1] == {k: v for k, v in second.items() if k != "hash"}


def test_head_counts_lines_and_hashes_the_last_one(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path) as log:
        assert (log.head.count, log.head.head) == (0, ZERO_HASH)
        event = log.append("x")
        assert (log.head.count, log.head.head) == (1, event["hash"])
    with EventLog(path) as log:
        assert (log.head.count, log.head.head) == (1, event["hash"])
        assert log.head.offset == path.stat().st_size


def test_a_stage_record_is_written_with_the_events_deferred_before_it(tmp_path: Path) -> None:
    run, state = started(tmp_path)
    run.append_event("stage_finished", defer=True, node="a")
    stage(run, state, "a", outcome="succeeded")
    types = [json.loads(line)["type"] for line in lines_of(run.events_path)]
    assert types[-2:] == ["stage_finished", "state"]
    run.close()
    loaded = RunDirectory.open(tmp_path / "run").load()
    assert loaded is not None and loaded.state.next_node == "after_a"


def test_reopening_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_events(path, 3)
    head = write_events(path, 2)
    assert verify_events(path, head).ok
    assert [json.loads(line)["seq"] for line in lines_of(path)] == [1, 2, 3, 4, 5]


def test_fields_the_log_sets_itself_are_refused(tmp_path: Path) -> None:
    with EventLog(tmp_path / "e.jsonl") as log, pytest.raises(RunStoreError, match="prev"):
        log.append("x", prev="0" * 64)


def test_values_json_cannot_hold_are_written_as_text(tmp_path: Path) -> None:
    with EventLog(tmp_path / "e.jsonl") as log:
        event = log.append("x", path=tmp_path / "a", items=("b",))
    assert event["path"] == str(tmp_path / "a") and event["items"] == ["b"]


def test_a_second_writer_is_refused_while_the_log_is_open(tmp_path: Path) -> None:
    with EventLog(tmp_path / "e.jsonl"), pytest.raises(RunStoreError, match="another process"):
        EventLog(tmp_path / "e.jsonl")


def test_an_intact_chain_verifies(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    head = write_events(path, 10)
    assert verify_events(path) == verify_events(path, head)
    result = verify_events(path, head)
    assert (result.ok, result.lines, result.problem, result.line_number) == (True, 10, "", None)


def test_an_empty_log_verifies(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_bytes(b"")
    assert verify_events(tmp_path / "e.jsonl", LogHead()).ok


# Editing line 5: a field other than seq/prev shows at line 6, whose prev no longer matches.
@pytest.mark.parametrize(
    ("field", "value", "line_number"),
    [("node", "other", 6), ("type", "stage_failed", 6), ("ts", "2000-01-01T00:00:00Z", 6),
     ("seq", 50, 5), ("prev", "f" * 64, 5)],
)  # fmt: skip
def test_editing_a_field_of_a_middle_line_is_detected(
    tmp_path: Path, field: str, value: object, line_number: int
) -> None:
    path = tmp_path / "events.jsonl"
    head = write_events(path, 10)
    lines = lines_of(path)
    event = json.loads(lines[4])
    event[field] = value
    lines[4] = json.dumps(event, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    result = verify_events(path, head)
    assert not result.ok
    assert result.line_number == line_number
    assert result.problem.startswith(f"line {line_number}: ")


def test_editing_line_seven_is_reported_with_the_documented_message(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_events(path, 10)
    path.write_text(path.read_text().replace('"node":"n5"', '"node":"nX"'))
    assert verify_events(path).problem == (
        "line 7: prev does not match the hash of line 6 — the log was edited, "
        "or a line was removed or reordered"
    )


def test_removing_a_middle_line_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    head = write_events(path, 10)
    lines = lines_of(path)
    del lines[3]
    path.write_text("\n".join(lines) + "\n")
    result = verify_events(path, head)
    assert (result.ok, result.line_number) == (False, 4)
    assert "seq is 5, expected 4" in result.problem


def test_swapping_two_lines_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    head = write_events(path, 10)
    lines = lines_of(path)
    lines[5], lines[6] = lines[6], lines[5]
    path.write_text("\n".join(lines) + "\n")
    result = verify_events(path, head)
    assert (result.ok, result.line_number) == (False, 6)


def test_removing_the_last_line_is_detected_against_the_recorded_head(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    head = write_events(path, 10)
    path.write_text("\n".join(lines_of(path)[:-1]) + "\n")
    assert verify_events(path).ok  # without the head nothing is left to compare against
    result = verify_events(path, head)
    assert (result.ok, result.lines, result.line_number) == (False, 9, 10)
    assert "cut off the end" in result.problem


def test_replacing_the_last_line_is_detected_against_the_recorded_head(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    head = write_events(path, 3)
    path.write_text(path.read_text().replace('"node":"n2"', '"node":"nX"'))
    result = verify_events(path, head)
    assert (result.ok, result.line_number) == (False, 3)


def test_lines_appended_after_the_recorded_head_still_verify(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    head = write_events(path, 3)
    write_events(path, 2)  # e.g. a crash after appending but before saving the checkpoint
    assert verify_events(path, head).ok


def test_a_line_that_is_not_json_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_events(path, 3)
    path.write_text(path.read_text() + "garbage\n")
    result = verify_events(path)
    assert (result.ok, result.line_number) == (False, 4)
    assert "not valid JSON" in result.problem


def test_a_torn_last_line_fails_verification_until_repaired(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_events(path, 3)
    with path.open("ab") as f:
        f.write(b'{"seq":4,"ts":"2026-')
    result = verify_events(path)
    assert (result.ok, result.lines, result.line_number) == (False, 3, 4)
    assert "incomplete" in result.problem


def test_a_torn_last_line_is_repaired_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_events(path, 3)
    torn = b'{"seq":4,"ts":"2026-'
    with path.open("ab") as f:
        f.write(torn)
    with EventLog(path) as log:
        assert log.head.count == 4
        log.append("run_resumed")
    events = [json.loads(line) for line in lines_of(path)]
    assert events[3]["type"] == "log_repaired"
    assert events[3]["dropped_bytes"] == len(torn)
    assert events[4]["type"] == "run_resumed"
    assert verify_events(path).ok


APPENDER = """
import sys
from pathlib import Path
from delivery.store.runstore import EventLog

log = EventLog(Path(sys.argv[1]))
n = 0
while True:
    n += 1
    log.append("tick", n=n, padding="x" * 4000)
    print(n, flush=True)
"""


def test_an_appender_killed_with_sigkill_leaves_a_log_that_reopens_and_verifies(
    tmp_path: Path,
) -> None:
    script = tmp_path / "appender.py"
    script.write_text(APPENDER)
    path = tmp_path / "events.jsonl"
    with subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        while int(child.stdout.readline()) < 25:
            pass
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
    with EventLog(path) as log:  # the dead child's lock died with it
        assert log.head.count >= 25
        log.append("run_resumed")
    result = verify_events(path)
    assert result.ok, result.problem
    assert result.lines >= 26


def test_the_log_writes_no_secret(tmp_path: Path) -> None:
    secret = "hunter2-very-secret"
    token = "ghp_" + "A1b2C3d4E5" * 3 + "abcdef"
    path = tmp_path / "events.jsonl"
    with EventLog(path, redactor=Redactor([secret])) as log:
        log.append("stage_finished", stdout=f"login {secret} ok", env={"T": [token]})
    text = path.read_text()
    assert secret not in text and token not in text
    assert verify_events(path).ok


@pytest.mark.parametrize("secret", ['pa"ss\\wörd-1', "tab\tsecret", "naïve-secret"])
def test_the_log_writes_no_secret_that_json_escapes(tmp_path: Path, secret: str) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, redactor=Redactor([secret])) as log:
        log.append("stage_finished", failure_reason=f"it said {secret}", **{secret: 1})
    event = json.loads(path.read_text())
    assert secret not in json.dumps(event, ensure_ascii=False)
    assert event["failure_reason"] == "it said ***" and event["***"] == 1


# --- verify_run -----------------------------------------------------------------------


def make_run(tmp_path: Path, events: int) -> RunDirectory:
    run, state = started(tmp_path)
    for n in range(events - 2):
        run.append_event("tick", n=n)
    state.status = RunStatus.SUCCEEDED
    run.save_stage(state.take_record({}, [], None, None), lambda: state)  # a snapshot
    run.close()
    return run


def test_verify_run_accepts_an_untouched_run(tmp_path: Path) -> None:
    result = verify_run(make_run(tmp_path, 5).path)
    assert (result.ok, result.lines) == (True, 5)


def test_verify_run_uses_the_head_recorded_in_the_checkpoint(tmp_path: Path) -> None:
    run = make_run(tmp_path, 5)
    run.events_path.write_text("\n".join(lines_of(run.events_path)[:3]) + "\n")
    result = verify_run(run.path)
    assert (result.ok, result.line_number) == (False, 5)


def test_verify_run_reports_a_corrupt_checkpoint(tmp_path: Path) -> None:
    run = make_run(tmp_path, 2)
    run.checkpoint_path.write_text("{")
    result = verify_run(run.path)
    assert not result.ok and "corrupt checkpoint" in result.problem


def test_verify_run_refuses_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError, match="not a run directory"):
        verify_run(tmp_path)


# --- the tail file: what a power failure takes from the log ----------------------------


def test_lines_a_power_failure_took_from_the_log_are_written_back_from_the_tail(
        tmp_path: Path) -> None:
    run, state = started(tmp_path)
    for n in range(5):
        stage(run, state, f"n{n}", **{f"k{n}": n})
    whole = run.events_path.read_bytes()
    run.close()
    lines = whole.splitlines(keepends=True)
    # the log lost its last three lines (never flushed: only the tail file was)
    run.events_path.write_bytes(b"".join(lines[:-3]))
    run.open_log()
    run.close()
    log = run.events_path.read_bytes().splitlines(keepends=True)
    assert log[: len(lines)] == lines
    repaired = json.loads(log[len(lines)])
    assert repaired["type"] == "log_repaired" and repaired["restored_lines"] == 3
    loaded = run.load()
    assert loaded is not None and loaded.state.context["k4"] == 4
    assert verify_run(run.path).ok


def test_a_tail_line_torn_by_a_power_failure_is_not_written_back(tmp_path: Path) -> None:
    run, state = started(tmp_path)
    for n in range(3):
        stage(run, state, f"n{n}")
    run.close()
    lines = run.events_path.read_bytes().splitlines(keepends=True)
    run.events_path.write_bytes(b"".join(lines[:-2]))
    tail = run.tail_path.read_bytes()
    last = tail.rindex(lines[-1].rstrip(b"\n"))
    run.tail_path.write_bytes(tail[: last + 20] + b"\0" * (len(tail) - last - 20))
    run.open_log()
    run.close()
    log = run.events_path.read_bytes().splitlines(keepends=True)
    assert log[: len(lines) - 1] == lines[:-1]  # one line back, the torn one not
    assert json.loads(log[len(lines) - 1])["restored_lines"] == 1
    assert verify_run(run.path).ok


def test_when_the_tail_file_is_full_the_log_itself_is_flushed_and_the_tail_starts_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tail_module, "SIZE", 8192)
    run, state = started(tmp_path)
    headers = set()
    for n in range(30):
        stage(run, state, f"n{n}", blob="y" * 300)
        headers.add(json.loads(run.tail_path.read_bytes()[:256])["count"])
    assert len(headers) > 2  # restarted after the log was flushed
    assert run.tail_path.stat().st_size == 8192
    run.close()
    loaded = run.load()
    assert loaded is not None and len(loaded.state.path) == 30


# --- reopening a run: the chain is checked from the snapshot's head on (issue 23) -------


def paused_with_records(tmp_path: Path, stages: int = 6) -> LocalRunStore:
    """A run with two events before its first snapshot, then `stages` records after it,
    closed as a SIGKILL leaves it (no final snapshot)."""
    run = RunDirectory.create(tmp_path / "run")
    run.write_run_info(INFO)
    run.open_log()
    run.append_event("run_started", goal="g")
    run.append_event("note", text="before the snapshot")
    state = RunState(run_id="r1", next_node="a", context={"goal": "g"}, initial={"goal": "g"})
    run.save_whole(state)
    for n in range(stages):
        stage(run, state, f"n{n}", **{f"k{n}": n})
    run.close()
    return run


def snapshot_head(run: LocalRunStore) -> LogHead:
    snapshot = run.read_snapshot()
    assert snapshot is not None
    return snapshot[1]


def rewrite_line(run: LocalRunStore, number: int, old: bytes, new: bytes) -> None:
    lines = run.events_path.read_bytes().splitlines(keepends=True)
    assert old in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(old, new)
    run.events_path.write_bytes(b"".join(lines))


def test_reopening_with_the_snapshots_head_does_not_reread_the_lines_before_it(
        tmp_path: Path) -> None:
    """The documented limit: an edit before the head that keeps every byte offset is not
    seen on a resume (only `delivery verify` reads the whole chain), and the resume point
    is still right."""
    run = paused_with_records(tmp_path)
    assert snapshot_head(run).count == 3
    rewrite_line(run, 1, b'"goal":"g"', b'"goal":"G"')  # the same length
    with pytest.raises(RunStoreError, match="broken event log: line 2: prev"):
        EventLog(run.events_path).close()  # the whole chain: refused
    run.open_log()  # from the snapshot's head on: goes on
    loaded = run.load()
    run.close()
    assert loaded is not None and loaded.state.path == [f"n{n}" for n in range(6)]
    result = verify_run(run.path)  # still detected by delivery verify
    assert (result.ok, result.line_number) == (False, 2)


def test_reopening_refuses_a_log_edited_after_the_snapshots_head(tmp_path: Path) -> None:
    run = paused_with_records(tmp_path)
    head = snapshot_head(run)
    rewrite_line(run, head.count + 2, b'"k1":1', b'"k1":7')  # the record of n1
    with pytest.raises(RunStoreError, match=f"broken event log: line {head.count + 3}: prev"):
        run.open_log()
    assert run.events_path.read_bytes().count(b"\n") == head.count + 6  # nothing appended


def test_reopening_refuses_a_changed_line_at_the_snapshots_head(tmp_path: Path) -> None:
    run = paused_with_records(tmp_path)
    head = snapshot_head(run)
    rewrite_line(run, head.count, b'"next_node":"a"', b'"next_node":"b"')
    with pytest.raises(RunStoreError, match=f"broken event log: line {head.count + 1}: prev"):
        run.open_log()


def test_an_edit_before_the_head_that_moves_it_is_refused_by_the_whole_check(
        tmp_path: Path) -> None:
    run = paused_with_records(tmp_path)
    rewrite_line(run, 2, b"before the snapshot", b"before it")  # shorter: the head moved
    with pytest.raises(RunStoreError, match="broken event log: line 3: prev"):
        run.open_log()


def test_a_torn_last_line_is_still_cut_when_reopening_from_the_head(tmp_path: Path) -> None:
    run = paused_with_records(tmp_path)
    whole = run.events_path.read_bytes()
    run.events_path.write_bytes(whole + b'{"seq":99,"ts":"torn')
    run.tail_path.unlink()  # a SIGKILL, not a power failure: nothing to write back
    run.open_log()
    run.close()
    after = run.events_path.read_bytes()
    assert after.startswith(whole)
    assert json.loads(after[len(whole):])["dropped_bytes"] == len(b'{"seq":99,"ts":"torn')
    assert verify_run(run.path).ok


def test_a_corrupt_snapshot_reopens_with_the_whole_chain_checked(tmp_path: Path) -> None:
    run = paused_with_records(tmp_path)
    run.checkpoint_path.write_text("{")
    rewrite_line(run, 1, b'"goal":"g"', b'"goal":"G"')
    with pytest.raises(RunStoreError, match="broken event log: line 2"):
        run.open_log()


def test_bytes_before_the_snapshots_head_do_not_change_the_resume_point(tmp_path: Path) -> None:
    """Resume takes the snapshot and the records after its head: what is before the head
    is not parsed (here not even JSON, of the same length)."""
    run = paused_with_records(tmp_path)
    head = snapshot_head(run)
    data = run.events_path.read_bytes()
    first = data.index(b"\n")
    run.events_path.write_bytes(b"x" * first + data[first:])
    loaded = run.load()
    assert loaded is not None and loaded.state.context["k5"] == 5
    assert loaded.state.path == [f"n{n}" for n in range(6)]
    assert head.offset > first
