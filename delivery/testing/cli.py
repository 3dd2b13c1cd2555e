"""Run the `delivery` command line in-process and get what a user would see."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from delivery.cli.main import main


class CliResult(NamedTuple):
    """Exit status, stdout, stderr: `code, out, err = invoke(...)` or `.code`/`.out`/`.err`."""

    code: int
    out: str
    err: str


def invoke(*argv: str | Path, cwd: Path | None = None) -> CliResult:
    """`delivery ARGV` in this process: exit status, stdout and stderr as text.

    `cwd` runs it from that folder (run ids and `--last` are looked up there). Nothing is
    caught: an unexpected exception fails the calling test, as a traceback would be a bug.
    """
    out, err = io.StringIO(), io.StringIO()
    with _working_directory(cwd):
        code = main([str(arg) for arg in argv], out=out, err=err)
    return CliResult(code, out.getvalue(), err.getvalue())


@contextmanager
def _working_directory(cwd: Path | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    before = Path.cwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)
