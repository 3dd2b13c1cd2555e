"""Event mode on the command line (SPEC §13): `run|resume --state …`, `resume --for-pr`,
`delivery runs`.

    delivery run flow.dot --state git:o/state ...       # saves after every stage, exit 3 paused
    delivery resume --state git:o/state RUN_ID          # claims, then continues
    delivery resume --state git:o/state --for-pr o/web#12
    delivery runs --state git:o/state --json
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from delivery.cli.run_status import shown_status
from delivery.engine.fan_out_chunks import StateFanOut
from delivery.engine.runner import World
from delivery.errors import DeliveryError, NotOwner, RunRefused, Superseded, paused_why
from delivery.git import cache_root
from delivery.git.runref import is_run_id
from delivery.state.claims import parse_status
from delivery.state.remote import RemoteState, RunSummary, StateRunStores, job_id
from delivery.store.runstore import LocalRunStore
from probes.waiting import run_waiting_for, waiting_summary

EXIT_OK = 0
# the run id is checked apart (is_run_id): a marker whose id is malformed is ignored and
# logged, never a git error (SPEC §14)
_MARKER = re.compile(r"<!-- delivery:begin run=(\S{0,200}?) -->")
_PR = re.compile(r"([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#([0-9]+)")


def open_state(spec: str, cache: Path | None,
               environ: Mapping[str, str] | None = None) -> RemoteState:
    env = dict(environ if environ is not None else os.environ)
    return RemoteState.open(spec, cache or cache_root(env), env)


def state_world(world: World, spec: str | None, cache: Path | None,
                environ: Mapping[str, str] | None = None, run_id: str = "", *,
                take_over: bool = False, workspace: Path | None = None) -> World:
    """`world` keeping its runs on the state ref when `--state` was given."""
    if spec:
        env = dict(environ if environ is not None else os.environ)
        session = open_state(spec, cache, env).session(run_id, job_id(env))
        world.stores = StateRunStores(session, take_over=take_over, workspace=workspace)
        world.fan_out = StateFanOut(session.state, session.job, take_over)
    return world


def run_for_pr(reference: str, environ: Mapping[str, str] | None = None,
               state: RemoteState | None = None) -> str:
    """The run id in the marked block of the PR `owner/name#N` (written by publish). With
    `state`, only the run that owns the PR: the PR's repository is one of the run's
    folders' and its head branch (in that same repository) is the run's branch; NotOwner
    otherwise."""
    match = _PR.fullmatch(reference.strip())
    if not match:
        raise RunRefused(f"--for-pr {reference}", "is not OWNER/NAME#NUMBER",
                         "write --for-pr octo/web#12")
    from delivery.forges.github import GitHubForge

    repository, number = match.group(1), int(match.group(2))
    forge = GitHubForge.from_environment(environ if environ is not None else os.environ)
    try:
        body, head_branch, head_repository = forge.pull_request_head(repository, number)
    finally:
        forge.close()
    found = _MARKER.search(body)
    if not found:
        raise RunRefused(f"pull request {reference}", "carries no delivery marker (it was "
                         "not opened by a delivery run)", "resume a run by its id instead")
    run_id = found.group(1)
    if not is_run_id(run_id):
        raise NotOwner(f"pull request {reference}", f"carries a malformed delivery marker "
                       f"(run={run_id[:40]!r} is not a run id)", "nothing to do: the marker "
                       "was not written by a delivery run")
    if state is not None:
        _check_owner(state, run_id, reference, repository, head_branch, head_repository)
    return run_id


def _check_owner(state: RemoteState, run_id: str, reference: str, repository: str,
                 head_branch: str, head_repository: str) -> None:
    subject = f"pull request {reference}"
    fix = "nothing to do: only the PRs a run opened steer it"
    sha = state.ref.fetch([run_id]).get(run_id)
    if sha is None:
        raise NotOwner(subject, f"carries the marker of run {run_id}, which is not on the "
                       f"state repository {state.spec}", fix)
    info = parse_status(state.ref.read_file(sha, "run.json"), limit=1 << 20)
    repos = info.get("repos") if isinstance(info.get("repos"), dict) else {}
    owned = {str(where).lower() for where in (repos or {}).values()}
    branch = info.get("branch") if isinstance(info.get("branch"), str) else ""
    if repository.lower() not in owned:
        raise NotOwner(subject, f"carries the marker of run {run_id}, whose folders are "
                       f"not in {repository}: the marker was copied", fix)
    if not branch or head_branch != branch or head_repository.lower() != repository.lower():
        where = f"{head_repository or 'an unknown repository'}:{head_branch}"
        raise NotOwner(subject, f"carries the marker of run {run_id}, but its head {where} "
                       f"is not that run's branch {branch or '(none)'} in {repository}", fix)


def superseded(error: Superseded, as_json: bool, out: TextIO) -> int:
    if as_json:
        print(json.dumps({"run_id": error.run_id, "status": "superseded",
                          "failure_reason": error.why, "path": [], "context": {},
                          "run_dir": ""}, indent=2, sort_keys=True), file=out)
    else:
        print(f"run {error.run_id}: superseded", file=out)
        print(f"  {error.why}", file=out)
    return EXIT_OK


def cmd_runs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.state:
        listed = open_state(args.state, None).runs()
    else:
        listed = local_runs(args.workspace or Path.cwd())
    if args.json:
        print(json.dumps([vars(run) for run in listed], indent=2, sort_keys=True), file=out)
        return EXIT_OK
    if not listed:
        print("no runs", file=out)
    for run in listed:
        waiting = f" (next: {run.next_node})" if run.next_node else ""
        held = f" claimed by {run.claimed_by}" if run.claimed_by else ""
        # a paused run's reason beside its status (`paused: rate_limit until …`); why a
        # run is interrupted after it (how to resume it)
        paused = run.status == "paused" and run.reason
        why = f": {run.reason}" + (f" until {run.until}" if run.until else "") \
            if paused else ""
        after = f" — {run.reason}" if run.reason and not paused else ""
        awaited = f" — waiting: {run.waiting}" if run.waiting else ""
        print(f"{run.run_id}  {run.status}{why}{waiting}{held}{after}{awaited}", file=out)
    return EXIT_OK


def local_runs(workspace: Path) -> list[RunSummary]:
    root = workspace / ".delivery" / "runs"
    listed = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if not (path / "run.json").is_file():
            continue
        try:
            store = LocalRunStore.open_dir(path)
            loaded = store.load()
            info = store.read_run_info()
        except (DeliveryError, OSError):  # a damaged run is listed as such, not a traceback
            listed.append(RunSummary(path.name, "unreadable", "", ""))
            continue
        if loaded is None:
            listed.append(RunSummary(path.name, "unknown", "", ""))
        else:
            _, gone = shown_status(path, info, loaded.state.status.value)
            reason, until = paused_why(loaded.state.context)
            listed.append(RunSummary(path.name, "interrupted" if gone else
                                     loaded.state.status, loaded.state.next_node or "", "",
                                     reason=gone or reason, until=until,
                                     waiting=waiting_summary(run_waiting_for(
                                         loaded.state.context, loaded.state.status.value,
                                         list(info.folders)))))
    return listed
