"""Events appended with `defer` (the ones that end a stage) are written with the next line
or flush, in one write, and chained as if written at once."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from delivery.store.eventchain import verify_events
from delivery.store.eventlog import EventLog


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_a_deferred_event_is_written_with_the_next_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path) as log:
        log.append("stage_started", node="a")
        finished = log.append("stage_finished", defer=True, node="a")
        taken = log.append("edge_taken", defer=True, source="a", target="b")
        assert len(_lines(path)) == 1  # held back, nothing waits between them and the next
        assert log.head.count == 3 and log.head.head == taken["hash"]
        log.append("stage_started", node="b")
        lines = _lines(path)
    assert [json.loads(line)["type"] for line in lines] == [
        "stage_started", "stage_finished", "edge_taken", "stage_started"]
    assert hashlib.sha256(lines[1]).hexdigest() == finished["hash"]
    assert json.loads(lines[2])["prev"] == finished["hash"]
    assert verify_events(path).ok


def test_sync_and_close_write_what_was_deferred(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path, tail=tmp_path / "events.tail")
    log.append("stage_finished", defer=True, node="a")
    log.sync()
    assert len(_lines(path)) == 1
    log.append("edge_taken", defer=True, source="a", target="b")
    head = log.head
    log.close()
    assert len(_lines(path)) == 2 and head.offset == path.stat().st_size
    assert verify_events(path, head).ok
