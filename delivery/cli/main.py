"""The `delivery` command line (SPEC §12)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from delivery.cli import graph, scenarios
from delivery.lang.diagnostics import Diagnostic, has_errors, to_json
from delivery.validation.loader import check_file

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="delivery",
        description="Run DOT-graph workflows that carry a ticket through pull requests.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    validate = commands.add_parser(
        "validate", help="check workflow files before running them",
        description="Check workflow files; exit 0 when no errors, 1 on errors, 2 on usage errors.",
    )
    validate.add_argument("workflows", nargs="+", metavar="WORKFLOW", type=Path)
    validate.add_argument("--format", choices=("text", "json", "github"), default="text")

    run = commands.add_parser("run", help="run a workflow",
                              description="Run a workflow. Exit 0 succeeded, 1 failed, "
                              "2 refused to start, 3 paused.")
    run.add_argument("workflow", type=Path)
    run.add_argument("--goal")
    run.add_argument("--input", action="append", default=[], metavar="K=V")
    run.add_argument("--repo", action="append", default=[], metavar="F=LOC")
    run.add_argument("--agent", default="", metavar="PROFILE",
                     help="agent backend, e.g. replay:replies.json")
    run.add_argument("--forge", choices=("github", "local"), default="local")
    run.add_argument("--workspace", type=Path)
    run.add_argument("--run-dir", type=Path)
    run.add_argument("--answer", action="append", default=[], metavar="NODE=LABEL",
                     help="answer a human gate (scripted runs)")
    run.add_argument("--gates", choices=("deny", "pause", "managed"), default="deny",
                     help="an unanswered human gate off a terminal: deny it (its stage "
                     "fails), pause the run (exit 3; continue with resume --answer), or "
                     "let the node's agent answer it when the gate is delegatable=true")
    run.add_argument("--json", action="store_true",
                     help="print one JSON object: run_id, status, failure_reason, path, "
                     "context, run_dir")
    run.add_argument("--full", action="store_true",
                     help="with --json, print offloaded (over 100 KB) context values whole "
                     "instead of their pointer and size")

    def run_reference(command: argparse.ArgumentParser) -> None:
        command.add_argument("run", metavar="RUN", nargs="?",
                             help="run directory, or run id under WORKSPACE/.delivery/runs/")
        command.add_argument("--last", action="store_true",
                             help="the newest run under WORKSPACE/.delivery/runs/")
        command.add_argument("--workspace", type=Path,
                             help="where run ids are looked up (default: the current folder)")

    resume = commands.add_parser("resume", help="continue a run from its checkpoint")
    run_reference(resume)
    resume.add_argument("--answer", action="append", default=[], metavar="NODE=LABEL",
                        help="answer a human gate the run waits at (repeatable)")
    resume.add_argument("--json", action="store_true", help="print the outcome as JSON")
    resume.add_argument("--full", action="store_true",
                        help="with --json, print offloaded context values whole")

    inspect = commands.add_parser("inspect", help="path taken, outcomes, context, artifacts")
    run_reference(inspect)
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument("--full", action="store_true",
                         help="print offloaded (over 100 KB) context values whole instead "
                         "of their pointer and size")
    inspect.add_argument("--routes", action="store_true",
                         help="list every routing decision: the edge taken, the rule that "
                         "chose it and the values the conditions read")

    verify = commands.add_parser("verify", help="check a run's hash-chained event log")
    run_reference(verify)

    graph.add_parser(commands)
    scenarios.add_parser(commands)
    return parser


def cmd_validate(files: list[Path], fmt: str, out: TextIO, err: TextIO) -> int:
    missing = [f for f in files if not f.is_file()]
    if missing:
        for path in missing:
            print(f"delivery validate: {path}: no such file", file=err)
        return EXIT_USAGE
    all_diagnostics: list[Diagnostic] = []
    for path in files:
        try:
            _, diagnostics = check_file(path)
        except (OSError, UnicodeDecodeError) as problem:
            print(f"delivery validate: {path}: cannot read: {problem}", file=err)
            return EXIT_USAGE
        all_diagnostics += diagnostics
        if fmt == "text":
            for diagnostic in diagnostics:
                print(diagnostic.format_text(), file=out)
            errors = sum(1 for d in diagnostics if d.severity == "error")
            warnings = len(diagnostics) - errors
            verdict = "invalid" if errors else "ok"
            print(f"{path}: {verdict} ({errors} error(s), {warnings} warning(s))", file=out)
        elif fmt == "github":
            for diagnostic in diagnostics:
                print(diagnostic.format_github(), file=out)
    if fmt == "json":
        print(to_json(all_diagnostics), file=out)
    return EXIT_FAILED if has_errors(all_diagnostics) else EXIT_OK


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.command == "validate":
        return cmd_validate(args.workflows, args.format, out, err)
    if args.command == "graph" and args.run is None:
        return graph.cmd_graph(args, out, err)
    if args.command == "test":
        return scenarios.cmd_test(args, out, err)
    from delivery.cli import commands  # the run commands import the engine; validate stays light

    return commands.dispatch(args, out, err)


def entry() -> None:
    # A run's text may hold what the terminal's encoding cannot (a lone surrogate a reply
    # carried): printed escaped, never a UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`delivery inspect RUN | head`): nothing left to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_FAILED
    sys.exit(code)


if __name__ == "__main__":
    entry()
