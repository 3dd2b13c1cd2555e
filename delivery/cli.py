"""The `delivery` command line (SPEC §12)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from delivery.loader import check_file
from delivery.validation.diagnostics import Diagnostic, has_errors, to_json

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
    parser.print_usage(err)
    return EXIT_USAGE


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
