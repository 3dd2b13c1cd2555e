"""`delivery preflight --repo F=LOC... [--state …] [--merge-method M] [--json]` (SPEC §7.1,
§12): what the token may do where, as a table or JSON; nothing is written.

Exit 0 when nothing blocks a run, 1 when something does (each problem one line: folder,
field, problem, fix), 2 when the check itself could not be made (a `--repo` that names
nothing, no token, GitHub unreachable).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TextIO

from delivery.cli.repo_args import add_repo_selection

EXIT_OK, EXIT_BLOCKED = 0, 1


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    preflight = commands.add_parser(
        "preflight", help="check what the token may do in each repository, writing nothing",
        description="For each folder: can the token read, push and open PRs; the default "
        "branch; what branch protection requires (checks, reviews, delivery/change-set); "
        "which merge methods are allowed. With --state: can it push refs/delivery/* (a "
        "dry-run push). Exit 0 ok, 1 blocked, 2 when the check could not be made.")
    preflight.add_argument("--repo", action="append", default=[], metavar="F=LOC",
                           help="folder F is the repository at LOC (a path, or owner/name "
                           "on GitHub); repeat per folder")
    add_repo_selection(preflight)
    preflight.add_argument("--forge", choices=("github", "local"), default=None,
                           help="where the repositories live (default: github when a LOC "
                           "is owner/name, else local)")
    preflight.add_argument("--state", metavar="git:OWNER/NAME|PATH", default=None,
                           help="also check that the token may push refs/delivery/* there")
    preflight.add_argument("--merge-method", choices=("merge", "squash", "rebase"),
                           default="merge", help="the method the run merges with (a merge "
                           "node's method=; default merge)")
    preflight.add_argument("--check", action="append", default=[], metavar="F=COMMAND",
                           help="the local forge's check command for a folder")
    preflight.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_preflight(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # the engine loads for this command only: `delivery validate` stays light
    from delivery.cli.repo_choice import chosen_repos
    from delivery.engine import preflight_gate
    from delivery.engine.run_inputs import parse_assignments
    from delivery.errors import RunRefused
    from delivery.forges.preflight import table
    from delivery.forges.select import (
        forge_kind,
        is_github_location,
        local_settings,
        open_forge,
        require_settings,
    )
    from delivery.state.remote import state_remote
    from delivery.store.base import RemoteTarget

    base = Path.cwd()
    if not (args.repo or args.repos_from or args.org):
        raise RunRefused("delivery preflight", "names no repository",
                         "pass --repo F=LOC, --repos-from FILE or --org ORG")
    given = chosen_repos(args, err, "preflight")
    kind = forge_kind(given.values(), args.forge, base)
    repos = {folder: (location if kind == "github" and is_github_location(location, base)
                      else _local_repository(folder, location, base) if kind == "local"
                      else str((base / Path(location).expanduser()).resolve()))
             for folder, location in given.items()}
    require_settings(kind, os.environ)
    configured, approvals = local_settings(base)
    checks = {**configured, **parse_assignments(args.check, "--check")}
    state: RemoteTarget | None = None
    if args.state:
        remote, headers = state_remote(args.state, os.environ)
        state = RemoteTarget(args.state, remote, tuple(headers))
    forge = open_forge(kind, checks=checks, required_approvals=approvals)
    try:
        report = preflight_gate.preflight(forge, repos, merge_method=args.merge_method,
                                          state=state, environ=dict(os.environ),
                                          checks=checks, required_approvals=approvals)
    finally:
        close = getattr(forge, "close", None)
        if callable(close):
            close()
    if args.json:
        shown = report.model_dump(mode="json") | {"blocked": report.blocked,
                                                 "problems": [p.line() for p in
                                                              report.problems]}
        print(json.dumps(shown, indent=2, sort_keys=True), file=out)
    else:
        for line in table(report):
            print(line, file=out)
    return EXIT_BLOCKED if report.blocked else EXIT_OK


def _local_repository(folder: str, location: str, base: Path) -> str:
    """The path of a local `--repo`, refused as `delivery run` refuses it, in its words (a
    run's workflow merges: preflight checks the merge method too)."""
    from delivery.engine.run_setup import Spelling, local_location, refuse_local_repository

    spelling = Spelling(cli=True)
    path = str(local_location(folder, location, base, spelling))
    refuse_local_repository(folder, path, merges=True, spelling=spelling)
    return path
