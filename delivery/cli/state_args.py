"""The options of event mode (state_commands.py): `--state` on the commands that take it, and
`delivery runs`. Kept apart from state_commands, which imports the engine: `delivery --help`
builds every command's options and loads no engine (issue 23)."""

from __future__ import annotations

import argparse
from pathlib import Path

STATE_HELP = ("keep the run's state on refs/delivery/runs/RUN_ID of this repository, saved "
              "after every stage (event mode: waits and unanswered gates save and exit 3)")


def add_state_option(parser: argparse.ArgumentParser, text: str = STATE_HELP) -> None:
    parser.add_argument("--state", metavar="git:OWNER/NAME|PATH", default=None, help=text)


def add_runs_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = commands.add_parser(
        "runs", help="runs with their status (local or a state repo)",
        description="List runs with their status and the node each waits at: the local run "
        "directories of a workspace, or the runs kept on a state repository's refs.")
    add_state_option(runs, "list the runs kept on refs/delivery/runs/* of this repository "
                     "instead of the local run directories")
    runs.add_argument("--workspace", type=Path, help="where local runs are (default: .)")
    runs.add_argument("--json", action="store_true", help="print the runs as JSON")
