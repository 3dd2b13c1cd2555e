"""The `delivery` command line (SPEC §12)."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import logging
import os
import signal
import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn, TextIO, cast

from delivery import __version__
from delivery.cli import graph, scenarios
from delivery.cli.demo_args import add_parser as demo_parser
from delivery.cli.diagnostics import file_problem
from delivery.cli.workflow_commands import ActionOutput, Neutralising, in_action
from delivery.printable import PrintableFilter, PrintableStream
from delivery.redact import RedactingFilter, RedactingStream, Redactor

if TYPE_CHECKING:
    from delivery.lang.diagnostics import Diagnostic

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class _UsageError(Exception):
    """An argparse error, raised instead of exiting so that `main` prints it (on its own
    `err`) with the usage of the command that was wrong, not the top-level one."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


# One example per command, shown under its --help (and checked by the tests to parse).
EXAMPLES = {
    "validate": ["delivery validate workflows/deliver.dot",
                 "delivery validate workflows/ --format github"],
    "run": ["delivery run workflows/deliver.dot --input ticket=https://tracker.example/T-1 \\",
            "    --repo api=../api.git --repo web=../web.git --agent command:claude"],
    "resume": ["delivery resume .delivery/runs/RUN_ID", "delivery resume --last"],
    "runs": ["delivery runs", "delivery runs --state git:octo/delivery-state --json"],
    "inspect": ["delivery inspect --last", "delivery inspect RUN_ID --routes"],
    "verify": ["delivery verify .delivery/runs/RUN_ID"],
    "parse": ["delivery parse workflows/deliver.dot --json"],
    "handlers": ["delivery handlers --json"],
    "probe": ["delivery probe --repo api=octo/api#12 --repo web=octo/web@feature --json"],
    "preflight": ["delivery preflight --repo api=octo/api --repo web=octo/web "
                  "--state git:octo/delivery-state"],
    "review": ["delivery review web#1 --run .delivery/runs/RUN_ID --approve",
               "delivery review ../web.git#1 --request-changes 'rename it'"],
    "graph": ["delivery graph workflows/deliver.dot -o deliver.svg"],
    "test": ["delivery test workflows/deliver.test.toml"],
    "demo": ["delivery demo", "delivery demo --dir /tmp/demo   # again after Ctrl-C: continues"],
}


def _with_examples(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, sub in commands.choices.items():
        example = EXAMPLES.get(name)
        if example:
            sub.epilog = "examples:\n" + "\n".join(f"  {line}" for line in example)
            sub.formatter_class = _Formatter


class _Formatter(argparse.HelpFormatter):
    """Descriptions wrapped as usual; example lines (indented) kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(line if line.startswith("  ") or not line.strip() else
                         textwrap.fill(line, width, initial_indent=indent,
                                       subsequent_indent=indent)
                         for line in text.splitlines())


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="delivery",
        description="Run DOT-graph workflows that carry a ticket through pull requests.",
        epilog="examples:\n  delivery demo\n  delivery validate workflows/\n"
               "  delivery COMMAND --help",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"delivery {__version__}")
    commands = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
                    parser.add_subparsers(dest="command", metavar="COMMAND"))
    commands.required = True
    validate = commands.add_parser(
        "validate", help="check workflow files before running them",
        description="Check workflow files; exit 0 when no errors, 1 on errors, 2 on usage errors.",
    )
    validate.add_argument("workflows", nargs="+", metavar="WORKFLOW", type=Path,
                          help="workflow files (.dot) to check, or directories: every .dot "
                          "file under them is checked")
    validate.add_argument("--format", choices=("text", "json", "github"), default="text",
                          help="text for people (default), json for tools, github for "
                          "annotations in a GitHub Actions log")

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
    run.add_argument("--agent", default="", metavar="PROFILE",
                     help="the default agent profile: claude or codex (built in), a name "
                     "from delivery.toml (or [tool.delivery] in pyproject.toml), "
                     "command:<cmd> (command+json:<cmd> etc.), openai:<model> or "
                     "replay:<file.json>; a node's agent= picks another")
    run.add_argument("--forge", choices=("github", "local"), default=None,
                     help="where the repositories and PRs live (default: local when every "
                     "LOC is a path, github when one is owner/name)")
    run.add_argument("--check", action="append", default=[], metavar="F=COMMAND",
                     help="the local forge's check command for a folder (also "
                     "[forge.local.checks] in delivery.toml)")
    run.add_argument("--branch", default="", metavar="NAME",
                     help="the run's branch in every folder (default: delivery/<ticket slug "
                     "or run id>); name an existing head branch to work on its PRs")
    run.add_argument("--cache", type=Path, metavar="DIR",
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
    run.add_argument("--json", action="store_true",
                     help="print one JSON object: run_id, status, failure_reason, path, "
                     "context, run_dir")
    _add_state_option(run)
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

    resume = commands.add_parser(
        "resume", help="continue a run from its checkpoint",
        description="Continue a stopped, failed or paused run from its last checkpoint; the "
        "interrupted stage runs again. The agent profile, folders, forge and branch come "
        "from the run's run.json. Exit codes as for run.")
    resume.add_argument("run", metavar="RUN", nargs="?",
                        help="run directory, or run id under WORKSPACE/.delivery/runs/ "
                        "(with --state: the run id)")
    resume.add_argument("--last", action="store_true",
                        help="the newest run under WORKSPACE/.delivery/runs/")
    resume.add_argument("--workspace", type=Path,
                        help="where run ids are looked up; with --state: the workspace on "
                        "this machine (default: the current folder)")
    resume.add_argument("--answer", action="append", default=[], metavar="NODE=LABEL",
                        help="answer the next visit of a human gate; repeatable")
    resume.add_argument("--budget", default="", metavar="N|$N",
                        help="raise (or set) the run's budget: N tokens or '$N' US dollars; "
                        "how a run paused on its budget goes on")
    resume.add_argument("--json", action="store_true", help="print the outcome as JSON")
    resume.add_argument("--full", action="store_true",
                        help="with --json, print offloaded context values whole")
    _add_state_option(resume)
    resume.add_argument("--for-pr", metavar="OWNER/NAME#N", default=None,
                        help="with --state: resume the run that owns this pull request (its "
                        "id is in the PR body's delivery marker)")
    resume.add_argument("--take-over", action="store_true",
                        help="with --state: take the run over from a job that claimed it "
                        "and died, without waiting for its claim to grow stale")
    resume.add_argument("--cache", type=Path, metavar="DIR",
                        help="clone cache (default: $XDG_CACHE_HOME/delivery)")

    runs = commands.add_parser(
        "runs", help="runs with their status (local or a state repo)",
        description="List runs with their status and the node each waits at: the local run "
        "directories of a workspace, or the runs kept on a state repository's refs.")
    _add_state_option(runs, "list the runs kept on refs/delivery/runs/* of this repository "
                      "instead of the local run directories")
    runs.add_argument("--workspace", type=Path, help="where local runs are (default: .)")
    runs.add_argument("--json", action="store_true", help="print the runs as JSON")

    inspect = commands.add_parser(
        "inspect", help="path taken, outcomes, context, artifacts",
        description="Show a run: its status, the path taken, each stage's outcome and "
        "tokens, the context and the artifacts. Reads only.")
    run_reference(inspect)
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument("--full", action="store_true",
                         help="print offloaded (over 100 KB) context values whole instead "
                         "of their pointer and size")
    inspect.add_argument("--routes", action="store_true",
                         help="list every routing decision: the edge taken, the rule that "
                         "chose it and the values the conditions read")

    verify = commands.add_parser(
        "verify", help="check a run's hash-chained event log",
        description="Check that a run's event log is intact: every line hash-chained to the "
        "one before. Exit 0 when intact, 1 otherwise.")
    run_reference(verify)


    parse = commands.add_parser(
        "parse", help="print the workflow model (nodes with resolved types, edges)",
        description="Print the model of a workflow: graph attributes, nodes (resolved type, "
        "attributes, position), edges and diagnostics. Exit 0 when it has no errors, 1 "
        "otherwise, 2 on usage errors.")
    parse.add_argument("workflow", type=Path, metavar="WORKFLOW", help="the .dot file")
    parse.add_argument("--json", action="store_true", help="print the model as JSON")

    handlers = commands.add_parser("handlers", help="the node types this version runs",
                                   description="List the node types this version runs, "
                                   "with their attributes.")
    handlers.add_argument("--json", action="store_true", help="print the table as JSON")

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

    from delivery.cli import preflight as preflight_command

    preflight_command.add_parser(commands)

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
    graph.add_parser(commands)
    scenarios.add_parser(commands)
    demo_parser(commands)
    _with_examples(commands)
    return parser


def cmd_parse(path: Path, as_json: bool, out: TextIO, err: TextIO) -> int:
    # Imported here, not at the top: `--version` and `--help` need no parser (issue 23).
    from delivery.cli.model_json import workflow_json, workflow_text
    from delivery.lang.diagnostics import has_errors
    from delivery.validation.loader import check_file

    problem = file_problem(path)
    if problem:
        print(f"delivery parse: {path}: {problem}", file=err)
        return EXIT_USAGE
    try:
        workflow, diagnostics = check_file(path)
    except (OSError, UnicodeDecodeError) as problem:
        print(f"delivery parse: {path}: cannot read: {problem}", file=err)
        return EXIT_USAGE
    if as_json:
        print(json.dumps(workflow_json(workflow, diagnostics), indent=2), file=out)
    else:
        if workflow is not None:
            print(workflow_text(workflow), file=out)
        for diagnostic in diagnostics:
            print(diagnostic.format_text(), file=out)
    return EXIT_FAILED if has_errors(diagnostics) else EXIT_OK


def workflow_files(given: Sequence[Path], err: TextIO) -> list[Path] | None:
    """The files `validate` checks: each file given, and every `.dot` under each directory
    given (like a linter, sorted, hidden folders skipped). None, after saying why on `err`,
    when one cannot be read or a directory holds none."""
    files: list[Path] = []
    bad = False
    for path in given:
        if path.is_dir():
            found = sorted(f for f in path.rglob("*.dot") if not f.is_dir() and not any(
                part.startswith(".") for part in f.relative_to(path).parts))
            if not found:
                print(f"delivery validate: {path}: is a directory with no .dot file in it; "
                      "name a workflow file or a directory that holds some", file=err)
                bad = True
            for file in found:  # a dangling link or a pipe named *.dot is said, not skipped
                problem = file_problem(file)
                if problem:
                    print(f"delivery validate: {file}: {problem}", file=err)
                    bad = True
                else:
                    files.append(file)
            continue
        problem = file_problem(path)
        if problem:
            print(f"delivery validate: {path}: {problem}", file=err)
            bad = True
        else:
            files.append(path)
    return None if bad else files


def cmd_validate(given: list[Path], fmt: str, out: TextIO, err: TextIO) -> int:
    from delivery.lang.diagnostics import has_errors, to_json
    from delivery.validation.loader import check_file

    files = workflow_files(given, err)
    if files is None:
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


STATE_HELP = ("keep the run's state on refs/delivery/runs/RUN_ID of this repository, saved "
              "after every stage (event mode: waits and unanswered gates save and exit 3)")


def _add_state_option(parser: argparse.ArgumentParser, text: str = STATE_HELP) -> None:
    parser.add_argument("--state", metavar="git:OWNER/NAME|PATH", default=None, help=text)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    # Nothing the CLI prints or logs carries a secret (SPEC §14), whichever path made it.
    redactor = Redactor.from_environment(os.environ)
    # ...and no control character in it reaches the terminal as one (delivery.printable):
    # masked first, so that a secret is matched as it was written
    out = cast(TextIO, RedactingStream(cast(TextIO, PrintableStream(out or sys.stdout)), redactor))
    err = cast(TextIO, RedactingStream(cast(TextIO, PrintableStream(err or sys.stderr)), redactor))
    logger = logging.getLogger("delivery")  # the one logger delivery logs to
    for stale in [f for f in logger.filters if isinstance(f, (RedactingFilter,
                                                              PrintableFilter))]:
        logger.removeFilter(stale)  # from an earlier call with another environment
    logger.addFilter(RedactingFilter(redactor))
    logger.addFilter(PrintableFilter())
    parser = _build_parser()
    try:
        with contextlib.redirect_stdout(out):  # --help and --version print on `out`
            args, extra = parser.parse_known_args(argv)
        if extra:  # what the command's own parser did not take: its usage, not the top's
            command = _subparsers(parser).get(getattr(args, "command", "") or "", parser)
            command.error(_unrecognized(command, extra))
    except _UsageError as wrong:
        print(wrong.parser.format_usage().rstrip(), file=err)
        print(f"{wrong.parser.prog}: error: {wrong.message} (see {wrong.parser.prog} --help)",
              file=err)
        return EXIT_USAGE
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        if args.command not in ("validate", "parse") and in_action(os.environ):
            # a run's text (replies, PR text, failure reasons) never becomes a workflow
            # command on the runner (SPEC §13); validate's annotations are meant as commands
            with ActionOutput(out) as inert:
                return _command(args, cast(TextIO, inert), cast(TextIO, Neutralising(err)))
        return _command(args, out, err)
    except KeyboardInterrupt as stop:
        return _stopped(args.command, stop, err)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _unrecognized(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """argparse's message, with the nearest option when one was misspelt."""
    message = f"unrecognized arguments: {' '.join(extra)}"
    known = [option for action in parser._actions for option in action.option_strings]
    for word in extra:
        if word.startswith("--"):
            near = difflib.get_close_matches(word.split("=", 1)[0], known, n=1)
            if near:
                return f"{message}; did you mean {near[0]}?"
    return message


def _stopped(command: str, stop: KeyboardInterrupt, err: TextIO) -> int:
    """Ctrl-C or SIGTERM: one line, never a traceback (SPEC §12); 130 or 143, as a shell
    reports a process ended by SIGINT or SIGTERM."""
    from delivery.errors import RunInterrupted, Terminated

    name = stop.signal_name if isinstance(stop, RunInterrupted) else (
        "SIGTERM" if isinstance(stop, Terminated) else "SIGINT")
    code = 143 if name == "SIGTERM" else 130
    how = "Ctrl-C (SIGINT)" if name == "SIGINT" else "SIGTERM"
    if isinstance(stop, RunInterrupted):
        print(f"delivery {command}: stopped by {how}; run {stop.run_id} is resumable: "
              f"{stop.hint}", file=err, flush=True)
    else:
        print(f"delivery {command}: stopped by {how} before any run continued; nothing "
              "to resume", file=err, flush=True)
    return code


def _command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command == "validate":
        return cmd_validate(args.workflows, args.format, out, err)
    if args.command == "parse":
        return cmd_parse(args.workflow, args.json, out, err)
    if args.command == "graph" and args.run is None:
        return graph.cmd_graph(args, out, err)
    if args.command == "test":
        return scenarios.cmd_test(args, out, err)
    from delivery.cli import commands  # the run commands import the engine; validate stays light

    return commands.dispatch(args, out, err)


def _stop_on_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt (Terminated for SIGTERM) once: the stage
    ends its processes, the run stays resumable and `main` says how to resume. A second
    signal while stopping ends the process at once, with a line and no traceback."""
    from delivery.errors import Terminated
    from delivery.processes import end_all

    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            os.write(2, b"delivery: stopped at once (second signal while stopping)\n")
            os._exit(128 + signum)
        if _in_finalizer(frame):
            # Raised in a __del__ (GitPython's objects have some), the exception would be
            # printed as "ignored" and the run would go on: ask again a moment later.
            threading.Timer(0.02, os.kill, (os.getpid(), signum)).start()
            return
        stopping = True
        end_all()  # stages of parallel branches run in threads the interrupt never reaches
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def _in_finalizer(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def entry() -> None:
    # A run's text may hold what the terminal's encoding cannot (a lone surrogate a reply
    # carried): printed escaped, never a UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    _stop_on_signals()
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
