"""`delivery work --state … RUN_ID --chunk K`: one worker job of a foreach stage fanned out
across runners (SPEC §13; `delivery.engine.chunk_work`). Its options are built here
without loading the engine (`delivery --help` stays light); the handler loads it."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from delivery.cli.run_args import add_quiet_option
from delivery.cli.state_args import add_state_option
from delivery.errors import RunRefused

if TYPE_CHECKING:
    from delivery.engine.outcome import RunOutcome
    from delivery.engine.run_loop import EngineOptions

Report = Callable[["RunOutcome", bool, TextIO], int]

EXAMPLES = ["delivery work --state git:octo/control 20261201T023317Z-27320f --chunk 3 --json"]


def add_work_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    work = commands.add_parser(
        "work", help="run one chunk of a foreach stage fanned out across runners",
        description="A worker job of a fanned-out foreach stage (a run paused with reason "
        "fan_out): claims chunk K of the run kept on the state repository, re-creates its "
        "folders' worktrees, runs the stage for each of them and saves each result on the "
        "chunk's ref. The worker that saves the last missing result continues the run as "
        "resume --state does; the others exit 0 with status chunk_done, and one whose chunk "
        "another live job holds exits 0 with status superseded.",
        epilog="examples:\n  " + "\n  ".join(EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    work.add_argument("run", metavar="RUN_ID", help="the run id (printed by run and runs)")
    work.add_argument("--chunk", required=True, type=int, metavar="K",
                      help="the chunk to run: one of the numbers the fan-out printed in chunks")
    add_state_option(work)
    work.add_argument("--workspace", type=Path,
                      help="the workspace on this machine (default: the current folder)")
    work.add_argument("--take-over", action="store_true",
                      help="take the chunk over from a job that claimed it and died, without "
                      "waiting for its claim to grow stale")
    work.add_argument("--cache", type=Path, metavar="DIR",
                      help="clone cache (default: $XDG_CACHE_HOME/delivery)")
    work.add_argument("--json", action="store_true",
                      help="print the outcome as JSON (status chunk_done, superseded, or "
                      "what resume prints when this worker continues the run)")
    add_quiet_option(work)


def cmd_work(args: argparse.Namespace, out: TextIO, report: Report,
             options: EngineOptions) -> int:
    """The worker (the engine loaded here); `report` prints a run's outcome as resume's."""
    from delivery.cli.state_commands import open_state
    from delivery.engine.chunk_work import ChunkDone, work_chunk
    from delivery.engine.world import World
    from delivery.git.runref import is_run_id
    from delivery.state.remote import job_id

    if not args.state:
        raise RunRefused("delivery work", "needs the state repository the run is kept on",
                         "add --state git:OWNER/NAME (or the state repository's path)")
    if not is_run_id(args.run):
        raise RunRefused(f"run id {args.run!r}", "is not a run id",
                         "pass the run id printed by delivery run or delivery runs")
    env = dict(os.environ)
    state = open_state(args.state, args.cache, env)
    outcome = work_chunk(state, args.run, args.chunk, job=job_id(env),
                         workspace=args.workspace or Path.cwd(),
                         world=World(git_cache=args.cache), take_over=args.take_over,
                         options=options, observer=getattr(args, "progress", None))
    if isinstance(outcome, ChunkDone):
        if args.json:
            print(json.dumps(outcome.to_json(), indent=2, sort_keys=True), file=out)
        else:
            print(f"run {outcome.run_id}: chunk {outcome.chunk} done "
                  f"({len(outcome.folders)} folders); the last worker continues the run",
                  file=out)
        return 0
    return report(outcome, args.json, out)
