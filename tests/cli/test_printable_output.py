"""What the CLI prints of a run's text (an agent's reply, a script's output, a context value)
reaches the terminal as text: control characters — escape sequences, carriage returns, C1
controls, bidi overrides — are printed as `\\uXXXX` escapes, and `--json` still decodes to
the values as stored."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from delivery.printable import PrintableFilter, printable
from delivery.testing import flow
from delivery.testing.cli import invoke
from delivery.testing.runs import reply, write_flow

# a window title, the clipboard written (OSC 52), the screen cleared, a line's start
# hidden, a C1 CSI, and text shown reversed
HOSTILE = ("\x1b]0;owned\x07 \x1b]52;c;ZWNobyBoaQ==\x07 \x1b[2J done\rall tests pass "
           "\x9b31m \u202etxt.exe")
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")

FLOW = flow("""
review [type=prompt, prompt="Review it", outputs="summary:text"]
check [shape=parallelogram, script="printf '\\\\033]0;owned\\\\007 broke' >&2; exit 1"]
start -> review -> check -> exit
""", goal="Ship it")


def test_control_characters_are_written_as_escapes_and_the_rest_as_it_is() -> None:
    assert printable("\x1b[2J\r\x07\x9b\u202e") == "\\u001b[2J\\u000d\\u0007\\u009b\\u202e"
    kept = "two lines\n\tindented, été, 日本語, emoji 🚀"
    assert printable(kept) is kept


@given(st.text())
def test_no_control_character_but_newline_and_tab_is_left_in_any_text(text: str) -> None:
    shown = printable(text)
    assert not any(ch in shown for ch in RAW)
    assert all(ch in "\n\t" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0) for ch in shown)
    if shown == text:
        assert printable(text) is text  # nothing to escape: the same string


def run_hostile(tmp_path: Path) -> tuple[Path, str, str]:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"review": [reply({"summary": HOSTILE}, prose=HOSTILE)]}),
                       encoding="utf-8")
    result = invoke("run", write_flow(tmp_path, FLOW), "--agent", f"replay:{replies}",
                    "--workspace", tmp_path, "--run-dir", tmp_path / "run")
    assert result.code == 1, result.err  # the script failed
    return tmp_path / "run", result.out, result.err


def test_a_run_prints_a_scripts_escape_sequences_as_text(tmp_path: Path) -> None:
    _, out, err = run_hostile(tmp_path)
    assert "\\u001b]0;owned\\u0007 broke" in out + err
    assert not any(ch in out + err for ch in RAW)


def test_inspect_shows_a_hostile_context_value_as_text(tmp_path: Path) -> None:
    run, _, _ = run_hostile(tmp_path)
    shown = invoke("inspect", run)
    assert shown.code == 0, shown.err
    assert "summary = \\u001b]0;owned\\u0007" in shown.out
    assert not any(ch in shown.out + shown.err for ch in RAW)


def test_inspect_json_still_decodes_to_the_stored_value(tmp_path: Path) -> None:
    run, _, _ = run_hostile(tmp_path)
    shown = invoke("inspect", run, "--json")
    assert not any(ch in shown.out for ch in RAW)
    assert json.loads(shown.out)["context"]["summary"] == HOSTILE


def test_a_log_message_is_made_printable_before_any_handler_writes_it() -> None:
    record = logging.LogRecord("delivery", logging.WARNING, __file__, 1, "resume: %s",
                               (HOSTILE,), None)
    assert PrintableFilter().filter(record)
    assert not any(ch in record.getMessage() for ch in RAW)
    assert record.getMessage().startswith("resume: \\u001b]0;owned")
