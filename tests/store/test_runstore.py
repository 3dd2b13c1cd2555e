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
from delivery.store.runstore import (
    STAGE_FILES,
    ZERO_HASH,
    EventLog,
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


def test_create_makes_missing_parents_and_artifacts_dir(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "runs" / "r1")
    assert run.artifacts_dir.is_dir()
    assert run.run_json == tmp_path / "runs" / "r1" / "run.json"


def test_create_refuses_a_directory_that_already_holds_a_run(tmp_path: Path) -> None:
    RunDirectory.create(tmp_path).write_run_info({"workflow": "w.dot"})
    with pytest.raises(RunStoreError, match="already holds a run"):
        RunDirectory.create(tmp_path)


def test_open_refuses_a_directory_without_run_json(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError, match=r"not a run directory: .*"):
        RunDirectory.open(tmp_path)


def test_run_store_error_is_a_run_error() -> None:
    assert issubclass(RunStoreError, RunError)


def test_run_info_round_trips(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    run.write_run_info({"workflow": "w.dot", "inputs": {"ticket": "ABC-1"}})
    assert RunDirectory.open(tmp_path).read_run_info() == {
        "workflow": "w.dot",
        "inputs": {"ticket": "ABC-1"},
    }


# --- checkpoints ----------------------------------------------------------------------


def test_load_checkpoint_is_none_before_the_first_save(tmp_path: Path) -> None:
    assert RunDirectory.create(tmp_path).load_checkpoint() is None


def test_checkpoint_round_trips_as_compact_json(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    run.save_checkpoint({"node": "plan", "context": {"a": [1, 2]}})
    run.save_checkpoint({"node": "build", "context": {"a": [1, 2, 3]}})
    assert run.load_checkpoint() == {"node": "build", "context": {"a": [1, 2, 3]}}
    text = run.checkpoint_path.read_text()
    assert text.endswith("\n") and "\n" not in text.rstrip(" \n")


def test_a_crash_mid_save_leaves_the_last_complete_checkpoint(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    run.write_run_info({"workflow": "w.dot"})
    run.save_checkpoint({"node": "plan"})
    # What a save killed before os.replace leaves behind: a half-written temporary file.
    (tmp_path / "checkpoint.json.0123456789abcdef.tmp").write_text('{"node": "bui')
    assert RunDirectory.open(tmp_path).load_checkpoint() == {"node": "plan"}


SAVER = """
import sys
from pathlib import Path
from delivery.store.runstore import RunDirectory

run = RunDirectory.open(Path(sys.argv[1]))
n = 0
while True:
    n += 1
    run.save_checkpoint({"n": n, "context": {"padding": "x" * 20000}})
    print(n, flush=True)
"""


def test_a_saver_killed_with_sigkill_leaves_a_complete_checkpoint(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "run")
    run.write_run_info({"workflow": "w.dot"})
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    with subprocess.Popen(
        [sys.executable, str(script), str(run.path)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        while (last := int(child.stdout.readline())) < 50:
            pass
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    checkpoint = run.load_checkpoint()
    assert checkpoint is not None
    assert checkpoint["n"] in (last, last + 1)
    assert len(checkpoint["context"]["padding"]) == 20000


def test_saving_leaves_no_temporary_files(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    for n in range(5):
        run.save_checkpoint({"n": n})
    left = {p.name for p in tmp_path.iterdir()}
    assert left - {"checkpoint.previous.json"} == {"artifacts", "checkpoint.json"}


@pytest.mark.parametrize("content", ['{"node": "pl', "", "[1, 2]"])
def test_a_corrupt_checkpoint_raises_naming_the_file(tmp_path: Path, content: str) -> None:
    run = RunDirectory.create(tmp_path)
    run.checkpoint_path.write_text(content)
    with pytest.raises(RunStoreError, match=r"checkpoint\.json: corrupt checkpoint"):
        run.load_checkpoint()


def test_a_checkpoint_json_cannot_hold_is_refused(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path)
    with pytest.raises(RunStoreError, match=r"checkpoint\.json: cannot store"):
        run.save_checkpoint({"when": object()})


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
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["artifacts"]


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


def write_events(path: Path, n: int) -> tuple[int, str]:
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
        assert log.head == (0, ZERO_HASH)
        event = log.append("x")
        assert log.head == (1, event["hash"])
    assert EventLog(path).head == (1, event["hash"])


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
    assert verify_events(tmp_path / "e.jsonl", (0, ZERO_HASH)).ok


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
        assert log.head[0] == 4
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
        assert log.head[0] >= 25
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
    run = RunDirectory.create(tmp_path / "run")
    run.write_run_info({"workflow": "w.dot"})
    count, head = write_events(run.events_path, events)
    run.save_checkpoint({"node": "plan", "events": {"count": count, "head": head}})
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


# --- the unsynced tail a checkpoint carries -------------------------------------------


def test_record_carries_the_lines_appended_since_the_last_sync(tmp_path: Path) -> None:
    with EventLog(tmp_path / "events.jsonl", sync_each=False) as log:
        log.append("a")
        log.sync()
        log.append("b")
        log.append("c")
        record = log.record()
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert record["count"] == 3 and record["tail"] == lines[1:]


def test_record_syncs_instead_once_the_tail_passes_the_limit(tmp_path: Path) -> None:
    with EventLog(tmp_path / "events.jsonl", sync_each=False) as log:
        log.append("a", text="x" * 100)
        assert len(log.record(tail_limit=1000)["tail"]) == 1
        assert log.record(tail_limit=50)["tail"] == []


def test_restore_writes_back_the_carried_lines_a_crash_took(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, sync_each=False) as log:
        for n in range(5):
            log.append("step", n=n)
        record = log.record(tail_limit=10**6)
    whole = path.read_bytes()
    path.write_bytes(b"".join(whole.splitlines(keepends=True)[:2]))
    with EventLog(path, restore=record) as log:
        assert log.head == (record["count"], record["head"])
    assert path.read_bytes() == whole


def test_restore_refuses_lines_that_do_not_continue_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, sync_each=False) as log:
        for n in range(3):
            log.append("step", n=n)
        record = log.record(tail_limit=10**6)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0])
    forged = dict(record, tail=[record["tail"][0], record["tail"][0], record["tail"][2]])
    with pytest.raises(RunStoreError, match="do not continue the log's chain"):
        EventLog(path, restore=forged)
    assert path.read_bytes() == lines[0]  # nothing was written
