"""The repositories of `delivery run` and `delivery preflight`: `--repo`, `--repos-from`
and `--org` resolved (delivery.forges.repo_selection), and the list printed on stderr
before anything runs when more than `--repo` chose it."""

from __future__ import annotations

import argparse
import os
from typing import TextIO

from delivery.engine.run_inputs import parse_assignments
from delivery.errors import RunRefused
from delivery.forges.repo_selection import RepoSelection, resolve_repositories


def chosen_repos(args: argparse.Namespace, err: TextIO, command: str) -> dict[str, str]:
    """folder -> location, or RunRefused naming what is wrong."""
    selection = RepoSelection(repos=args.repo, repos_from=args.repos_from, org=args.org,
                              topics=args.topic, search=args.search)
    if not selection.beyond_repo:
        if selection.topics or selection.search:
            raise RunRefused("--topic/--search", "narrow an --org search and no --org was "
                             "given", "add --org ORG")
        return parse_assignments(args.repo, "--repo")  # as ever, with its own refusals
    if selection.org and getattr(args, "forge", None) == "local":
        raise RunRefused(f"--org {selection.org}", "takes repositories on GitHub, and "
                         "--forge local was asked for", "drop --forge local, or list local "
                         "paths with --repos-from")
    chosen = resolve_repositories(selection, environ=os.environ)
    count = len(chosen.repos)
    print(f"delivery {command}: {count} repositor{'y' if count == 1 else 'ies'} "
          "(folder = repository):", file=err)
    for line in chosen.lines():
        print(f"  {line}", file=err)
    return chosen.repos
