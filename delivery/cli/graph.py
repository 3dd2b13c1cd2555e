"""`delivery graph WORKFLOW [--run RUN] [-o FILE.svg|.png|.dot|.mmd]`: draw a workflow.

Graphviz's `dot` draws SVG and PNG when it is installed; Mermaid text needs nothing (GitHub
renders it in Markdown), so it is the output when no file is named or `dot` is missing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from delivery.cli.diagnostics import file_problem

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
GRAPHVIZ_FORMATS = {".svg": "svg", ".png": "png"}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    graph = commands.add_parser(
        "graph", help="draw a workflow (SVG/PNG with Graphviz, or Mermaid)",
        description="Draw a workflow, with a run's path highlighted. Without -o the Mermaid "
        "text is printed.")
    graph.add_argument("workflow", type=Path, metavar="WORKFLOW", help="the workflow file (.dot)")
    graph.add_argument("--run", metavar="RUN", type=Path,
                       help="a run directory whose path is highlighted")
    graph.add_argument("-o", "--output", type=Path, metavar="FILE",
                       help="FILE.svg or FILE.png (needs Graphviz's dot), FILE.dot, FILE.mmd")


def cmd_graph(args: argparse.Namespace, out: TextIO, err: TextIO,
              run_path: Sequence[str] = ()) -> int:
    """Draw `args.workflow`; `run_path` is the path of the run named by `--run`."""
    # Imported here so that the CLI's start-up (`--help`, `validate`) does not load them.
    from delivery.lang.drawing import to_dot, to_mermaid
    from delivery.validation.loader import check_file

    workflow_file: Path = args.workflow
    problem = file_problem(workflow_file)
    if problem:
        print(f"delivery graph: {workflow_file}: {problem}", file=err)
        return EXIT_USAGE
    try:
        workflow, diagnostics = check_file(workflow_file)
    except (OSError, UnicodeDecodeError) as problem:
        print(f"delivery graph: {workflow_file}: cannot read: {problem}", file=err)
        return EXIT_USAGE
    if workflow is None:
        for diagnostic in diagnostics:
            print(diagnostic.format_text(), file=err)
        print(f"delivery graph: {workflow_file} cannot be parsed; nothing drawn", file=err)
        return EXIT_FAILED
    output: Path | None = args.output
    if output is None:
        out.write(to_mermaid(workflow, run_path))
        return EXIT_OK
    suffix = output.suffix.lower()
    if suffix == ".mmd":
        output.write_text(to_mermaid(workflow, run_path), encoding="utf-8")
    elif suffix == ".dot":
        output.write_text(to_dot(workflow, run_path), encoding="utf-8")
    elif suffix in GRAPHVIZ_FORMATS:
        dot = shutil.which("dot")
        if dot is None:
            print(f"delivery graph: {output}: drawing {suffix} needs Graphviz's `dot`, which "
                  "is not installed; install Graphviz, or write Mermaid with -o FILE.mmd",
                  file=err)
            return EXIT_USAGE
        drawn = subprocess.run([dot, f"-T{GRAPHVIZ_FORMATS[suffix]}", "-o", str(output)],
                               input=to_dot(workflow, run_path).encode(), capture_output=True,
                               timeout=120, check=False)
        if drawn.returncode != 0:
            reason = drawn.stderr.decode(errors="replace").strip().splitlines()
            print(f"delivery graph: dot failed: {reason[-1] if reason else drawn.returncode}",
                  file=err)
            return EXIT_FAILED
    else:
        print(f"delivery graph: {output}: unknown format {suffix or '(none)'}; "
              "use .svg, .png, .dot or .mmd", file=err)
        return EXIT_USAGE
    print(f"delivery graph: wrote {output}", file=err)
    return EXIT_OK
