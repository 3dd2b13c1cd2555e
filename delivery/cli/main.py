"""The `delivery` command line (SPEC §12)."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import logging
import os
import signal
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import NoReturn, TextIO, TypeAlias, cast

from delivery import __version__
from delivery.cli import (
    action_args,
    close_args,
    demo_args,
    forge_args,
    graph,
    preflight,
    run_args,
    scenarios,
    validate,
    work_command,
)
from delivery.cli.state_args import add_runs_parser
from delivery.cli.workflow_commands import ActionOutput, Neutralising, in_action
from delivery.errors import PauseReason, PauseRequested
from delivery.printable import PrintableFilter, PrintableStream
from delivery.redact import RedactingFilter, RedactingStream, Redactor

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler: TypeAlias = Callable[[argparse.Namespace, TextIO, TextIO], int]


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
            "    --repo api=../api.git --repo web=../web.git --agent command:claude",
            "delivery run workflows/deliver.dot --input ticket=T-1 --org octo --topic payments",
            "delivery run workflows/deliver.dot --input ticket=T-1 --repos-from repos.txt "
            "--dry-run",
            "delivery run workflows/campaign.dot --input ticket=T-1 --repos-from repos.txt \\",
            "    --agent scripted:examples/offline/campaign.toml --quiet   # offline agent"],
    "resume": ["delivery resume .delivery/runs/RUN_ID",
               "delivery resume --last 2> progress.log   # progress lines into a file",
               "delivery resume --last --quiet"],
    "close": ["delivery close RUN_ID --delete-branches --comment 'Superseded by T-12'"],
    "runs": ["delivery runs", "delivery runs --state git:octo/delivery-state --json"],
    "inspect": ["delivery inspect --last", "delivery inspect RUN_ID --routes"],
    "verify": ["delivery verify .delivery/runs/RUN_ID"],
    "parse": ["delivery parse workflows/deliver.dot --json"],
    "handlers": ["delivery handlers --json"],
    "probe": ["delivery probe --repo api=octo/api#12 --repo web=octo/web@feature --json"],
    "preflight": ["delivery preflight --repo api=octo/api --repo web=octo/web "
                  "--state git:octo/delivery-state",
                  "delivery preflight --org octo --topic payments"],
    "review": ["delivery review web#1 --run .delivery/runs/RUN_ID --approve",
               "delivery review ../web.git#1 --request-changes 'rename it'"],
    "graph": ["delivery graph workflows/deliver.dot -o deliver.svg"],
    "test": ["delivery test workflows/deliver.test.toml"],
    "demo": ["delivery demo", "delivery demo --dir /tmp/demo   # again after Ctrl-C: continues"],
    "action": ["delivery action init --repos repos.txt --state-repo octo/control",
               "delivery action init --org octo --topic payments --state-repo octo/control "
               "--create-labels"],
}


def _with_examples(commands: Subcommands) -> None:
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


def _engine_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from delivery.cli import commands  # the run commands import the engine; validate stays light

    return commands.dispatch(args, out, err)


def _graph(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # a drawing needs no engine; with --run, the run's path is read from its store
    return graph.cmd_graph(args, out, err) if args.run is None else \
        _engine_command(args, out, err)


def _action(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from delivery.cli import action_init  # the forge's client only when init runs

    return action_init.cmd_action(args, out, err)


# Every command in the order `delivery --help` lists it: the function that adds its options
# (beside its handler; in a light *_args module when the handler's module imports the
# engine, so that --help loads none) and what runs it: its handler, or commands.dispatch,
# which maps the engine's refusals to one line and exit 2.
COMMANDS: dict[str, tuple[Callable[[Subcommands], None], Handler]] = {
    "validate": (validate.add_validate_parser, validate.cmd_validate),
    "run": (run_args.add_run_parser, _engine_command),
    "resume": (run_args.add_resume_parser, _engine_command),
    "close": (close_args.add_close_parser, _engine_command),
    "runs": (add_runs_parser, _engine_command),
    "work": (work_command.add_work_parser, _engine_command),
    "inspect": (run_args.add_inspect_parser, _engine_command),
    "verify": (run_args.add_verify_parser, _engine_command),
    "parse": (validate.add_parse_parser, validate.cmd_parse),
    "handlers": (run_args.add_handlers_parser, _engine_command),
    "probe": (forge_args.add_probe_parser, _engine_command),
    "preflight": (preflight.add_parser, _engine_command),
    "review": (forge_args.add_review_parser, _engine_command),
    "graph": (graph.add_parser, _graph),
    "test": (scenarios.add_parser, scenarios.cmd_test),
    "demo": (demo_args.add_parser, _engine_command),
    "action": (action_args.add_action_parser, _action),
}


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="delivery",
        description="Run DOT-graph workflows that carry a ticket through pull requests.",
        epilog="examples:\n  delivery demo\n  delivery validate workflows/\n"
               "  delivery run workflows/campaign.dot --input ticket=T-1 --repos-from "
               "repos.txt --agent scripted:examples/offline/campaign.toml --dry-run\n"
               "  delivery close --last --delete-branches\n"
               "  delivery COMMAND --help",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"delivery {__version__}")
    commands = cast(Subcommands, parser.add_subparsers(dest="command", metavar="COMMAND"))
    commands.required = True
    for add_parser, _ in COMMANDS.values():
        add_parser(commands)
    _with_examples(commands)
    return parser


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
    except PauseRequested as limited:  # GitHub's limits, outside a run (a run pauses)
        if limited.reason is not PauseReason.RATE_LIMIT:
            raise
        print(f"delivery {args.command}: GitHub's rate limit: {limited.event_fields['why']}; "
              f"try again at {limited.event_fields['until']}", file=err)
        return EXIT_FAILED


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
    _, handler = COMMANDS[args.command]
    return handler(args, out, err)


def _stop_on_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt (Terminated for SIGTERM) once: the stage
    ends its processes, the run stays resumable and `main` says how to resume. A second
    signal while stopping ends the process at once, with a line and no traceback."""
    from delivery.errors import Terminated
    from delivery.processes import end_all, hold

    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if hold(signum):  # a stage's process is being started: delivered once registered
            return
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
