"""The options of `delivery close` (close_command.py, which imports the engine: kept apart
so that `delivery --help` loads none)."""

from __future__ import annotations

import argparse
from pathlib import Path

from delivery.cli.run_args import add_run_reference
from delivery.cli.state_args import add_state_option


def add_close_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    close = commands.add_parser(
        "close", help="close a run's open pull requests and cancel the run",
        description="Give up on a run: close every open pull request of the run (on GitHub "
        "with a comment saying why), leave merged ones alone, and mark the run cancelled "
        "(a resume refuses it). Running it again does nothing new. Exit 0 done, 1 when a "
        "pull request or branch could not be closed or deleted (close again), 2 refused.")
    add_run_reference(close, with_state=True)
    close.add_argument("--delete-branches", action="store_true",
                       help="also delete the run's branch where the run published the "
                       "closed PR (never a default branch, a merged PR's or a person's)")
    close.add_argument("--comment", default="", metavar="TEXT",
                       help="what the closing comment says instead of the default text")
    add_state_option(close, "the run is kept on refs/delivery/runs/RUN_ID of this "
                     "repository (event mode)")
    close.add_argument("--cache", type=Path, metavar="DIR",
                       help="clone cache (default: $XDG_CACHE_HOME/delivery)")
