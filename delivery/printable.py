"""What the CLI prints is shown by the terminal, never obeyed by it.

A run's text — replies, context values, failure reasons and a script's output in them, PR
titles — is anyone's (an agent's, a reviewer's). A control character in it would act on
the reader's terminal instead of being read: an escape sequence retitles the window,
writes the clipboard (OSC 52), moves the cursor back over what was printed or clears it, a
carriage return hides the start of a line, a bidi override shows text in another order
than it is. Every such character is printed as its `\\uXXXX` escape instead (valid inside
a JSON string as well, so `--json` output stays JSON and decodes to the same value).
Newlines and tabs pass. The CLI's own output holds none of them: it loses nothing.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final, TextIO

# C0 controls but tab and newline, DEL, C1 controls (U+009B is a CSI on some terminals),
# and the bidi embeddings, overrides, isolates and marks
_SHOWN: Final = (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0),
                 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_TABLE: Final = {code: f"\\u{code:04x}" for code in _SHOWN}
_FOUND: Final = re.compile("[" + "".join(re.escape(chr(code)) for code in _SHOWN) + "]")


def printable(text: str) -> str:
    """`text` with each control character written as its `\\uXXXX` escape."""
    # one scan in C first: almost nothing printed holds one
    return text.translate(_TABLE) if _FOUND.search(text) is not None else text


class TextFilter:
    """A text stream that writes `transform(text)` of all it is given to `out`, and is
    that stream otherwise (flush, isatty, encoding, fileno…). The CLI's and the Action's
    output pass through a few of these (printable text, secrets masked, workflow commands
    neutralised)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def transform(self, text: str) -> str:
        return text

    def write(self, text: str) -> int:
        self.out.write(self.transform(text))
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return self.out.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, …: the stream's own
        return getattr(self.out, name)


class PrintableStream(TextFilter):
    """Writes `printable` text: the CLI's stdout and stderr, the Action's output."""

    def transform(self, text: str) -> str:
        return printable(text)


class PrintableFilter(logging.Filter):
    """Makes each record's message `printable` (on `delivery`'s logger, whose warnings
    reach stderr without passing the CLI's streams)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = printable(message)
        if shown != message:
            record.msg, record.args = shown, ()
        return True
