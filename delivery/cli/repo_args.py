"""The options that choose a command's repositories besides `--repo` (SPEC §12):
`--repos-from`, `--org`, `--topic`, `--search`. Light, as run_args is: `delivery --help`
builds them and loads no forge."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_repo_selection(command: argparse.ArgumentParser) -> None:
    command.add_argument("--repos-from", type=Path, metavar="FILE",
                         help="also take the repositories listed in FILE: one owner/name "
                         "or path a line (paths relative to the file), NAME= before it "
                         "names the folder, # comments")
    command.add_argument("--org", default="", metavar="ORG",
                         help="also take the GitHub organisation's repositories (its "
                         "repository search; archived repositories and forks left out)")
    command.add_argument("--topic", action="append", default=[], metavar="T",
                         help="with --org: only repositories with this topic; repeat for "
                         "several, which must all match")
    command.add_argument("--search", default="", metavar="QUERY",
                         help="with --org: only repositories GitHub's repository search "
                         "finds for QUERY (words in the name, description or topics)")
