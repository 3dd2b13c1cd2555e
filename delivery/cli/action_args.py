"""The options of `delivery action init` (SPEC §13 "Setting it up"). Light, as run_args is:
`delivery --help` builds them and loads no forge; the command is delivery.cli.action_init."""

from __future__ import annotations

import argparse
from pathlib import Path

from delivery.cli.repo_args import add_repo_selection


def add_action_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]
                      ) -> None:
    action = commands.add_parser("action", help="set up the GitHub Action (action init)",
                                 description="Set up delivery's GitHub Action.")
    subcommands = action.add_subparsers(dest="action_command", metavar="SUBCOMMAND")
    subcommands.required = True
    init = subcommands.add_parser(
        "init", help="write the Action's workflow files and print the setup steps",
        description="Write the control, worker and relay workflows and "
        ".github/delivery-repos, and print the GitHub App, secrets and labels to create.")
    init.add_argument("--repos", type=Path, metavar="FILE",
                      help="the target repositories: one owner/name (or NAME=owner/name) "
                      "a line, # comments")
    add_repo_selection(init)
    init.add_argument("--state-repo", required=True, metavar="OWNER/NAME",
                      help="the control repository: it runs the workflows and keeps the "
                      "runs' state (refs/delivery/runs/*)")
    init.add_argument("--out", type=Path, default=Path(".github") / "workflows",
                      metavar="DIR", help="where to write the workflows (default "
                      ".github/workflows); .github/delivery-repos goes beside DIR")
    init.add_argument("--action", default="", metavar="OWNER/REPO@SHA",
                      help="the delivery action to use, pinned to a commit (the release "
                      "you vetted)")
    init.add_argument("--create-labels", action="store_true",
                      help="create the labels delivery and delivery:stop in the control "
                      "repository (GITHUB_TOKEN; found ones are kept)")
    init.add_argument("--force", action="store_true",
                      help="overwrite files that exist already")
