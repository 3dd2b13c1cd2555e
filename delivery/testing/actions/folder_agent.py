"""A per-folder scripted agent as a command, for campaigns in the simulated Actions world:
each turn takes `--delay` seconds (an agent's minutes, scaled down), writes one line into
`CHANGES.md` of its working directory (the folder's worktree) and appends
`<folder> <start> <end> <stage> <cwd>` to `--log`, a file outside every runner, so a test
counts the calls made per folder and stage, tells on which runner each ran (the worktree's
path), and measures a stage's wall time across worker jobs.

    [profiles.claude]
    backend = "command"
    command = "/path/to/python -m delivery.testing.actions.folder_agent --delay 2 --log /tmp/calls"

The folder is read from the prompt's `folder NAME.` (a workflow's prompt says
`folder {{ folder.name }}.`), else it is the working directory's name; the stage from its
`stage NAME.`, else `-`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

_FOLDER = re.compile(r"\bfolder ([\w.-]+)\.")
_STAGE = re.compile(r"\bstage ([\w.-]+)\.")


def folder_of(prompt: str, workspace: Path) -> str:
    found = _FOLDER.findall(prompt)
    return found[-1] if found else workspace.name


def turn(prompt: str, workspace: Path, *, delay: float, log: Path | None) -> str:
    """Play one turn in `workspace`; the reply."""
    folder = folder_of(prompt, workspace)
    stages = _STAGE.findall(prompt)
    started = time.time()
    time.sleep(delay)
    with (workspace / "CHANGES.md").open("a", encoding="utf-8") as changes:
        changes.write(f"- {folder}: changed by the campaign\n")
    ended = time.time()
    if log is not None:
        # one short line per call in append mode: lines of concurrent workers never mix
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, f"{folder} {started:.3f} {ended:.3f} "
                     f"{stages[-1] if stages else '-'} {workspace}\n".encode())
        finally:
            os.close(descriptor)
    text = f"{folder}: a line in CHANGES.md."
    return f"{text}\n\n" + json.dumps({"context_updates": {"summary": text}})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="folder_agent")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args(argv)
    print(turn(sys.stdin.read(), Path.cwd(), delay=args.delay, log=args.log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
