"""`delivery validate WORKFLOW...` and `delivery parse WORKFLOW`: a workflow checked, or its
model printed, without the engine (issue 23: they load no forge, git or Jinja2 they do not
need)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from delivery.cli.diagnostics import file_problem

if TYPE_CHECKING:
    from delivery.lang.diagnostics import Diagnostic

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parse_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parse = commands.add_parser(
        "parse", help="print the workflow model (nodes with resolved types, edges)",
        description="Print the model of a workflow: graph attributes, nodes (resolved type, "
        "attributes, position), edges and diagnostics. Exit 0 when it has no errors, 1 "
        "otherwise, 2 on usage errors.")
    parse.add_argument("workflow", type=Path, metavar="WORKFLOW", help="the .dot file")
    parse.add_argument("--json", action="store_true", help="print the model as JSON")


def cmd_parse(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # Imported here, not at the top: `--version` and `--help` need no parser (issue 23).
    from delivery.cli.model_json import workflow_json, workflow_text
    from delivery.lang.diagnostics import has_errors
    from delivery.validation.loader import check_file

    path: Path = args.workflow
    problem = file_problem(path)
    if problem:
        print(f"delivery parse: {path}: {problem}", file=err)
        return EXIT_USAGE
    try:
        workflow, diagnostics = check_file(path)
    except (OSError, UnicodeDecodeError) as problem:
        print(f"delivery parse: {path}: cannot read: {problem}", file=err)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(workflow_json(workflow, diagnostics), indent=2), file=out)
    else:
        if workflow is not None:
            print(workflow_text(workflow), file=out)
        for diagnostic in diagnostics:
            print(diagnostic.format_text(), file=out)
    return EXIT_FAILED if has_errors(diagnostics) else EXIT_OK


def add_validate_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def cmd_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from delivery.lang.diagnostics import has_errors, to_json
    from delivery.validation.loader import check_file

    fmt: str = args.format
    files = workflow_files(args.workflows, err)
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
