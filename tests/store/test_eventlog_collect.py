"""Opening a log with `collect` keeps the events of that type its chain check parsed
(`EventLog.take_collected`): a resume reads its stage records from them instead of reading
and hashing the log a second time. They must be exactly what `read_after` gives."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.store.eventchain import LogHead, read_after
from delivery.store.eventlog import EventLog

# one event: its type, whether it is written by hand (keys in another order, spaces: the
# lines the checks parse rather than compare by bytes), and a value
EVENTS = st.lists(st.tuples(st.sampled_from(["state", "stage_started", "note"]),
                            st.booleans(), st.text(max_size=6)), min_size=1, max_size=30)


def _write(path: Path, events: list[tuple[str, bool, str]]) -> list[LogHead]:
    """The log of `events`; the head after each line."""
    heads = []
    with EventLog(path) as log:
        log.append("run_started")
        heads.append(log.head)
    for kind, by_hand, value in events:
        if by_hand:
            head = heads[-1]
            event = {"value": value, "prev": head.head, "type": kind, "seq": head.count + 1,
                     "ts": "2026-01-01T00:00:00Z", **({"pad": "x" * 150} if value else {})}
            line = json.dumps(event, sort_keys=bool(value)).encode()
            with path.open("ab") as file:
                file.write(line + b"\n")
            heads.append(LogHead(head.count + 1, hashlib.sha256(line).hexdigest(),
                                 head.offset + len(line) + 1))
        else:
            with EventLog(path) as log:
                log.append(kind, value=value)
                heads.append(log.head)
    return heads


def _reopened(log: EventLog, path: Path, since: LogHead) -> EventLog:
    log.close()
    return EventLog(path, verified=since, collect="state")


@settings(max_examples=100, deadline=None)
@given(EVENTS, st.data())
def test_the_collected_events_are_what_read_after_gives(
        events: list[tuple[str, bool, str]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.jsonl"
        heads = _write(path, events)
        at = data.draw(st.integers(-1, len(heads) - 1))
        since = heads[at] if at >= 0 else LogHead()
        # a head on a line written otherwise than by the log is not taken as checked:
        # the whole log is checked (and collected) from its start
        start = LogHead() if at > 0 and events[at - 1][1] else since
        expected = list(read_after(path, start, "state"))
        log = EventLog(path, verified=since, collect="state")
        checked = log.head
        try:
            log.append("log_repaired")  # appended after the check: not among them
            if start != since:
                assert log.take_collected(since) is None
                log = _reopened(log, path, since)
                checked = log.head
            taken = log.take_collected(start)
            assert taken is not None
            collected, end = taken
            assert end == checked
            assert collected + list(read_after(path, end, "state")) == expected
            assert log.take_collected(since) is None  # taken once
        finally:
            log.close()


def test_nothing_is_collected_from_another_head_or_without_collect(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    heads = _write(path, [("state", False, "a"), ("state", False, "b")])
    with EventLog(path, verified=heads[1], collect="state") as log:
        assert log.take_collected(heads[0]) is None
    with EventLog(path, verified=heads[1]) as log:
        assert log.take_collected(heads[1]) is None
    # a head the log does not hold at its offset: the whole log is checked, from the start
    moved = LogHead(heads[1].count, "0" * 64, heads[1].offset)
    with EventLog(path, verified=moved, collect="state") as log:
        taken = log.take_collected(LogHead())
    assert taken is not None and [e["value"] for e in taken[0]] == ["a", "b"]
