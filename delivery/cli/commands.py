"""`delivery run | resume | inspect | verify` (SPEC §12)."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from delivery.cli import graph
from delivery.cli.demo_args import DEMO_AGENT
from delivery.cli.diagnostics import file_problem, print_invalid
from delivery.cli.model_json import handlers_json
from delivery.cli.progress import StderrProgress, speaking
from delivery.cli.prs import pr_rows, print_table
from delivery.cli.repo_choice import chosen_repos
from delivery.cli.routes import print_routes
from delivery.cli.run_lookup import find_run
from delivery.cli.run_status import shown_status
from delivery.engine.context import Context
from delivery.engine.handlers import default_handlers
from delivery.engine.route_log import read_routes
from delivery.engine.run_inputs import parse_answers, parse_assignments
from delivery.engine.run_loop import EngineOptions
from delivery.engine.runner import (
    RunOutcome,
    RunRequest,
    World,
    offloaded,
    resume_run,
    start_run,
)
from delivery.errors import (
    ArtifactError,
    NotOwner,
    PauseReason,
    ResumeStopped,
    RunError,
    RunRefused,
    StateSaveFailed,
    Superseded,
    WorkflowError,
    WorkflowInvalid,
    WorkflowSyntaxError,
    paused_why,
)
from delivery.lang.diagnostics import Diagnostic, has_errors
from delivery.lang.model import NodeType, Workflow
from delivery.store.files import read_file
from delivery.store.records import RunStatus
from delivery.store.runstore import LocalRunStore, verify_run
from delivery.validation.loader import check_file
from probes.waiting import run_waiting_for, waiting_summary

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_REFUSED, EXIT_PAUSED = 0, 1, 2, 3
STATUS_EXIT = {RunStatus.SUCCEEDED: EXIT_SUCCEEDED, RunStatus.FAILED: EXIT_FAILED,
               RunStatus.PAUSED: EXIT_PAUSED}

log = logging.getLogger("delivery")


def dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run a command. Exit 2 is for what is wrong before a run's first stage (a fault
    during a run comes back as a failed outcome, exit 1): a workflow error, a refused
    setting, or a run that cannot be read or taken."""
    from delivery.cli.close_command import cmd_close
    from delivery.cli.demo import cmd_demo
    from delivery.cli.forge_commands import cmd_probe, cmd_review
    from delivery.cli.preflight import cmd_preflight
    from delivery.cli.state_commands import cmd_runs, superseded

    handler = {"run": cmd_run, "resume": cmd_resume, "inspect": cmd_inspect,
               "verify": cmd_verify, "handlers": cmd_handlers, "graph": cmd_graph_run,
               "probe": cmd_probe, "review": cmd_review, "demo": cmd_demo,
               "runs": cmd_runs, "preflight": cmd_preflight, "close": cmd_close,
               "work": _work}[args.command]
    # one progress for the command: its stages and GitHub's retries (never silent), ended
    # before anything else is printed (a Ctrl-C's line stays the last)
    args.progress = None if getattr(args, "quiet", False) else \
        StderrProgress(err, terminal=err.isatty())
    try:
        with speaking(args.progress):
            return handler(args, out, err)
    except Superseded as lost:  # another job holds or advanced the run: not a failure
        return superseded(lost, bool(getattr(args, "json", False)), out)
    except (StateSaveFailed, ResumeStopped) as fault:  # the run stays resumable
        print(f"delivery {args.command}: {fault}", file=err)
        return EXIT_FAILED
    except WorkflowSyntaxError as problem:
        print(f"delivery {args.command}: {problem}", file=err)
        return EXIT_REFUSED
    except WorkflowInvalid as invalid:
        print_invalid(invalid, f"delivery {args.command}: {invalid.file} has validation "
                      "errors; nothing ran", err)
        return EXIT_REFUSED
    except RunRefused as refused:
        print(f"delivery {args.command}: refused: {_one_line(str(refused))}", file=err)
        return EXIT_REFUSED
    except (RunError, WorkflowError) as problem:
        print(f"delivery {args.command}: {_one_line(str(problem))}", file=err)
        return EXIT_REFUSED


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 2000 else text[:1997] + "..."


def cmd_graph_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`delivery graph --run RUN`: the workflow drawn with the run's path highlighted."""
    loaded = LocalRunStore.open_dir(find_run(str(args.run))).load()
    taken = list(loaded.state.path) if loaded is not None else []
    return graph.cmd_graph(args, out, err, taken)


# a path longer than this is shown by its ends: a 5,000-stage loop's whole path is one
# unreadable line of ~40 KB (`--json` and `delivery inspect` give every stage)
PATH_SHOWN = 40
PATH_HEAD = 10


def path_line(path: Sequence[str]) -> str:
    """`a -> b -> ...`, with the middle of a long path left out and counted."""
    if len(path) <= PATH_SHOWN:
        return " -> ".join(path)
    tail = PATH_SHOWN - PATH_HEAD
    left_out = len(path) - PATH_SHOWN
    return (" -> ".join(path[:PATH_HEAD]) + f" -> ... ({left_out} more stages) ... -> "
            + " -> ".join(path[-tail:]))


def _options(err: TextIO) -> EngineOptions:
    """Human gates are asked on the console when both ends are a terminal."""
    return EngineOptions(interactive=err.isatty() and sys.stdin.isatty())


def _observer(args: argparse.Namespace) -> StderrProgress | None:
    """Progress on stderr, a terminal or not (a CI log, a file); none with --quiet."""
    progress: StderrProgress | None = getattr(args, "progress", None)
    return progress


def _report(outcome: RunOutcome, as_json: bool, out: TextIO, full: bool = False) -> int:
    if as_json:
        print(json.dumps(outcome.to_json(full=full), indent=2, sort_keys=True, default=str),
              file=out)
    else:
        print(f"run {outcome.run_id}: {outcome.status}", file=out)
        if outcome.failure_reason:
            label = "waiting" if outcome.status is RunStatus.PAUSED else "failure"
            print(f"  {label}: {outcome.failure_reason}", file=out)
        print(f"  path: {path_line(outcome.path)}", file=out)
        rows = pr_rows(outcome.context)
        if rows:
            print_table(rows, out)
        print(f"  run directory: {outcome.run_dir}", file=out)
        if outcome.status is RunStatus.FAILED:
            where = shlex.quote(str(outcome.run_dir))
            print(f"  next: delivery inspect {where} shows each stage and why it failed; "
                  "once the cause is fixed, the same delivery run again goes on from the "
                  "run's branch, worktrees and pull requests", file=out)
    return STATUS_EXIT.get(outcome.status, EXIT_FAILED)


def _work(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from delivery.cli.work_command import cmd_work

    return cmd_work(args, out, _report, _options(err))


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    problem = file_problem(args.workflow)
    if problem:
        print(f"delivery run: {args.workflow}: {problem}", file=err)
        return EXIT_REFUSED
    if args.dry_run and args.state:
        raise RunRefused("--dry-run", "writes nothing to a forge, and --state pushes the "
                         "run's state to one after every stage",
                         "leave --state out of the dry run (its resume stays local)")
    repos = chosen_repos(args, err, "run")
    model, diagnostics = print_warnings(args.workflow, err)
    request = RunRequest(
        workflow=args.workflow, goal=args.goal, model=model, diagnostics=diagnostics,
        inputs=parse_assignments(args.input, "--input"), agent=args.agent,
        workspace=args.workspace, run_dir=args.run_dir,
        answers=parse_answers(args.answer),
        repos=repos, gates=args.gates,
        forge=args.forge or "", checks=parse_assignments(args.check, "--check"),
        branch=args.branch, cli=True, logs=args.logs, budget=args.budget,
        max_parallel=args.max_parallel, max_runners=args.max_runners,
    )
    world = World(git_cache=args.cache)
    if args.state:
        from delivery.cli.state_commands import state_world

        state_world(world, args.state, args.cache)
    options = _options(err)
    options.dry_run = args.dry_run
    outcome = start_run(request, world, options=options, observer=_observer(args))
    print_previews(outcome, err)
    return _report(outcome, args.json, out, args.full)


def print_previews(outcome: RunOutcome, err: TextIO) -> None:
    """A dry run's pause: per folder what its publish would push (the diffs are in
    --json, and in each folder's worktree)."""
    if outcome.pause_reason is not PauseReason.DRY_RUN:
        return
    print("delivery run: dry run: what would be published:", file=err)
    for folder, shown in outcome.previews.items():
        print(f"  {folder}: {shown.summary()}", file=err)
    if not outcome.previews:
        print("  nothing: no folder has a worktree yet", file=err)
    print(f"  next: delivery resume {shlex.quote(str(outcome.run_dir))} publishes it",
          file=err)


def print_warnings(workflow: Path,
                   err: TextIO) -> tuple[Workflow, list[Diagnostic]] | tuple[None, None]:
    """The validator's warnings on `err` before the first stage (a typo'd attribute is never
    silent, SPEC §12; stdout stays for --json). Returns the model and its diagnostics when
    it validates, so the run does not read the file twice (and caches them for its
    resumes); None leaves the reading, and any refusal, to the run."""
    try:
        model, diagnostics = check_file(workflow)
    except (OSError, UnicodeDecodeError):
        return None, None
    if model is None or has_errors(diagnostics):
        return None, None  # the run refuses it, printing the errors
    _print_diagnostics(diagnostics, err)
    return model, diagnostics


def _print_diagnostics(diagnostics: Sequence[Diagnostic], err: TextIO) -> None:
    for diagnostic in diagnostics:
        print(diagnostic.format_text(), file=err)


def _run_of(args: argparse.Namespace) -> Path:
    return find_run(args.run, last=args.last, workspace=args.workspace)


def cmd_resume(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.state:
        return _resume_from_state(args, out, err)
    if args.for_pr or args.take_over:
        raise RunRefused("--for-pr/--take-over", "only apply to runs kept with --state",
                         "add --state git:OWNER/NAME (or the state repository's path)")
    run_path = _run_of(args)
    # the warnings of the run's workflow, as `run` printed them (from the run's model
    # cache: the copy is not parsed again)
    outcome = resume_run(run_path, _resume_world(run_path), answers=parse_answers(args.answer),
                         options=_options(err), observer=_observer(args), budget=args.budget,
                         warnings=lambda found: _print_diagnostics(found, err),
                         check_answers=True)
    return _report(outcome, args.json, out, args.full)


def _resume_world(run_path: Path) -> World:
    """The world a local resume runs in: `delivery demo`'s scripted agent for a demo's run
    (its profile name is in run.json, its turns are code), else the one run.json names."""
    if LocalRunStore.open_dir(run_path).read_run_info().agent == DEMO_AGENT:
        from delivery.cli.demo import demo_agent  # the demo's code: only for a demo's run

        return World(agents={DEMO_AGENT: demo_agent(checked_locally=True)})
    return World()


def _resume_from_state(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from delivery.cli.state_commands import open_state, run_for_pr, state_world
    from delivery.git.runref import is_run_id

    try:
        run_id = run_for_pr(args.for_pr, state=open_state(args.state, args.cache)) \
            if args.for_pr else args.run
    except NotOwner as stranger:  # ignored and said so; nothing claimed (SPEC §13)
        return _ignored(str(stranger), args.json, out)
    if not run_id:
        raise RunRefused("resume --state", "names no run", "pass RUN_ID or --for-pr O/N#N")
    if not is_run_id(run_id):
        raise RunRefused(f"run id {run_id!r}", "is not a run id",
                         "pass the run id printed by delivery run or delivery runs")
    workspace = (args.workspace or Path.cwd()).resolve()
    world = state_world(World(git_cache=args.cache), args.state, args.cache, run_id=run_id,
                        take_over=args.take_over, workspace=workspace)
    outcome = resume_run(workspace / ".delivery" / "runs" / run_id, world,
                         answers=parse_answers(args.answer), options=_options(err),
                         observer=_observer(args), budget=args.budget, check_answers=True)
    return _report(outcome, args.json, out, args.full)


def _ignored(reason: str, as_json: bool, out: TextIO) -> int:
    if as_json:
        print(json.dumps({"run_id": "", "status": "ignored", "failure_reason": reason,
                          "path": [], "context": {}, "run_dir": ""}, indent=2,
                         sort_keys=True), file=out)
    else:
        print(f"ignored: {_one_line(reason)}", file=out)
    return EXIT_SUCCEEDED


def cmd_inspect(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    run = LocalRunStore.open_dir(_run_of(args))
    if args.routes:
        taken = read_routes(run.events_path)
        if args.json:
            print(json.dumps({"routes": taken}, indent=2, sort_keys=True), file=out)
        else:
            print(f"routes of {run.path}:", file=out)
            print_routes(taken, out)
        return EXIT_SUCCEEDED
    info = run.read_run_info()
    loaded = run.load()  # reads only: an inspect never writes or locks
    state = loaded.state if loaded is not None else None
    store = run.artifacts
    stored = store.relocate(state.context) if state is not None else {}
    context = Context(stored, store)
    try:
        values = context.resolved_snapshot()
    except ArtifactError as error:
        raise RunError(f"{run.path}: {error}") from None
    large = {} if args.full else offloaded(stored, store)
    for key, (pointer, size) in large.items():
        values[key] = {"artifact": pointer, "bytes": size}
    artifacts = sorted(str(p.relative_to(run.path)) for p in
                       run.artifacts_dir.rglob("*") if p.is_file()) \
        if run.artifacts_dir.is_dir() and not run.artifacts_dir.is_symlink() else []
    stages = _finished_stages(run)
    path: list[str] = state.path if state else []
    status, why = shown_status(run.path, info, state.status.value) if state else \
        ("unknown", "")
    report: dict[str, Any] = {
        "run_id": info.run_id, "status": status, "reason": why,
        "failure_reason": state.failure_reason if state else "",
        **dict(zip(("reason", "until"), paused_why(state.context if state else {}),
                   strict=True)),
        "path": path, "next_node": state.next_node if state else None,
        "outcomes": state.outcomes if state else {}, "stages": stages,
        "context": values, "artifacts": artifacts, "run_dir": str(run.path),
        "usage": _total_usage(stages),
        "cost_usd": round(sum(stage.get("cost_usd", 0.0) for stage in stages), 9),
        # per folder, what the PRs the last probe saw waiting wait for (SPEC §7.1 `wait`)
        "waiting_for": run_waiting_for(values, status, list(info.folders)),
    }
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True, default=str), file=out)
        return EXIT_SUCCEEDED
    print(f"run {report['run_id']}: {report['status']}", file=out)
    if why:
        print(f"  {status}: {why}", file=out)
    if report["failure_reason"]:
        print(f"  failure: {_one_line(str(report['failure_reason']))}", file=out)
    print(f"  path: {path_line(path)}", file=out)
    if report["waiting_for"]:
        print(f"  waiting for: {waiting_summary(report['waiting_for'])}", file=out)
    print("  stages:", file=out)
    for stage in stages:
        reason = f" — {stage['failure_reason']}" if stage.get("failure_reason") else ""
        tokens = f" ({_tokens(stage['usage'])})" if stage.get("usage") else ""
        if stage.get("cost_usd"):
            tokens += f" ${stage['cost_usd']:.4f}"
        print(f"    {stage['node']}#{stage['attempt']}: {stage['outcome']}{tokens}{reason}",
              file=out)
    if report["usage"]:
        print(f"  tokens: {_tokens(report['usage'])} (total {report['usage']['total_tokens']})",
              file=out)
    if report["cost_usd"]:
        print(f"  cost: ${report['cost_usd']:.4f} (as the agents reported it)", file=out)
    print("  context:", file=out)
    for key, value in sorted(values.items()):
        if key in large:
            pointer, size = large[key]
            print(f"    {key} = {pointer} ({size} bytes; --full prints it)", file=out)
            continue
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


def _finished_stages(run: LocalRunStore) -> list[dict[str, Any]]:
    """Every finished stage attempt, in the order it ran (read from the event log; lines
    that are not events are skipped: `delivery verify` reports them)."""
    stages: list[dict[str, Any]] = []
    data = read_file(run.events_path, "event log") or b""
    for line in data.split(b"\n"):
        if b'"stage_finished"' not in line:
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict) and event.get("type") == "stage_finished":
            stage = {key: event.get(key) for key in
                     ("node", "attempt", "outcome", "failure_reason", "seconds")}
            if isinstance(event.get("usage"), dict):
                stage["usage"] = event["usage"]
            cost = event.get("cost_usd")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0:
                stage["cost_usd"] = cost
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
    run_path = _run_of(args)
    result = verify_run(run_path)
    if result.ok:
        print(f"{run_path}: event chain intact ({result.lines} events)", file=out)
        return EXIT_SUCCEEDED
    print(f"{run_path}: event chain BROKEN: {result.problem}", file=out)
    return EXIT_FAILED
