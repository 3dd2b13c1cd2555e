"""`events.tail` (delivery.store.tail): lines added are written by the next flush, all of
them, in order; what a flush wrote is what a power failure leaves to restore, whatever
adds, flushes and restarts came before."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.store.tail import HEADER, Tail, mirrored

# (operation, lines it adds): "add" a batch of lines, "flush", or "restart" (the log was
# flushed: the mirror starts again after it)
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(min_value=1, max_value=3)),
    st.tuples(st.just("flush"), st.just(0)),
    st.tuples(st.just("restart"), st.just(0))), max_size=25)


def _line(seq: int) -> bytes:
    return b'{"seq":%d,"type":"x","pad":"%s"}\n' % (seq, b"z" * (seq % 7))


@settings(max_examples=200, deadline=None)
@given(OPERATIONS)
def test_a_flush_leaves_every_line_added_since_the_restart(
        operations: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.tail"
        tail = Tail(path, size=HEADER + 4096)
        seq, since = 0, 0  # lines added; the count the mirror starts after
        tail.restart(0, "0" * 64, 0)
        for operation, lines in operations:
            if operation == "add":
                batch = b"".join(_line(seq + n + 1) for n in range(lines))
                if tail.add(batch):
                    seq += lines
                else:  # full: the log would be flushed and the mirror restarted
                    tail.restart(seq, "0" * 64, 0)
                    since = seq
            elif operation == "restart":
                tail.restart(seq, "0" * 64, 0)
                since = seq
            else:
                tail.flush()
                found = mirrored(path)
                assert found is not None and found[0] == since
                assert found[3] == [_line(n).rstrip(b"\n") for n in range(since + 1, seq + 1)]
        tail.close()
