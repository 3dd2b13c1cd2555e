"""The `delivery demo` options (kept apart from the demo, which imports the engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEMO_AGENT = "delivery-demo"  # the profile name run.json records: `resume` brings it back


def add_parser(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="the main job, offline: two sample repositories, the local forge",
        description="Deliver a ticket across two sample repositories on the local forge with "
        "a scripted agent: a CI failure is repaired, a review is answered, both PRs merge "
        "in order and the worktrees are removed. Exit 0 when both PRs merged.")
    demo.add_argument("--dir", type=Path, metavar="DIR",
                      help="keep everything in DIR (must be empty or absent; default: a "
                      "temporary directory, removed afterwards)")
