"""`delivery test SCENARIOS.toml [--json]`: route scenarios, without a model, network or forge.

Exit 0 when every scenario holds, 1 when one does not or the file or its workflow is wrong,
2 when the file does not exist.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from delivery.cli.diagnostics import file_problem, print_invalid
from delivery.errors import ScenarioFileError, WorkflowError, WorkflowInvalid

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    test = commands.add_parser(
        "test", help="run route scenarios against a workflow (no model, network or forge)",
        description="Run the route scenarios of a TOML file (SPEC §12.1). Exit 0 when every "
        "scenario holds, 1 otherwise.")
    test.add_argument("scenarios", type=Path, metavar="SCENARIOS.toml",
                      help="the scenario file; it names its workflow")
    test.add_argument("--json", action="store_true",
                      help="print one JSON object per scenario, one per line")


def cmd_test(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path: Path = args.scenarios
    problem = file_problem(path)
    if problem:
        print(f"delivery test: {path}: {problem}", file=err)
        return EXIT_USAGE
    from delivery.scenarios.runner import run_file  # the engine loads only for this command

    try:
        results = run_file(path)
    except ScenarioFileError as problem:
        print(f"delivery test: {problem}", file=err)
        return EXIT_FAILED
    except WorkflowInvalid as invalid:
        print_invalid(invalid, f"delivery test: the workflow {invalid.file} has validation "
                      "errors", err)
        return EXIT_FAILED
    except (WorkflowError, OSError) as unusable:
        print(f"delivery test: {unusable}", file=err)
        return EXIT_FAILED
    if args.json:
        for result in results:
            print(json.dumps(result.to_json(), sort_keys=True), file=out)
    else:
        for result in results:
            if result.passed:
                print(f"ok    {result.name}", file=out)
                continue
            print(f"FAIL  {result.name}  ({path}:{result.line})", file=out)
            for mismatch in result.problems:
                print(f"      {mismatch}", file=out)
            print(f"      path taken: {' -> '.join(result.path) or '(none)'}", file=out)
        held = sum(1 for result in results if result.passed)
        print(f"{held} of {len(results)} scenario(s) hold", file=out)
    return EXIT_OK if all(result.passed for result in results) else EXIT_FAILED
