"""The Action's one step: inputs and event in, runs started or resumed, results out.

    python -m delivery.action      # what action.yml's step runs; exit 3 when a run paused

Inputs arrive as `INPUT_<NAME>` variables (action.yml maps them), the event as
`GITHUB_EVENT_NAME` / `GITHUB_EVENT_PATH`. Runs work in event mode with their state on
`refs/delivery/runs/<id>` of the state repository (`state-repo`, default the repository
running the Action), each in its own workspace under `RUNNER_TEMP`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TextIO, cast

from delivery.action.events import MODES, Mode, Plan, plan
from delivery.action.fanout import (
    chunks_of,
    join_run_id,
    max_runners_option,
    repos_text,
    run_work,
    work_arguments,
)
from delivery.action.report import write_outputs, write_summary
from delivery.cli.state_commands import open_state, run_for_pr
from delivery.cli.workflow_commands import ActionOutput, format_command
from delivery.engine.budget import budget_option
from delivery.engine.chunk_work import chunks_to_run
from delivery.engine.run_loop import EngineOptions
from delivery.engine.run_setup import max_parallel_option
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.errors import (
    DeliveryError,
    NotOwner,
    ResumeStopped,
    RunRefused,
    StateSaveFailed,
    Superseded,
)
from delivery.git import cache_root
from delivery.lang.diagnostics import has_errors
from delivery.printable import PrintableStream
from delivery.state.remote import RemoteState, StateRunStores, job_id
from delivery.store.records import GateMode, RunStatus
from delivery.validation.loader import check_file

INPUTS = ("workflow", "ticket", "goal", "repos", "inputs", "agent", "github-token",
          "state-repo", "mode", "label", "run-id", "bot-login", "max-repairs", "budget",
          "max-parallel", "max-runners", "chunk")
DEFAULT_MAX_REPAIRS = 6
WRITERS = frozenset({"admin", "maintain", "write"})
# the runs a resume-all event wakes: paused ones, and running ones whose job may be dead
_UNFINISHED = frozenset({RunStatus.PAUSED, RunStatus.RUNNING})
# a job's result: a run's status, or what the job did instead of running one
ActionStatus = RunStatus | Literal["superseded", "ignored", "invalid", "refused",
                                  "chunk_done", "joined"]
EXIT: dict[ActionStatus, int] = {
    RunStatus.SUCCEEDED: 0, RunStatus.FAILED: 1, RunStatus.PAUSED: 3, "superseded": 0,
    "ignored": 0, "invalid": 1, "refused": 2, "chunk_done": 0,
    "joined": 0}


@dataclass
class Result:
    run_id: str
    status: ActionStatus
    reason: str = ""
    outcome: RunOutcome | None = None
    workflow: Path | None = None
    repos: dict[str, str] = field(default_factory=dict)
    chunks: list[int] = field(default_factory=list)  # a fan-out's, for the worker matrix
    # a worker's chunk: its number and its folders by state (done, running, failed)
    work: dict[str, Any] = field(default_factory=dict)


def read_inputs(environ: Mapping[str, str]) -> dict[str, str]:
    """`INPUT_GITHUB_TOKEN` for `github-token`, as the runner names them."""
    return {name: environ.get("INPUT_" + name.upper().replace("-", "_"), "").strip()
            for name in INPUTS}


def bundled_workflow() -> Path:
    return Path(str(resources.files("delivery.bundled.workflows") / "deliver.dot"))


def parse_repos(text: str) -> dict[str, str]:
    """`name=owner/repo` per line (blank lines and `#` comments skipped)."""
    repos: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, location = line.partition("=")
        if not sep or not name.strip() or not location.strip():
            raise RunRefused(f"repos line {line!r}", "is not NAME=OWNER/REPO",
                             "write one folder per line: api=octo/api")
        repos[name.strip()] = location.strip()
    return repos


def parse_inputs(text: str) -> dict[str, str]:
    """The `inputs` input: `name=value` per line (blank lines and `#` comments skipped);
    the value is everything after the first `=`, so it may hold `=` itself."""
    given: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, sep, value = stripped.partition("=")
        if not sep or not name.strip():
            raise RunRefused(f"inputs line {stripped!r}", "is not NAME=VALUE",
                             "write one workflow input per line: check_command=make test")
        given[name.strip()] = value.strip()
    return given


def main(environ: Mapping[str, str] | None = None, out: TextIO | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    # a run's text shown on the runner's log as text, never as terminal controls
    stream = cast(TextIO, PrintableStream(out or sys.stdout))
    inputs = read_inputs(env)
    token = inputs["github-token"] or env.get("GITHUB_TOKEN", "")
    if token:
        # before anything could print it (and before commands stop: masks must be read)
        stream.write(format_command("add-mask", token) + "\n")
        env["GITHUB_TOKEN"] = token
    os.environ["GITHUB_TOKEN"] = token  # the redactor masks the token wherever a run writes
    # from here on no text printed or logged can become a workflow command (SPEC §13)
    with ActionOutput(stream) as output, _logging_to(output):
        try:
            results = _act(env, inputs, output)
        except (StateSaveFailed, ResumeStopped) as fault:  # failed, resumable
            output.command("error", f"delivery: {fault}")
            results = [Result(fault.run_id, RunStatus.FAILED, str(fault))]
        except DeliveryError as err:
            output.command("error", f"delivery: {err}")
            results = [Result("", "refused", str(err))]
        write_outputs(env, results)
        write_summary(env, results)
        for result in results:
            line = f"delivery: run {result.run_id or '-'}: {result.status}"
            print(line + (f" ({result.reason})" if result.reason else ""), file=output)
    codes = [EXIT.get(result.status, 1) for result in results] or [0]
    for wanted in (1, 2, 3):
        if wanted in codes:
            return wanted
    return 0


@contextmanager
def _logging_to(output: ActionOutput) -> Iterator[None]:
    """delivery's log lines go through `output` too (stderr is read for commands alike)."""
    logger = logging.getLogger("delivery")
    handler = logging.StreamHandler(output)
    handler.setFormatter(logging.Formatter("delivery: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _act(env: dict[str, str], inputs: Mapping[str, str], out: ActionOutput) -> list[Result]:
    repository = env.get("GITHUB_REPOSITORY", "")
    payload = _payload(env)
    mode = inputs["mode"] or "auto"
    if mode not in (*MODES, "work", "join"):
        raise RunRefused(f"mode {mode!r}", "is not a mode", "use start, resume, auto, "
                         "work or join")
    # the step's own inputs, refused before any event is looked at (a mistake in the
    # workflow file shows on its first job, not on the first that starts or resumes)
    _options(inputs)
    budget_option(inputs["budget"], "budget")
    max_parallel_option(inputs["max-parallel"], "max-parallel")
    max_runners_option(inputs["max-runners"])
    if mode == "work":
        return [_work(env, inputs, repository)]
    if mode == "join":
        return [_join(env, inputs, repository)]
    decided = plan(env.get("GITHUB_EVENT_NAME", ""), payload, mode=cast(Mode, mode),
                   trigger_label=inputs["label"] or "delivery",
                   bot_login=inputs["bot-login"] or "delivery[bot]", inputs=inputs,
                   repository=repository, actor=env.get("GITHUB_ACTOR", ""))
    if decided.kind == "ignore":
        return [Result("", "ignored", decided.reason)]
    if decided.needs_permission and not _may_steer(env, repository, decided.actor):
        out.command("warning", f"delivery: {decided.actor or 'an unknown user'} has no "
                    f"write permission on {repository}; the event is ignored")
        return [Result("", "ignored", f"{decided.actor} may not start or steer runs")]
    spec = inputs["state-repo"] or repository
    if not Path(spec).is_absolute():
        spec = "git:" + spec
    base = _workspace(env)
    cache = cache_root(env)
    state = open_state(spec, cache, env)
    if decided.kind == "start":
        return [_start(env, inputs, decided, state, base, cache, out)]
    run_ids = _runs_to_resume(env, decided, state, out)
    if not run_ids:
        return [Result("", "ignored", "no paused run to resume for this event")]
    return [_resume(env, inputs, decided, state, run_id,
                    base if index == 0 else _side_workspace(env, base, run_id), cache)
            for index, run_id in enumerate(run_ids)]


def _workspace(env: Mapping[str, str]) -> Path:
    """The checkout of the repository running the Action (GITHUB_WORKSPACE): its
    delivery.toml (profiles, checks) is the run's. Without one, a fresh directory."""
    checkout = env.get("GITHUB_WORKSPACE", "")
    if checkout and Path(checkout).is_dir():
        return Path(checkout)
    base = Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()) / "delivery"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="run-", dir=base))


def _side_workspace(env: Mapping[str, str], checkout: Path, run_id: str) -> Path:
    """A second run resumed by the same job (the schedule) cannot share the checkout: its
    folders' worktrees would land where the first run's are. It works beside it, with the
    checkout's profile files copied so that its agents and checks are the same."""
    side = Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()) / "delivery" / run_id
    side.mkdir(parents=True, exist_ok=True)
    for name in ("delivery.toml", "pyproject.toml"):
        if (checkout / name).is_file():
            shutil.copyfile(checkout / name, side / name)
    return side


def _payload(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except RecursionError:
        raise RunRefused(f"event payload {path}", "nests arrays or objects too deeply to be "
                         "an event GitHub sends", "run the Action from a workflow event"
                         ) from None
    except (OSError, ValueError) as err:
        raise RunRefused(f"event payload {path}", f"cannot be read: {err}",
                         "run the Action from a workflow event") from None
    if not isinstance(data, dict):
        raise RunRefused(f"event payload {path}", f"holds a {type(data).__name__}, not an "
                         "object", "run the Action from a workflow event")
    return data


def _may_steer(env: Mapping[str, str], repository: str, user: str) -> bool:
    """Write permission, asked of the API (SPEC §14; never author_association)."""
    if not user:
        return False
    from delivery.forges.github import GitHubForge

    forge = GitHubForge.from_environment(env)
    try:
        return forge.permission(repository, user) in WRITERS
    finally:
        forge.close()


def _world(env: Mapping[str, str], state: RemoteState, run_id: str, cache: Path,
           workspace: Path | None = None) -> World:
    """The run's world: its state kept on the state ref (each save pushed there)."""
    stores = StateRunStores(state.session(run_id, job_id(env)), workspace=workspace)
    return World(environ=env, git_cache=cache, stores=stores)


def _options(inputs: Mapping[str, str]) -> EngineOptions:
    text = inputs.get("max-repairs") or str(DEFAULT_MAX_REPAIRS)
    if not text.isdigit() or int(text) < 1:
        raise RunRefused(f"max-repairs {text!r}", "is not a positive number",
                         f"give a number of runs per agent stage, e.g. {DEFAULT_MAX_REPAIRS}")
    return EngineOptions(max_agent_runs=int(text))


def _start(env: Mapping[str, str], inputs: Mapping[str, str], decided: Plan,
           state: RemoteState, base: Path, cache: Path, out: ActionOutput) -> Result:
    workflow = Path(inputs["workflow"]) if inputs["workflow"] else bundled_workflow()
    if not workflow.is_absolute():
        workflow = Path(env.get("GITHUB_WORKSPACE") or Path.cwd()) / workflow
    try:
        loaded, diagnostics = check_file(workflow)
    except (OSError, UnicodeDecodeError) as err:
        raise RunRefused(f"workflow {workflow}", f"cannot be read: {err}",
                         "name a UTF-8 workflow file in the repository (input workflow)"
                         ) from None
    for diagnostic in diagnostics:  # annotations on the workflow file's lines
        out.raw_command(diagnostic.format_github())
    if loaded is None or has_errors(diagnostics):
        return Result("", "invalid", f"{workflow} has validation errors", workflow=workflow)
    declared = {decl.name for decl in loaded.inputs}
    given = {"ticket": decided.ticket, "notes": decided.notes}
    run_inputs = {name: value for name, value in given.items() if value and name in declared}
    # the `inputs` input is the user's: an undeclared name is refused by the run, not dropped
    run_inputs.update(parse_inputs(inputs["inputs"]))
    repos = parse_repos(repos_text(inputs["repos"], base))
    workspace = base
    request = RunRequest(workflow=workflow, goal=decided.goal or None, inputs=run_inputs,
                         agent=inputs["agent"], workspace=workspace, repos=repos,
                         gates=GateMode.PAUSE, budget=inputs["budget"],
                         max_parallel=inputs["max-parallel"] or None,
                         max_runners=inputs["max-runners"] or None)
    world = _world(env, state, "", cache)
    try:
        outcome = start_run(request, world, options=_options(inputs))
    except Superseded as lost:
        return Result(lost.run_id, "superseded", lost.why, workflow=workflow, repos=repos)
    return Result(outcome.run_id, outcome.status, outcome.failure_reason, outcome, workflow,
                  repos, chunks_of(outcome.to_json(full=False)))


def _runs_to_resume(env: Mapping[str, str], decided: Plan, state: RemoteState,
                    out: ActionOutput) -> list[str]:
    if decided.kind == "resume" and decided.run_id:
        return [decided.run_id]
    found: list[str] = []
    prs = [*decided.prs, *_open_prs_of_heads(env, decided.heads)]
    for pr in prs:
        try:
            found.append(run_for_pr(pr, env, state))
        except NotOwner as stranger:  # a copied marker: ignored, logged, nothing claimed
            print(f"delivery: ignored: {stranger}", file=out)
        except RunRefused:
            continue  # a PR no delivery run opened
    if found:
        # a late event on a PR of a delivered run (its merge, a last review) wakes nothing:
        # the run's history stays as it ended
        done = {run.run_id for run in state.runs() if run.status is RunStatus.SUCCEEDED}
        return [run_id for run_id in dict.fromkeys(found) if run_id not in done]
    if prs or decided.heads:
        return []
    # paused runs, and running ones: a run whose job was killed is taken over once its
    # claim is dead (a live claim answers `superseded`)
    paused = [run for run in state.runs() if run.status in _UNFINISHED]
    if decided.answers:  # an answer on the ticket: the paused runs of that ticket
        paused = [run for run in paused if decided.ticket and run.ticket == decided.ticket]
    return [run.run_id for run in paused]


def _open_prs_of_heads(env: Mapping[str, str], heads: list[str]) -> list[str]:
    """`owner/name#N` of the open PRs whose head is one of `owner/name:branch` (a commit
    status names branches, not PRs)."""
    if not heads:
        return []
    from delivery.forges.github import GitHubForge

    forge = GitHubForge.from_environment(env)
    try:
        found = []
        for head in heads:
            repository, _, branch = head.partition(":")
            found += [f"{repository}#{number}"
                      for number in forge.open_pull_requests(repository, branch)]
        return found
    finally:
        forge.close()


def _resume(env: Mapping[str, str], inputs: Mapping[str, str], decided: Plan,
            state: RemoteState, run_id: str, base: Path, cache: Path) -> Result:
    workspace = base
    world = _world(env, state, run_id, cache, workspace)
    try:
        outcome = resume_run(workspace / ".delivery" / "runs" / run_id, world,
                             answers=decided.answers or None, options=_options(inputs),
                             answered_by=f"github:{decided.actor}" if decided.answers else "",
                             budget=inputs["budget"])
    except Superseded as lost:
        return Result(run_id, "superseded", lost.why)
    copy = workspace / ".delivery" / "runs" / run_id / "workflow.dot"
    info = _read_json(workspace / ".delivery" / "runs" / run_id / "run.json")
    return Result(outcome.run_id, outcome.status, outcome.failure_reason, outcome, copy,
                  dict(info.get("repos") or {}), chunks_of(outcome.to_json(full=False)))


def _work(env: Mapping[str, str], inputs: Mapping[str, str], repository: str) -> Result:
    """Mode work: one chunk of a stage that fanned out (`delivery work`), in the checkout
    (its delivery.toml); the worker that saves the last result continues the run."""
    spec = inputs["state-repo"] or repository
    state = spec if Path(spec).is_absolute() else "git:" + spec
    arguments = work_arguments(state, inputs["run-id"], inputs["chunk"])
    answer = run_work(arguments, env, _workspace(env))
    status = str(answer.get("status") or "failed")
    statuses = {str(key): key for key in EXIT}
    known = statuses.get(status, RunStatus.FAILED)
    reason = str(answer.get("failure_reason") or answer.get("reason") or "")
    return Result(str(answer.get("run_id") or inputs["run-id"]), known, reason,
                  chunks=chunks_of(answer), work={"chunk": inputs["chunk"], **answer})


def _join(env: Mapping[str, str], inputs: Mapping[str, str], repository: str) -> Result:
    """Mode join, after a round of workers (every leg of the matrix ended): the chunks of a
    fan-out the run now waits at that no live worker holds, as `chunks` for the next
    round's matrix. Read from the state ref alone (a matrix's job outputs are whichever
    leg wrote last, so the continuing worker's own `chunks` cannot be relied on)."""
    run_id = join_run_id(inputs["run-id"])
    spec = inputs["state-repo"] or repository
    state = open_state(spec if Path(spec).is_absolute() else "git:" + spec, cache_root(env),
                       env)
    status, chunks = chunks_to_run(state, run_id, job=job_id(env), workspace=_workspace(env))
    listed = ",".join(str(number) for number in chunks)
    told = f"the run is {status or 'unknown'}" + (
        f"; chunks {listed} of its fan-out are left for the next round of workers"
        if chunks else "")
    return Result(run_id, "joined", told, chunks=chunks)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
