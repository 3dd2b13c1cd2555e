"""`delivery close RUN` (SPEC §7.1): the command line of `delivery.engine.close_run`."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TextIO

from delivery.cli.run_lookup import find_run
from delivery.engine.close_run import close_run
from delivery.engine.world import World
from delivery.errors import RunRefused
from delivery.git.runref import is_run_id

EXIT_OK, EXIT_FAILED = 0, 1


def cmd_close(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    world = World(git_cache=args.cache)
    if args.state:
        from delivery.cli.state_commands import state_world

        if not args.run or not is_run_id(args.run):
            raise RunRefused("close --state", f"needs a run id, not {args.run or 'nothing'}",
                             "pass the run id printed by delivery runs --state")
        workspace = (args.workspace or Path.cwd()).resolve()
        state_world(world, args.state, args.cache, run_id=args.run, workspace=workspace)
        run_path = workspace / ".delivery" / "runs" / args.run
    else:
        run_path = find_run(args.run, last=args.last, workspace=args.workspace)
    closed = close_run(run_path, world, comment=args.comment,
                       delete_branches=args.delete_branches)
    for line in closed.lines:
        print(f"  {line}", file=out)
    for problem in closed.problems:
        print(f"delivery close: {problem}", file=err)
    if not closed.changed:
        print(f"run {closed.run_id}: cancelled (already; nothing new to close)", file=out)
    else:
        print(f"run {closed.run_id}: cancelled", file=out)
    if closed.problems:
        print(f"  left as they were; run delivery close {shlex.quote(str(args.run or ''))} "
              "again to retry", file=err)
        return EXIT_FAILED
    return EXIT_OK
