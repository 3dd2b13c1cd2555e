"""The options of `delivery run | resume | inspect | verify | handlers` (commands.py). Kept
apart from commands.py, which imports the engine: `delivery --help` builds every command's
options and loads no engine (issue 23), as demo_args does for the demo."""

from __future__ import annotations

import argparse
from pathlib import Path

from delivery.cli.repo_args import add_repo_selection
from delivery.cli.state_args import add_state_option


def absolute_path(text: str) -> Path:
    """A directory option as an absolute path: run.json records it, and git runs in other
    directories (a relative --cache would lead somewhere else)."""
    return Path(text).absolute()


def agent_option(text: str) -> str:
    """`--agent`, with a `scripted:FILE` path made absolute: a person names the file from
    where they stand, and run.json keeps the path for resumes run from anywhere."""
    kind, sep, file = text.partition(":")
    if sep and kind.strip() == "scripted" and file.strip():
        return f"scripted:{Path(file.strip()).absolute()}"
    return text


def add_quiet_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--quiet", action="store_true",
                         help="no progress on stderr (a line per stage as it ends, and "
                         "retries); errors are still printed")


def add_run_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="run a workflow",
                              description="Run a workflow. Exit 0 succeeded, 1 failed, "
                              "2 refused to start, 3 paused.")
    run.add_argument("workflow", type=Path, metavar="WORKFLOW",
                     help="the workflow file (.dot) to run")
    run.add_argument("--goal", help="the run's goal text (else the graph's goal or defaults)")
    run.add_argument("--input", action="append", default=[], metavar="K=V",
                     help="a declared input; repeat for each input, each name once")
    run.add_argument("--repo", action="append", default=[], metavar="F=LOC",
                     help="folder F of the run lives at LOC: a local repository path (local "
                     "forge) or owner/name (GitHub); repeat per folder")
    add_repo_selection(run)
    run.add_argument("--agent", default="", metavar="PROFILE", type=agent_option,
                     help="the default agent profile: claude or codex (built in), a name "
                     "from delivery.toml (or [tool.delivery] in pyproject.toml), "
                     "command:<cmd> (command+json:<cmd> etc.), openai:<model>, "
                     "replay:<file.json>, or scripted:<file.toml> (an offline agent that "
                     "writes the files its TOML or JSON file gives, docs/agents.md); a "
                     "node's agent= picks another")
    run.add_argument("--forge", choices=("github", "local"), default=None,
                     help="where the repositories and PRs live (default: local when every "
                     "LOC is a path, github when one is owner/name)")
    run.add_argument("--check", action="append", default=[], metavar="F=COMMAND",
                     help="the local forge's check command for a folder (also "
                     "[forge.local.checks] in delivery.toml)")
    run.add_argument("--branch", default="", metavar="NAME",
                     help="the run's branch in every folder (default: delivery/<ticket slug "
                     "or run id>); name an existing head branch to work on its PRs")
    run.add_argument("--cache", type=absolute_path, metavar="DIR",
                     help="git clone cache (default: $XDG_CACHE_HOME/delivery)")
    run.add_argument("--workspace", type=Path,
                     help="directory the stages work in (default: the current directory)")
    run.add_argument("--run-dir", type=Path,
                     help="this run's directory (default: WORKSPACE/.delivery/runs/RUN_ID)")
    run.add_argument("--logs", type=Path, metavar="DIR",
                     help="also write the run in the Attractor spec's logs layout into DIR "
                     "(manifest.json, checkpoint.json, NODE/status.json, prompt.md, "
                     "response.md) as it goes; resume keeps writing it")
    run.add_argument("--answer", action="append", default=[], metavar="NODE=LABEL",
                     help="answer a human gate (scripted runs)")
    run.add_argument("--gates", choices=("deny", "pause", "managed"), default="deny",
                     help="an unanswered human gate off a terminal: deny it (its stage "
                     "fails), pause the run (exit 3; continue with resume --answer), or "
                     "let the node's agent answer it when the gate is delegatable=true")
    run.add_argument("--budget", default="", metavar="N|$N",
                     help="bound the run's agent usage: N tokens (200000, 200k) or '$N' US "
                     "dollars; over the graph's budget_tokens=/budget_usd=. A warning at "
                     "80%%; at 100%% the run pauses before the next agent stage (exit 3)")
    run.add_argument("--dry-run", action="store_true",
                     help="run every stage up to the first that writes to a forge (publish, "
                     "merge, respond, a forge_token=true script, a probe that would mark "
                     "the PRs) and pause there (exit 3), printing per folder what would be "
                     "published; delivery resume RUN then publishes it")
    run.add_argument("--max-parallel", default=None, metavar="N",
                     help="how many folders a folder stage (worktree_add, publish, probe, "
                     "worktree_remove, a foreach stage) works on at once when neither the "
                     "node nor the graph says max_parallel (default 8); kept for resumes")
    run.add_argument("--max-runners", default=None, metavar="N",
                     help="with --state: a foreach stage with more folders than it runs at "
                     "once is split into at most N chunks (<= 256) for worker jobs "
                     "(delivery work) and the run pauses, reason fan_out (default 1: no "
                     "fan-out); kept for resumes")
    run.add_argument("--json", action="store_true",
                     help="print one JSON object: run_id, status, failure_reason, path, "
                     "context, run_dir (and diffs after a --dry-run)")
    add_quiet_option(run)
    add_state_option(run)
    run.add_argument("--full", action="store_true",
                     help="with --json, print offloaded (over 100 KB) context values whole "
                     "instead of their pointer and size")


def add_resume_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    resume = commands.add_parser(
        "resume", help="continue a run from its checkpoint",
        description="Continue a stopped, failed or paused run from its last checkpoint; the "
        "interrupted stage runs again. The agent profile, folders, forge, branch and "
        "--max-parallel come "
        "from the run's run.json. Exit codes as for run.")
    add_run_reference(resume, with_state=True, workspace="where run ids are looked up; with "
                      "--state: the workspace on this machine (default: the current folder)")
    resume.add_argument("--answer", action="append", default=[], metavar="NODE=LABEL",
                        help="answer the next visit of a human gate; repeatable")
    resume.add_argument("--budget", default="", metavar="N|$N",
                        help="raise (or set) the run's budget: N tokens or '$N' US dollars; "
                        "how a run paused on its budget goes on")
    resume.add_argument("--json", action="store_true", help="print the outcome as JSON")
    resume.add_argument("--full", action="store_true",
                        help="with --json, print offloaded context values whole")
    add_quiet_option(resume)
    add_state_option(resume)
    resume.add_argument("--for-pr", metavar="OWNER/NAME#N", default=None,
                        help="with --state: resume the run that owns this pull request (its "
                        "id is in the PR body's delivery marker)")
    resume.add_argument("--take-over", action="store_true",
                        help="with --state: take the run over from a job that claimed it "
                        "and died, without waiting for its claim to grow stale")
    resume.add_argument("--cache", type=absolute_path, metavar="DIR",
                        help="clone cache (default: $XDG_CACHE_HOME/delivery)")


def add_run_reference(command: argparse.ArgumentParser, *, with_state: bool = False,
                      workspace: str = "where run ids are looked up (default: the current "
                      "folder)") -> None:
    """RUN, --last and --workspace: the run a command reads or continues (run_lookup.py)."""
    state = " (with --state: the run id)" if with_state else ""
    command.add_argument("run", metavar="RUN", nargs="?",
                         help=f"run directory, or run id under WORKSPACE/.delivery/runs/{state}")
    command.add_argument("--last", action="store_true",
                         help="the newest run under WORKSPACE/.delivery/runs/")
    command.add_argument("--workspace", type=Path, help=workspace)


def add_inspect_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inspect = commands.add_parser(
        "inspect", help="path taken, outcomes, context, artifacts",
        description="Show a run: its status, the path taken, each stage's outcome and "
        "tokens, the context and the artifacts. Reads only.")
    add_run_reference(inspect)
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument("--full", action="store_true",
                         help="print offloaded (over 100 KB) context values whole instead "
                         "of their pointer and size")
    inspect.add_argument("--routes", action="store_true",
                         help="list every routing decision: the edge taken, the rule that "
                         "chose it and the values the conditions read")


def add_verify_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = commands.add_parser(
        "verify", help="check a run's hash-chained event log",
        description="Check that a run's event log is intact: every line hash-chained to the "
        "one before. Exit 0 when intact, 1 otherwise.")
    add_run_reference(verify)


def add_handlers_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    handlers = commands.add_parser("handlers", help="the node types this version runs",
                                   description="List the node types this version runs, "
                                   "with their attributes.")
    handlers.add_argument("--json", action="store_true", help="print the table as JSON")
