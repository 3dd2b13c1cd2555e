"""`delivery run | resume | inspect | verify` (SPEC §12)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from delivery.cli import graph
from delivery.cli.model_json import handlers_json
from delivery.cli.progress import TerminalProgress
from delivery.cli.routes import print_routes
from delivery.engine.context import ArtifactStore, Context
from delivery.engine.handlers import default_handlers
from delivery.engine.route_log import read_routes
from delivery.engine.runner import (
    RunOutcome,
    RunRequest,
    World,
    parse_answers,
    parse_assignments,
    relocate_artifacts,
    resume_run,
    start_run,
)
from delivery.errors import RunError, RunRefused, WorkflowInvalid, WorkflowSyntaxError
from delivery.lang.model import NodeType
from delivery.store.runstore import RunDirectory, verify_run

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_REFUSED, EXIT_PAUSED = 0, 1, 2, 3
STATUS_EXIT = {"succeeded": EXIT_SUCCEEDED, "failed": EXIT_FAILED, "paused": EXIT_PAUSED}

log = logging.getLogger("delivery")


def dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from delivery.cli.demo import cmd_demo
    from delivery.cli.forge_commands import cmd_probe, cmd_review

    handler = {"run": cmd_run, "resume": cmd_resume, "inspect": cmd_inspect,
               "verify": cmd_verify, "handlers": cmd_handlers, "graph": cmd_graph_run,
               "probe": cmd_probe, "review": cmd_review, "demo": cmd_demo}[args.command]
    try:
        return handler(args, out, err)
    except WorkflowSyntaxError as problem:
        print(f"delivery {args.command}: {problem}", file=err)
        return EXIT_REFUSED
    except WorkflowInvalid as invalid:
        for diagnostic in invalid.diagnostics:
            if diagnostic.severity == "error":
                print(diagnostic.format_text(), file=err)
        print(f"delivery {args.command}: {invalid.file} has validation errors; nothing ran",
              file=err)
        return EXIT_REFUSED
    except RunRefused as refused:
        print(f"delivery {args.command}: refused: {refused}", file=err)
        return EXIT_REFUSED
    except RunError as problem:
        print(f"delivery {args.command}: {problem}", file=err)
        return EXIT_REFUSED


def cmd_graph_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`delivery graph --run RUN`: the workflow drawn with the run's path highlighted."""
    checkpoint = RunDirectory.open(args.run).load_checkpoint()
    path = checkpoint.get("path") if checkpoint else None
    taken = [step for step in path if isinstance(step, str)] if isinstance(path, list) else []
    return graph.cmd_graph(args, out, err, taken)


def _world(err: TextIO) -> World:
    """Progress on a terminal; human gates asked on the console when both ends are one."""
    on_terminal = err.isatty()
    progress = TerminalProgress(err) if on_terminal else None
    return World(progress=progress, interactive=on_terminal and sys.stdin.isatty())


def _report(outcome: RunOutcome, as_json: bool, out: TextIO) -> int:
    if as_json:
        print(json.dumps(outcome.to_json(), indent=2, sort_keys=True, default=str), file=out)
    else:
        print(f"run {outcome.run_id}: {outcome.status}", file=out)
        if outcome.failure_reason:
            label = "waiting" if outcome.status == "paused" else "failure"
            print(f"  {label}: {outcome.failure_reason}", file=out)
        print(f"  path: {' -> '.join(outcome.path)}", file=out)
        print(f"  run directory: {outcome.run_dir}", file=out)
    return STATUS_EXIT.get(outcome.status, EXIT_FAILED)


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.workflow.is_file():
        print(f"delivery run: {args.workflow}: no such file", file=err)
        return EXIT_REFUSED
    request = RunRequest(
        workflow=args.workflow, goal=args.goal,
        inputs=parse_assignments(args.input, "--input"), agent=args.agent,
        workspace=args.workspace, run_dir=args.run_dir,
        answers=parse_answers(args.answer),
        repos=parse_assignments(args.repo, "--repo"), gates=args.gates,
        forge=args.forge or "", checks=parse_assignments(args.check, "--check"),
        branch=args.branch,
    )
    world = _world(err)
    world.git_cache = args.cache
    return _report(start_run(request, world), args.json, out)


def find_run(reference: str) -> Path:
    """A run directory from a path or a run id (looked up under ./.delivery/runs/)."""
    candidate = Path(reference)
    if (candidate / "run.json").is_file():
        return candidate
    by_id = Path.cwd() / ".delivery" / "runs" / reference
    if (by_id / "run.json").is_file():
        return by_id
    raise RunRefused(f"run {reference!r}", "is neither a run directory nor a run id under "
                     "./.delivery/runs", "pass the run directory printed by delivery run")


def cmd_resume(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    outcome = resume_run(find_run(args.run), _world(err),
                         answers=parse_answers(args.answer))
    return _report(outcome, args.json, out)


def cmd_inspect(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    run_dir = RunDirectory.open(find_run(args.run))
    if args.routes:
        taken = read_routes(run_dir.events_path)
        if args.json:
            print(json.dumps({"routes": taken}, indent=2, sort_keys=True), file=out)
        else:
            print(f"routes of {run_dir.path}:", file=out)
            print_routes(taken, out)
        return EXIT_SUCCEEDED
    info = run_dir.read_run_info()
    checkpoint = run_dir.load_checkpoint() or {}
    store = ArtifactStore(run_dir.artifacts_dir)
    context = Context(relocate_artifacts(checkpoint.get("context", {}), store), store)
    artifacts = sorted(str(p.relative_to(run_dir.path)) for p in
                       run_dir.artifacts_dir.rglob("*") if p.is_file()) \
        if run_dir.artifacts_dir.is_dir() else []
    stages = _finished_stages(run_dir)
    report = {
        "run_id": info.get("run_id"), "status": checkpoint.get("status", "unknown"),
        "failure_reason": checkpoint.get("failure_reason", ""),
        "path": checkpoint.get("path", []), "next_node": checkpoint.get("next_node"),
        "outcomes": checkpoint.get("outcomes", {}), "stages": stages,
        "context": context.resolved_snapshot(), "artifacts": artifacts,
        "run_dir": str(run_dir.path), "usage": _total_usage(stages),
    }
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True, default=str), file=out)
        return EXIT_SUCCEEDED
    print(f"run {report['run_id']}: {report['status']}", file=out)
    if report["failure_reason"]:
        print(f"  failure: {report['failure_reason']}", file=out)
    print(f"  path: {' -> '.join(report['path'])}", file=out)
    print("  stages:", file=out)
    for stage in stages:
        reason = f" — {stage['failure_reason']}" if stage.get("failure_reason") else ""
        tokens = f" ({_tokens(stage['usage'])})" if stage.get("usage") else ""
        print(f"    {stage['node']}#{stage['attempt']}: {stage['outcome']}{tokens}{reason}",
              file=out)
    if report["usage"]:
        print(f"  tokens: {_tokens(report['usage'])} (total {report['usage']['total_tokens']})",
              file=out)
    print("  context:", file=out)
    for key, value in sorted(report["context"].items()):
        shown = value if isinstance(value, str) and "\n" not in value else json.dumps(
            value, sort_keys=True, ensure_ascii=False)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        print(f"    {key} = {shown}", file=out)
    if artifacts:
        print("  artifacts:", file=out)
        for name in artifacts:
            print(f"    {name}", file=out)
    return EXIT_SUCCEEDED


def _finished_stages(run_dir: RunDirectory) -> list[dict[str, Any]]:
    """Every finished stage attempt, in the order it ran (read from the event log)."""
    stages: list[dict[str, Any]] = []
    if not run_dir.events_path.is_file():
        return stages
    with run_dir.events_path.open(encoding="utf-8") as log:
        for line in log:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a torn last line; `delivery verify` reports it
            if event.get("type") == "stage_finished":
                stage = {key: event.get(key) for key in
                         ("node", "attempt", "outcome", "failure_reason", "seconds")}
                if isinstance(event.get("usage"), dict):
                    stage["usage"] = event["usage"]
                stages.append(stage)
    return stages


def _total_usage(stages: list[dict[str, Any]]) -> dict[str, int]:
    """Agent tokens of the whole run, summed over its stages ({} when none were used)."""
    total: dict[str, int] = {}
    for stage in stages:
        for name, count in (stage.get("usage") or {}).items():
            if isinstance(count, int):
                total[name] = total.get(name, 0) + count
    return total


def _tokens(usage: dict[str, int]) -> str:
    return f"{usage.get('input_tokens', 0)} tokens in / {usage.get('output_tokens', 0)} out"


def cmd_handlers(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The node types `run` accepts: the registered handlers and the engine's own."""
    runnable = [*default_handlers(), NodeType.PARALLEL, NodeType.FAN_IN]
    table = handlers_json(runnable)
    if args.json:
        print(json.dumps(table, indent=2), file=out)
        return EXIT_SUCCEEDED
    for entry in table["types"]:
        also = f" (also type={', '.join(entry['aliases'])})" if entry["aliases"] else ""
        print(f"{entry['type']}{also}: {', '.join(entry['attributes'])}", file=out)
    return EXIT_SUCCEEDED


def cmd_verify(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    run_path = find_run(args.run)
    result = verify_run(run_path)
    if result.ok:
        print(f"{run_path}: event chain intact ({result.lines} events)", file=out)
        return EXIT_SUCCEEDED
    print(f"{run_path}: event chain BROKEN: {result.problem}", file=out)
    return EXIT_FAILED
