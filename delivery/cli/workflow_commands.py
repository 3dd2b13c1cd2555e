"""What delivery prints on a GitHub Actions runner can never become a workflow command
unless delivery meant it to (SPEC §13, §14: untrusted text is untrusted everywhere).

The runner reads every line a step prints, on stdout and stderr, as a possible command:
`::name props::data` (after leading whitespace) and the older `##[name props]data`. An
agent's reply, a PR's text or a failure reason may contain such lines. So, in Action mode,
everything is printed between `::stop-commands::<token>` and `::<token>::` (the runner
ignores every command in between; the token is random, so text cannot guess it and resume
processing), and delivery's own commands — masks, annotations — are the only lines printed
outside, with their data escaped as the runner unescapes it (`%`, CR, LF; in properties
also `:` and `,`), so a message cannot end its line and start another.

    with ActionOutput(sys.stdout) as output:     # stop-commands from here on
        output.command("error", reason, file=path, line="3")   # our one command
        print(untrusted, file=output)            # inert text
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from types import TracebackType
from typing import TextIO

from delivery.printable import TextFilter


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_command(name: str, message: str, properties: Mapping[str, str] | None = None
                   ) -> str:
    """`::name k=v,…::message`, every value escaped (the line cannot be split)."""
    props = ",".join(f"{key}={escape_property(str(value))}"
                     for key, value in (properties or {}).items() if value != "")
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def neutralised(text: str) -> str:
    """`text` with no line a runner would read as a command: for text printed where
    stop-commands cannot be used. A line that starts (after blanks) with `::` gets a
    leading `\\u2063` (invisible separator) and `##[` loses its bracket's meaning."""
    lines = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.lstrip().startswith("::"):
            line = "\u2063" + line
        lines.append(line.replace("##[", "##\u2063["))
    return "\n".join(lines)


class Neutralising(TextFilter):
    """A text stream that writes `neutralised` text (stderr in Action mode: the runner
    reads it for commands too, and stop-commands on stdout may be read after it)."""

    def transform(self, text: str) -> str:
        return neutralised(text)


class ActionOutput(Neutralising):
    """A text stream for the runner: commands stopped while it is open (a file-like
    object: `print(..., file=output)` writes inert text)."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(out)
        self.token = ""

    def __enter__(self) -> ActionOutput:
        self._stop()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._resume()
        self.out.flush()

    def _stop(self) -> None:
        self.token = secrets.token_hex(16)
        self.out.write(f"::stop-commands::{self.token}\n")

    def _resume(self) -> None:
        if self.token:
            self.out.write(f"::{self.token}::\n")
            self.token = ""

    def command(self, name: str, message: str, **properties: str) -> None:
        """One of delivery's own workflow commands, its values escaped."""
        stopped = bool(self.token)
        self._resume()
        self.out.write(format_command(name, message, properties) + "\n")
        if stopped:
            self._stop()
        self.out.flush()

    def raw_command(self, line: str) -> None:
        """A command line delivery formatted itself (an annotation of a workflow file);
        only its first line, neutralised after that, is ever a command."""
        first, _, rest = line.partition("\n")
        first = first.replace("\r", "%0D")
        stopped = bool(self.token)
        self._resume()
        self.out.write(first + "\n")
        if stopped:
            self._stop()
        if rest:
            self.write(rest + "\n")

    # as a text stream (Neutralising's): inert while commands are stopped, neutralised as
    # well, should a reader of the log not honour stop-commands


def in_action(environ: Mapping[str, str]) -> bool:
    """On a GitHub Actions runner (which reads the output for workflow commands)."""
    return environ.get("GITHUB_ACTIONS") == "true"
