"""The job graph of one workflow run, as GitHub runs it: `needs:` (a job starts once the
jobs it needs have ended, their `outputs:` in its `needs` context), `strategy.matrix` (one
job per combination, each on its own runner, `matrix.<key>` in its contexts) and a reusable
workflow of the repository itself (`uses: ./.github/workflows/<file>`), with its jobs and
`workflow_call` outputs; and what a workflow file's `on:` and a step's GITHUB_OUTPUT say."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from delivery.testing.actions.expressions import substitute

ACTION = re.compile(r"^[\w.-]+/delivery@[\w.-]+$")  # this repository's action
REUSABLE = re.compile(r"^[\w.-]+/delivery/(\.github/workflows/[\w.-]+\.ya?ml)@[\w.-]+$")
_LOCAL = re.compile(r"^\./\.github/workflows/([\w.-]+\.ya?ml)$")
MATRIX_LIMIT = 256  # GitHub's limit on the jobs of one matrix
PULL_REQUEST_DEFAULT_TYPES = ("opened", "synchronize", "reopened")


class GraphError(ValueError):
    """A workflow's job graph GitHub would refuse (the world's files are wrong)."""


def needed(definition: Mapping[str, Any]) -> list[str]:
    needs = definition.get("needs") or []
    return [needs] if isinstance(needs, str) else [str(need) for need in needs]


def local_workflow(uses: str) -> str | None:
    """The file name of the repository's own reusable workflow `uses` names, or None."""
    match = _LOCAL.match(uses)
    return match.group(1) if match else None


def job_outputs(definition: Mapping[str, Any], contexts: Mapping[str, Any]
                ) -> dict[str, str]:
    """A job's `outputs:`, read from its steps' outputs once it has ended."""
    declared = definition.get("outputs") or {}
    return {name: substitute(str(value), contexts) for name, value in declared.items()}


def matrix_combinations(definition: Mapping[str, Any], contexts: Mapping[str, Any]
                        ) -> list[dict[str, Any]] | None:
    """One `matrix` context per job of the job's matrix; None without a matrix."""
    matrix = (definition.get("strategy") or {}).get("matrix")
    if not isinstance(matrix, dict) or not matrix:
        return None
    axes: dict[str, list[Any]] = {}
    for key, value in matrix.items():
        values = json.loads(substitute(value, contexts)) if isinstance(value, str) else value
        if not isinstance(values, list):
            raise GraphError(f"matrix {key!r} is not a list: {values!r}")
        axes[str(key)] = values
    combinations = [dict(zip(axes, combo, strict=True))
                    for combo in itertools.product(*axes.values())]
    if len(combinations) > MATRIX_LIMIT:
        raise GraphError(f"a matrix of {len(combinations)} jobs: GitHub runs at most 256")
    return combinations


def needs_status(needs: Mapping[str, Any]) -> str:
    """`success` when every job a job needs succeeded, else `failure` (what the status
    functions of its `if:` see)."""
    return "success" if all(need.get("result") == "success" for need in needs.values()) \
        else "failure"


def _result(jobs: list[Any]) -> str:
    """A job's `result` (of every leg of its matrix): success, failure or skipped."""
    if all(job.state == "skipped" for job in jobs):
        return "skipped"
    return "success" if all(job.state in ("completed", "skipped") for job in jobs) \
        else "failure"


def _outputs(job: Any) -> dict[str, str]:
    return dict(job.outputs) if job.call else job_outputs(job.definition, job.contexts)


def need_context(jobs: list[Any]) -> dict[str, Any]:
    """`needs.<id>` of a job that ended (all the legs of a matrix: their outputs merged in
    the order they ended — the last writer wins, as on GitHub)."""
    outputs: dict[str, str] = {}
    for job in sorted(jobs, key=lambda job: job.ended):
        outputs.update({key: value for key, value in _outputs(job).items() if value})
    return {"result": _result(jobs), "outputs": outputs}


def call_result(called: Mapping[str, Any], jobs: Mapping[str, list[Any]]
                ) -> tuple[str, dict[str, str]]:
    """How a call of a reusable workflow ended — its state, and its `workflow_call`
    outputs read from its jobs' (`jobs.<id>.outputs.<name>`)."""
    contexts = {"jobs": {job_id: need_context(found) for job_id, found in jobs.items()}}
    declared = (triggers(called).get("workflow_call") or {}).get("outputs") or {}
    outputs = {str(name): substitute(str((spec or {}).get("value", "")), contexts)
               for name, spec in declared.items()}
    results = {_result(found) for found in jobs.values()}
    state = "failed" if "failure" in results else "skipped" if results == {"skipped"} \
        else "completed"
    return state, outputs


def triggers(workflow: Mapping[Any, Any]) -> dict[str, Any]:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {str(name): None for name in on}
    return dict(on or {})


def triggered(workflow: Mapping[str, Any], event: str, payload: Mapping[str, Any]) -> bool:
    """Whether `event` (with its payload) starts `workflow`: its `on:` types and, for
    workflow_run, the workflows named."""
    on = triggers(workflow)
    if event not in on:
        return False
    config = on[event] if isinstance(on[event], dict) else {}
    types = config.get("types") or (PULL_REQUEST_DEFAULT_TYPES if event == "pull_request"
                                    else None)
    if types and payload.get("action") not in types:
        return False
    if event == "workflow_run":
        run = payload.get("workflow_run") or {}
        return str(run.get("name")) in [str(name) for name in config.get("workflows") or []]
    return True

def call_inputs(called: Mapping[str, Any], given: Mapping[str, Any],
                 contexts: Mapping[str, Any]) -> dict[str, Any]:
    declared = (triggers(called).get("workflow_call") or {}).get("inputs") or {}
    unknown = set(given) - set(declared)
    if unknown:
        raise GraphError(f"inputs {sorted(unknown)} are not declared by the reusable workflow")
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        if name in given:
            values[name] = substitute(str(given[name]), contexts)
        elif spec.get("required"):
            raise GraphError(f"the reusable workflow's input {name!r} is required")
        else:
            values[name] = spec.get("default", "")
    return values


def read_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's `name=value` and `name<<DELIMITER … DELIMITER` entries."""
    outputs: dict[str, str] = {}
    if not path.exists():
        return outputs
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value = []
            for more in lines:
                if more == delimiter:
                    break
                value.append(more)
            outputs[name] = "\n".join(value)
        elif "=" in line:
            name, text = line.split("=", 1)
            outputs[name] = text
    return outputs


def is_ci(workflow: Mapping[str, Any]) -> bool:
    """A workflow that runs neither this repository's action nor its reusable workflow: CI,
    whose outcome the fake's CheckRules decide."""
    for definition in (workflow.get("jobs") or {}).values():
        uses = str(definition.get("uses") or "")
        if REUSABLE.match(uses) or local_workflow(uses):
            return False
        if any(ACTION.match(str(step.get("uses") or ""))
               for step in definition.get("steps") or []):
            return False
    return True
