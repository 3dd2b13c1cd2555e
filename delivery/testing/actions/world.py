"""The simulated Actions world: repositories on the fake GitHub with workflow files, GitHub's
rules for which event starts which job, and jobs that run the Action's step on a runner.

Delivery rules, as GitHub applies them (SPEC §13 "Where events arrive"):
- an event goes only to the workflows of the repository it happened in;
- a change made with the default GITHUB_TOKEN starts no workflow (no event at all);
- CI run by Actions reports through `workflow_run` (completed), never `check_suite`;
- `on:` triggers with `types:` (and `workflows:` for workflow_run) are honoured, `if:` of a
  job is evaluated before it is queued (a skipped job neither runs nor waits);
- concurrency: a job queued in a group where another job is still pending replaces it (the
  pending one is cancelled, as with `cancel-in-progress: false`); a job started by a change
  that a job of the same group made while it ran had to wait for it (`Job.waited_for`);
- `schedule` fires only on `tick()`.

Jobs run one at a time, except the legs of one matrix, which start together on their own
runners (threads, each running its steps' processes; `strategy.max-parallel` honoured) and
whose events are raised once they have all ended. CI finishes after the job whose push
started it (the checks of the head are computed by the fake's CheckRules then, and stay
in progress before), which is how a runner would see it: CI takes minutes, a delivery job seconds.

GitHub reports each job's workflow run (`GET /repos/{o}/{r}/actions/runs/{id}`): in progress
while it runs, completed once it ends, a killed job included; a hosted job's claims name
its own machine (`DELIVERY_HOST`), so a claim outlives a killed job unless GitHub is asked.

Of a job's steps, `actions/checkout` clones from the fake GitHub,
`actions/create-github-app-token` mints an App token with the step's permissions
(`app_token`; its scope is recorded in `Job.steps`), and this repository's action (`uses:
<owner>/delivery@<ref>`) runs action.yml's `deliver` step as the runner would (`python -m
delivery.action`, its inputs through `INPUT_*`); a `run:` step with an `id` (whose outputs
a later step reads) runs in bash, other `run:` steps (installing a CLI, a report) are
recorded, not run. Jobs with `needs:` are queued once the jobs they need have ended, a
`strategy.matrix` is one job per combination, and `uses: ./.github/workflows/<file>` is the
repository's own reusable workflow, all its jobs run under the caller's name (`work /
chunk`, `work / join`), its `workflow_call` outputs read from theirs once they have all
ended (delivery.testing.actions.graph). A job whose needed job failed or was skipped is
skipped unless its `if:` calls a status function (`!cancelled()`). A reusable workflow of
delivery (`uses: <owner>/delivery/.github/workflows/<file>@<ref>`) is read from this
repository.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml

from delivery.testing.actions import app_token, graph
from delivery.testing.actions.expressions import checks_status, evaluate_if, substitute
from delivery.testing.github import CheckRule, FakeGitHub

_ACTION = graph.ACTION
_REUSABLE = graph.REUSABLE
_JOB_TIMEOUT = 300  # seconds one simulated job may take before the world gives up on it
BOT = {"login": "delivery[bot]", "type": "Bot"}


class WorldError(RuntimeError):
    """The world's own files or limits are wrong (not a failure of the code under test)."""


@dataclass
class Job:
    number: int
    repository: str
    workflow: str
    job: str
    event: str
    payload: dict[str, Any]
    group: str = ""
    state: str = "queued"  # queued | completed | failed | skipped | cancelled
    code: int | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    stdout: str = ""
    stderr: str = ""
    steps: list[str] = field(default_factory=list)
    waited_for: int | None = None  # the job of the same group it had to wait for
    caused_by: int | None = None  # the job whose change raised its event
    token: str = ""  # "app" or "default": the token the delivery step was given
    run: int = 0  # the workflow run it belongs to: jobs with `needs:` wait for its others
    runner: dict[str, Path] = field(default_factory=dict)  # home, workspace, cache
    started: float = 0.0  # when it started and ended on its runner (time.time())
    ended: float = 0.0
    contexts: dict[str, Any] = field(default_factory=dict, repr=False)
    definition: dict[str, Any] = field(default_factory=dict, repr=False)
    scope: str = ""  # the job that called its reusable workflow (`work` of `work / chunk`)
    call: bool = False  # the record of a call: it ends when the called jobs have ended


@dataclass
class _Call:
    """A call of a reusable workflow in one workflow run."""

    record: Job
    called: dict[str, Any]
    inputs: dict[str, Any]
    secrets: dict[str, str]


_ENDED = frozenset({"completed", "failed", "skipped", "cancelled"})


@dataclass
class _Repo:
    name: str
    workflows: dict[str, dict[str, Any]]


# What the world's runners add to every job's environment (as a self-hosted runner's `.env`
# file would): the fake GitHub answers in milliseconds, and a second of real waiting between
# writes (delivery's pacing, SPEC §7.1) was most of a job's time. Pacing itself is tested on
# a fake clock (tests/forges/test_pacing.py); `runner_env={}` keeps it on.
RUNNER_ENV: Final[Mapping[str, str]] = MappingProxyType({"DELIVERY_WRITE_SPACING": "0"})


class ActionsWorld:
    """Repositories with workflow files on `github`, and the jobs their events start."""

    def __init__(self, github: FakeGitHub, root: Path, *, action_root: Path,
                 self_hosted: bool = False, secrets: Mapping[str, str] | None = None,
                 variables: Mapping[str, str] | None = None,
                 python: str = sys.executable,
                 runner_env: Mapping[str, str] = RUNNER_ENV) -> None:
        self.github = github
        self.root = root
        self.action_root = action_root
        self.self_hosted = self_hosted
        self.secrets = dict(secrets or {})
        self.variables = dict(variables or {})
        self.python = python
        self.runner_env = dict(runner_env)
        self.default_token = "ghs_defaultGITHUBTOKEN0123456789abcdef"
        github.other_tokens.add(self.default_token)
        self.repos: dict[str, _Repo] = {}
        self.jobs: list[Job] = []
        self.queue: list[Job] = []
        self.people: list[Callable[[ActionsWorld], None]] = []
        self._numbers = itertools.count(1)
        self._seen_pulls: dict[tuple[str, int], tuple[str, str, bool]] = {}
        self._seen_comments: set[tuple[str, int]] = set()
        self._calls: dict[tuple[int, str], _Call] = {}  # (workflow run, caller job id)

    # -- the world, set up ----------------------------------------------------------------
    def add_repository(self, full_name: str, *, workflows: Mapping[str, str],
                       files: Mapping[str, str] | None = None,
                       check_rules: tuple[CheckRule, ...] = (),
                       collaborators: Mapping[str, str] | None = None,
                       required_approvals: int = 0) -> None:
        """A repository whose `.github/workflows/` holds `workflows` (file name → text, read
        as GitHub reads them) besides `files`; CI (`check_rules`) finishes only when a
        workflow of the repository runs it."""
        tree = dict(files or {})
        tree.update({f".github/workflows/{name}": text for name, text in workflows.items()})
        self.github.create_repo(full_name, files=tree, check_rules=check_rules,
                                collaborators=dict(collaborators or {}),
                                required_approvals=required_approvals,
                                require_checks=bool(check_rules))
        self.github.hold_checks(full_name)
        self.repos[full_name] = _Repo(full_name, {
            name: _load(text, f"{full_name}/.github/workflows/{name}")
            for name, text in workflows.items()})

    def push(self, repository: str, files: Mapping[str, str], message: str = "push") -> None:
        """A person pushes `files` to the repository's default branch; the workflow files
        among them (directly in `.github/workflows/`, as GitHub reads them) take effect."""
        branch = self.github.repository(repository).default_branch
        self.github.push_files(repository, branch, dict(files), message)
        for path, text in files.items():
            folder, _, name = path.rpartition("/")
            if folder == ".github/workflows":
                self.repos[repository].workflows[name] = _load(text, f"{repository}/{path}")

    # -- people and time ------------------------------------------------------------------
    def label_issue(self, repository: str, number: int, *, title: str, body: str = "",
                    label: str = "delivery", by: str = "alice") -> None:
        self.emit(repository, "issues", {
            "action": "labeled", "label": {"name": label},
            "issue": {"number": number, "title": title, "body": body,
                      "html_url": f"{self.github.server_url}/{repository}/issues/{number}"},
            "sender": {"login": by, "type": "User"}})

    def review(self, repository: str, number: int, *, by: str, state: str,
               body: str = "") -> None:
        """A person submits a review (APPROVED, CHANGES_REQUESTED, COMMENTED)."""
        self.github.add_review(repository, number, by, state, body)
        pr = self.github.pull(repository, number)
        self.emit(repository, "pull_request_review", {
            "action": "submitted", "review": {"state": state.lower(), "body": body,
                                              "user": {"login": by, "type": "User"}},
            "pull_request": self._pr_payload(repository, pr.number),
            "sender": {"login": by, "type": "User"}})

    def tick(self) -> None:
        """The schedule fires: every workflow with a `schedule` trigger gets its event."""
        for repository, repo in self.repos.items():
            for workflow in repo.workflows.values():
                for entry in graph.triggers(workflow).get("schedule") or []:
                    self.emit(repository, "schedule", {"schedule": entry.get("cron", "")})
                    break

    def emit(self, repository: str, event: str, payload: dict[str, Any], *,
             cause: Job | None = None, immediate: bool = False) -> None:
        """An event in `repository`: queues the jobs of its workflows that it triggers."""
        payload = {**payload, "repository": {"full_name": repository,
                                             "name": repository.split("/")[1]}}
        for name, workflow in self.repos[repository].workflows.items():
            if graph.is_ci(workflow) or not graph.triggered(workflow, event, payload):
                continue
            run = next(self._numbers)  # the workflow run its jobs share (`needs:`)
            for job_id, definition in (workflow.get("jobs") or {}).items():
                if definition.get("needs"):
                    continue  # queued once what it needs has ended (_release)
                self._queue_job(repository, name, workflow, job_id, definition, event,
                                payload, cause, immediate, run=run)

    # -- running --------------------------------------------------------------------------
    def settle(self, max_jobs: int = 40) -> list[Job]:
        """Run queued jobs until none is left (people act after each); the jobs run."""
        ran: list[Job] = []
        while self.queue:
            if len(ran) >= max_jobs:
                raise WorldError(f"the world did not settle within {max_jobs} jobs: "
                                 f"{[(j.repository, j.event) for j in self.queue]} still queued")
            first = self.queue.pop(0)
            # the legs of one matrix start together, each on its own runner, as on GitHub
            # (up to its `strategy.max-parallel`); any other job runs alone
            batch = [first, *(job for job in self.queue if _same_matrix(job, first))]
            self.queue = [job for job in self.queue if job not in batch]
            limit = _matrix_parallel(first.definition) or len(batch)
            with ThreadPoolExecutor(max_workers=max(1, min(limit, len(batch)))) as pool:
                list(pool.map(self._run, batch))
            for job in batch:
                ran.append(job)
                self._release(job)
                self._observe(job)
            for person in self.people:
                person(self)
        return ran

    def delivery_jobs(self) -> list[Job]:
        """The jobs that ran this repository's action, in order."""
        return [job for job in self.jobs if job.token]

    # -- queueing -------------------------------------------------------------------------
    def _contexts(self, repository: str, workflow: str, event: str,
                  payload: dict[str, Any], number: int) -> dict[str, Any]:
        sender = payload.get("sender") if isinstance(payload.get("sender"), dict) else {}
        return {"github": {
            "event_name": event, "event": payload, "repository": repository,
            "repository_owner": repository.split("/")[0], "run_id": str(10_000 + number),
            "run_attempt": "1", "actor": (sender or {}).get("login", ""),
            "workflow": workflow, "token": self.default_token, "server_url":
                self.github.server_url, "api_url": self.github.api_url},
            "secrets": {**self.secrets, "GITHUB_TOKEN": self.default_token},
            "vars": dict(self.variables), "inputs": {}, "env": {}, "steps": {}}

    def _queue_job(self, repository: str, name: str, workflow: dict[str, Any], job_id: str,
                   definition: dict[str, Any], event: str, payload: dict[str, Any],
                   cause: Job | None, immediate: bool, *, run: int,
                   needs: dict[str, Any] | None = None, scope: str = "") -> None:
        """Queues one job (each leg of its matrix), or skips it; a call of a reusable
        workflow queues that workflow's first jobs, its own record standing for the call
        until they have all ended. `scope`: the calling job's id, for a called job."""
        number = next(self._numbers)
        contexts = self._contexts(repository, str(workflow.get("name") or name), event,
                                  payload, number)
        contexts["needs"] = dict(needs or {})
        contexts["job"] = {"status": graph.needs_status(needs or {})}
        call = self._calls.get((run, scope)) if scope else None
        if call is not None:  # a called job sees the call's inputs and secrets
            contexts["inputs"], contexts["secrets"] = call.inputs, call.secrets
        job = Job(number, repository, name, f"{scope} / {job_id}" if scope else job_id,
                  event, payload, contexts=contexts,
                  caused_by=cause.number if cause else None, run=run, scope=scope,
                  definition=definition)
        self.jobs.append(job)
        condition = definition.get("if")
        if (contexts["job"]["status"] != "success" and not checks_status(condition)) or \
                not evaluate_if(condition, contexts):
            job.state = "skipped"  # GitHub's implicit success() of the jobs it needs
            self._release(job)
            return
        concurrency = workflow.get("concurrency")
        if "uses" in definition:  # a reusable workflow: its jobs run in the caller's event
            self._call(job, definition, workflow, cause)
            return
        concurrency = definition.get("concurrency") or concurrency
        try:
            combinations = graph.matrix_combinations(definition, contexts)
        except graph.GraphError as error:
            raise WorldError(f"{repository} {name} {job_id}: {error}") from None
        if combinations is not None:
            if not combinations:  # an empty matrix runs no job
                job.state = "skipped"
                self._release(job)
                return
            contexts["matrix"] = combinations[0]
            for combination in combinations[1:]:  # each its own job, on its own runner
                other_number = next(self._numbers)
                other_contexts = copy.deepcopy(contexts)
                other_contexts["matrix"] = combination
                other_contexts["github"]["run_id"] = str(10_000 + other_number)
                other = Job(other_number, repository, name, job.job, event, payload,
                            contexts=other_contexts, caused_by=job.caused_by, run=run,
                            definition=definition, scope=scope)
                self.jobs.append(other)
                self.queue.append(other)
        group = concurrency.get("group") if isinstance(concurrency, dict) else concurrency
        job.group = substitute(str(group), contexts) if group else ""
        if job.group:
            for pending in self.queue:
                if pending.group == job.group:  # one pending job per group: the newest
                    pending.state = "cancelled"
            self.queue = [pending for pending in self.queue if pending.state != "cancelled"]
            if immediate and cause is not None and cause.group == job.group:
                job.waited_for = cause.number
        self.queue.append(job)

    def _reusable(self, uses: str, repository: str) -> dict[str, Any]:
        local = graph.local_workflow(uses)
        if local is not None:
            if local not in self.repos[repository].workflows:
                raise WorldError(f"{uses!r}: {repository} has no such workflow")
            return self.repos[repository].workflows[local]
        match = _REUSABLE.match(uses)
        if match is None:
            raise WorldError(f"reusable workflow {uses!r} is not one of this repository's")
        path = self.action_root / match.group(1)
        called = _load(path.read_text(encoding="utf-8"), str(path))
        if "workflow_call" not in graph.triggers(called):
            raise WorldError(f"{path} is not reusable: it has no `on: workflow_call`")
        return called

    def _call(self, job: Job, definition: dict[str, Any], workflow: dict[str, Any],
              cause: Job | None) -> None:
        """`job` calls a reusable workflow: its jobs without `needs:` are queued, in the
        caller's event and workflow run, named `<caller> / <job>`."""
        called = self._reusable(str(definition["uses"]), job.repository)
        try:
            inputs = graph.call_inputs(called, definition.get("with") or {}, job.contexts)
        except graph.GraphError as error:
            raise WorldError(str(error)) from None
        secrets = {key: substitute(str(value), job.contexts)
                   for key, value in (definition.get("secrets") or {}).items()}
        job.state, job.call = "running", True
        self._calls[(job.run, job.job)] = _Call(job, called, inputs, secrets)
        for inner_id, inner in (called.get("jobs") or {}).items():
            if not inner.get("needs"):
                self._queue_job(job.repository, job.workflow, called, str(inner_id), inner,
                                job.event, job.payload, cause, False, run=job.run,
                                scope=job.job)

    def _release(self, ended: Job) -> None:
        """The jobs of `ended`'s workflow (or called workflow) that need it, queued once
        every job they need has ended; then, when `ended` was the last job of a call, the
        call ends with the called workflow's outputs and releases what needs it."""
        call = self._calls.get((ended.run, ended.scope)) if ended.scope else None
        jobs = (call.called if call else
                self.repos[ended.repository].workflows[ended.workflow]).get("jobs") or {}
        siblings = [job for job in self.jobs if job.run == ended.run
                    and job.repository == ended.repository and job.scope == ended.scope]
        by_id: dict[str, list[Job]] = {}
        for job in siblings:
            by_id.setdefault(job.job.rpartition(" / ")[2], []).append(job)
        for job_id, definition in jobs.items():
            wanted = graph.needed(definition)
            if ended.job.rpartition(" / ")[2] not in wanted or job_id in by_id:
                continue
            if not all(by_id.get(need) and all(job.state in _ENDED for job in by_id[need])
                       for need in wanted):
                continue
            needs = {need: graph.need_context(by_id[need]) for need in wanted}
            self._queue_job(ended.repository, ended.workflow, call.called if call else
                            self.repos[ended.repository].workflows[ended.workflow],
                            str(job_id), definition, ended.event, ended.payload, ended,
                            False, run=ended.run, needs=needs, scope=ended.scope)
            by_id[str(job_id)] = [job for job in self.jobs if job.run == ended.run and
                                  job.scope == ended.scope and
                                  job.job.rpartition(" / ")[2] == job_id]
        if call is not None and call.record.state == "running" and set(jobs) <= set(by_id) \
                and all(job.state in _ENDED for found in by_id.values() for job in found):
            call.record.state, call.record.outputs = graph.call_result(call.called, by_id)
            self._release(call.record)

    # -- one job on a runner ------------------------------------------------------------------
    def _runner(self, job: Job) -> tuple[Path, Path, Path]:
        """HOME, workspace and clone cache: all new on a hosted runner; a self-hosted one
        keeps HOME and the cache, and each job gets another workspace."""
        machine = self.root / ("self-hosted" if self.self_hosted else f"runner-{job.number}")
        home = machine / "home"
        workspace = machine / "work" / f"job-{job.number}" / job.repository.split("/")[1]
        for path in (home, workspace, machine / "temp" / str(job.number)):
            path.mkdir(parents=True, exist_ok=True)
        return home, workspace, machine / "cache"

    def _run(self, job: Job) -> None:
        """The job on its runner; GitHub reports its workflow run in progress meanwhile
        and completed once it ends, killed or not (`GET …/actions/runs/{id}`)."""
        run_id = int(job.contexts["github"]["run_id"])
        self.github.record_actions_run(job.repository, run_id, "in_progress")
        job.started = time.time()
        try:
            self._steps(job)
        finally:
            job.ended = time.time()
            self.github.record_actions_run(
                job.repository, run_id, "completed",
                "success" if job.state == "completed" else "failure")

    def _steps(self, job: Job) -> None:
        home, workspace, cache = self._runner(job)
        job.runner = {"home": home, "workspace": workspace, "cache": cache}
        contexts = job.contexts
        job.state = "completed"
        for index, step in enumerate(job.definition.get("steps") or []):
            step_id = str(step.get("id") or f"step{index}")
            if not evaluate_if(step.get("if"), contexts):
                job.steps.append(f"skipped: {step.get('name') or step_id}")
                continue
            uses = str(step.get("uses") or "")
            given = {key: substitute(str(value), contexts)
                     for key, value in (step.get("with") or {}).items()}
            outputs: dict[str, str] = {}
            if uses.startswith("actions/checkout@"):
                self._checkout(job, given, workspace)
            elif uses.startswith("actions/create-github-app-token@"):
                token = app_token.step(self.github, given, job.repository, job.steps)
                if token is None:
                    job.state = "failed"
                    return
                outputs = {"token": token}
            elif _ACTION.match(uses):
                env = {key: substitute(str(value), contexts)
                       for key, value in (step.get("env") or {}).items()}
                outputs = self._deliver(job, given, env, home, workspace, cache)
                if job.code not in (0, None):
                    job.state = "failed"
                    return
            elif "run" in step and "id" in step:  # a step whose outputs a later one reads
                outputs = self._shell_step(job, step, workspace)
            else:
                job.steps.append(f"recorded: {step.get('name') or uses or step.get('run')}")
            contexts["steps"][step_id] = {"outputs": outputs}

    def _shell_step(self, job: Job, step: Mapping[str, Any], workspace: Path
                    ) -> dict[str, str]:
        output = workspace.parent / f"output-{job.number}-{step['id']}"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GITHUB_OUTPUT": str(output),
               "GITHUB_REPOSITORY": job.repository,
               **{key: substitute(str(value), job.contexts)
                  for key, value in (step.get("env") or {}).items()}}
        subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                        str(step["run"])], env=env, cwd=workspace, check=True,
                       capture_output=True, timeout=60)
        job.steps.append(f"ran: {step.get('name') or step['id']}")
        return graph.read_outputs(output)

    def _checkout(self, job: Job, given: Mapping[str, str], workspace: Path) -> None:
        repository = given.get("repository") or job.repository
        token = given.get("token") or self.default_token
        target = workspace / given["path"] if given.get("path") else workspace
        header = f"Authorization: Basic {_basic(token)}"
        subprocess.run(["git", "-c", f"http.extraHeader={header}", "clone", "--quiet",
                        f"{self.github.server_url}/{repository}.git", str(target)],
                       check=True, capture_output=True, timeout=60,
                       env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
        job.steps.append(f"checkout: {repository}")

    def _deliver(self, job: Job, given: Mapping[str, str], step_env: Mapping[str, str],
                 home: Path, workspace: Path, cache: Path) -> dict[str, str]:
        """action.yml's `deliver` step, with the environment a runner gives it."""
        action = _load((self.action_root / "action.yml").read_text(encoding="utf-8"),
                       "action.yml")
        declared = action.get("inputs") or {}
        unknown = set(given) - set(declared)
        if unknown:
            raise WorldError(f"{job.repository} {job.workflow}: inputs {sorted(unknown)} are "
                             "not declared by action.yml")
        values = {name: given.get(name, str(spec.get("default", "")))
                  for name, spec in declared.items()}
        deliver = next(step for step in action["runs"]["steps"] if step.get("id") == "deliver")
        temp = home.parent / "temp" / str(job.number)
        event_path, output, summary = temp / "event.json", temp / "output", temp / "summary.md"
        event_path.write_text(json.dumps(job.payload), encoding="utf-8")
        github = job.contexts["github"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "LANG": "C.UTF-8", **{k: v for k, v in self.github.env().items()
                                     if k != "GITHUB_TOKEN"},
               "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_REPOSITORY": job.repository,
               "GITHUB_EVENT_NAME": job.event, "GITHUB_EVENT_PATH": str(event_path),
               "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary),
               "GITHUB_WORKSPACE": str(workspace), "GITHUB_RUN_ID": github["run_id"],
               "GITHUB_RUN_ATTEMPT": "1", "GITHUB_ACTOR": github["actor"],
               "GITHUB_ACTION_PATH": str(self.action_root), "RUNNER_TEMP": str(temp),
               "XDG_CACHE_HOME": str(cache), "DELIVERY_PYTHON": self.python,
               **self.runner_env, **step_env}
        if not self.self_hosted:  # each hosted job on its own machine, as far as claims go
            env["DELIVERY_HOST"] = f"hosted-runner-{job.number}"
        for name, template in (deliver.get("env") or {}).items():
            env[name] = substitute(str(template), {"inputs": values})
        job.token = "default" if values.get("github-token") == self.default_token else "app"
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               deliver["run"]], env=env, cwd=workspace, capture_output=True,
                              text=True, timeout=_JOB_TIMEOUT, check=False)
        job.code, job.stdout, job.stderr = done.returncode, done.stdout, done.stderr
        job.outputs = graph.read_outputs(output)
        job.summary = summary.read_text(encoding="utf-8") if summary.exists() else ""
        job.steps.append(f"delivery: exit {done.returncode}, "
                         f"status {job.outputs.get('status', '-')}")
        step_outputs = {name: substitute(str(spec.get("value", "")),
                                         {"steps": {"deliver": {"outputs": job.outputs}}})
                        for name, spec in (action.get("outputs") or {}).items()}
        return step_outputs

    # -- what changed, and the events it raises -------------------------------------------
    def _pr_payload(self, repository: str, number: int) -> dict[str, Any]:
        state = self.github.state
        repo = self.github.repository(repository)
        pr = repo.pulls[number]
        return {"number": number, "state": pr.state, "merged": pr.merged,
                "head": {"ref": pr.head, "sha": state.head_sha(repo, pr)},
                "base": {"ref": pr.base, "repo": {"full_name": repository,
                                                  "name": repo.name}}}

    def _observe(self, cause: Job) -> None:
        """Events for what `cause` changed; none when it used the default token."""
        silent = cause.token == "default"
        sender = BOT if cause.token else {"login": "github-actions[bot]", "type": "Bot"}
        ci: list[tuple[str, int, str]] = []
        for repository in self.repos:
            repo = self.github.repository(repository)
            for number, pr in sorted(repo.pulls.items()):
                now = (self.github.state.head_sha(repo, pr), pr.state, pr.merged)
                before = self._seen_pulls.get((repository, number))
                self._seen_pulls[(repository, number)] = now
                action = ("opened" if before is None else
                          "closed" if now[1] == "closed" and before[1] != "closed" else
                          "synchronize" if now[0] != before[0] and now[1] == "open" else "")
                if not action or silent:
                    continue
                self.emit(repository, "pull_request", {
                    "action": action, "pull_request": self._pr_payload(repository, number),
                    "sender": sender}, cause=cause, immediate=True)
                if action in ("opened", "synchronize"):
                    ci.append((repository, number, action))
            for comment_id, comment in sorted(repo.comments.items()):
                if (repository, comment_id) in self._seen_comments:
                    continue
                self._seen_comments.add((repository, comment_id))
                if silent:
                    continue
                self.emit(repository, "issue_comment", {
                    "action": "created",
                    "issue": {"number": comment.number, "pull_request": {}},
                    "comment": {"body": comment.body, "user": sender}, "sender": sender},
                    cause=cause, immediate=True)
        for repository, number, action in ci:  # after the job: CI takes longer than it
            self._finish_ci(repository, number, action, sender, cause)

    def _finish_ci(self, repository: str, number: int, action: str,
                   sender: dict[str, str], cause: Job) -> None:
        repo = self.github.repository(repository)
        for name, workflow in self.repos[repository].workflows.items():
            payload = {"action": action, "pull_request": {"number": number}}
            if not graph.is_ci(workflow) or \
                    not graph.triggered(workflow, "pull_request", payload):
                continue
            pr_payload = self._pr_payload(repository, number)
            with self.github.state.lock:
                repo.hold_checks = False
                runs = self.github.state.check_runs(repo, pr_payload["head"]["sha"])
                repo.hold_checks = True
            conclusion = "success" if all(run.conclusion == "SUCCESS" for run in runs) \
                else "failure"
            title = str(workflow.get("name") or name)
            ci_job = Job(next(self._numbers), repository, name, "ci", "pull_request",
                         payload, state="completed", caused_by=cause.number,
                         steps=[f"ci: {conclusion} on {pr_payload['head']['sha'][:8]}"])
            self.jobs.append(ci_job)
            self.emit(repository, "workflow_run", {
                "action": "completed", "workflow_run": {
                    "name": title, "conclusion": conclusion, "event": "pull_request",
                    "head_branch": pr_payload["head"]["ref"],
                    "head_sha": pr_payload["head"]["sha"], "pull_requests": [pr_payload]},
                "sender": sender}, cause=ci_job)


def _same_matrix(job: Job, first: Job) -> bool:
    """`job` is another leg of `first`'s matrix (one job of one workflow run)."""
    return (job.run == first.run and job.repository == first.repository
            and job.job == first.job and job.definition is first.definition
            and "matrix" in first.contexts)


def _matrix_parallel(definition: Mapping[str, Any]) -> int:
    value = (definition.get("strategy") or {}).get("max-parallel")
    return value if isinstance(value, int) and value > 0 else 0


def _basic(token: str) -> str:
    return base64.b64encode(f"x-access-token:{token}".encode()).decode()


def _load(text: str, where: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    if not isinstance(loaded, dict):
        raise WorldError(f"{where} is not a workflow (a YAML mapping)")
    return loaded
