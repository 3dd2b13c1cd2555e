"""The options of `delivery probe` and `delivery review` (forge_commands.py). Kept apart from
forge_commands, which imports the forges and the engine: `delivery --help` builds every
command's options and loads neither (issue 23)."""

from __future__ import annotations

import argparse


def add_probe_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    probe = commands.add_parser(
        "probe", help="print the PR, thread, worktree and diff facts of some repositories",
        description="Observe pull requests across repositories and print the flat facts "
        "(per folder and roll-ups). LOC is a path (local forge) or owner/name (GitHub), "
        "optionally naming the PR: LOC#12 or LOC@branch. Exit 1 when a folder cannot be read.")
    probe.add_argument("--repo", action="append", default=[], metavar="F=LOC", required=True,
                       help="folder F is the repository at LOC (a path, or owner/name on "
                       "GitHub; LOC#12 or LOC@branch names the PR); repeat per folder")
    probe.add_argument("--forge", choices=("github", "local"), default=None,
                       help="where the pull requests live (default: github when a LOC is "
                       "owner/name, else local)")
    probe.add_argument("--check", action="append", default=[], metavar="F=COMMAND",
                       help="the local forge's check command for a folder")
    probe.add_argument("--json", action="store_true",
                       help="print the flat facts, per folder and roll-ups, as JSON")


def add_review_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    review = commands.add_parser(
        "review", help="review a pull request on the local forge",
        description="Review a local-forge pull request: approve it, request changes, or "
        "open and resolve review threads. TARGET is FOLDER#N (with --repo or --run) or "
        "PATH#N.")
    review.add_argument("target", metavar="TARGET",
                        help="the pull request: FOLDER#N (with --repo or --run) or PATH#N")
    action = review.add_mutually_exclusive_group(required=True)
    action.add_argument("--approve", action="store_true", help="approve the pull request")
    action.add_argument("--request-changes", metavar="TEXT",
                        help="request changes, saying what")
    action.add_argument("--comment", metavar="TEXT", help="open a review thread")
    action.add_argument("--resolve", type=int, metavar="THREAD", help="resolve a thread")
    review.add_argument("--body", default="", help="text of an approval")
    review.add_argument("--path", default="", help="file a --comment is about")
    review.add_argument("--line", type=int, default=0, help="line a --comment is about")
    review.add_argument("--author", default="", help="reviewer name (default: $USER)")
    review.add_argument("--repo", action="append", default=[], metavar="F=LOC",
                        help="folder F is the repository at path LOC; repeat per folder")
    review.add_argument("--run", metavar="RUN", help="take the folders from this run")
