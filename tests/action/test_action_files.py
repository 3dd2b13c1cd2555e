"""action.yml and the example workflow in docs/github-action.md checked against the shape
GitHub reads (actionlint cannot be installed here: its PyPI package downloads the binary at
build time): keys, step kinds, and every `${{ }}` reference resolving to something declared."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from action_helpers import ROOT, action, zizmor_findings

from delivery.action.main import INPUTS

DOC = ROOT / "docs" / "github-action.md"
CONTROL = ROOT / "docs" / "workflows" / "delivery.yml"
WORKER = ROOT / "docs" / "workflows" / "delivery-work.yml"
CALLER = ROOT / "docs" / "workflows" / "delivery-relay.yml"
REUSABLE = ROOT / ".github" / "workflows" / "delivery-relay.yml"
PERMISSION_SCOPES = {"actions", "attestations", "checks", "contents", "deployments",
                     "discussions", "id-token", "issues", "packages", "pages",
                     "pull-requests", "repository-projects", "security-events", "statuses"}
CONTROL_TRIGGERS = {"workflow_dispatch", "issues", "schedule"}
RELAY_TRIGGERS = {"workflow_run", "pull_request_review", "pull_request_review_comment",
                  "issue_comment", "pull_request", "status"}
PINNED = re.compile(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}")
LOCAL_WORKFLOW = re.compile(r"\./\.github/workflows/[\w.-]+\.yml")  # this commit's own


def load(path: Path) -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded


def triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    found: dict[str, Any] = workflow.get("on", workflow.get(True))  # YAML 1.1: `on` is true
    return found


def example_workflow() -> dict[Any, Any]:
    return load(CONTROL)


def test_action_yml_is_a_composite_action_with_described_inputs_and_outputs() -> None:
    spec = action()
    assert spec["name"] and spec["description"]
    assert spec["runs"]["using"] == "composite"
    for name, entry in spec["inputs"].items():
        assert re.fullmatch(r"[a-z][a-z0-9-]*", name)
        assert entry.get("description"), name
        assert set(entry) <= {"description", "required", "default", "deprecationMessage"}
    assert spec["inputs"]["github-token"]["required"] is True
    step_ids = {step.get("id") for step in spec["runs"]["steps"]}
    for name, entry in spec["outputs"].items():
        assert entry.get("description")
        ref = re.fullmatch(r"\$\{\{ steps\.([a-z-]+)\.outputs\.([a-z-]+) \}\}", entry["value"])
        assert ref and ref.group(1) in step_ids, name
    assert {"status", "pr-state", "run-id"} <= set(spec["outputs"])


def test_every_step_is_a_uses_or_a_run_with_a_shell() -> None:
    for step in action()["runs"]["steps"]:
        assert ("uses" in step) != ("run" in step), step
        if "run" in step:
            assert step.get("shell") == "bash", step
        else:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step


def test_every_input_reference_is_declared_and_every_input_reaches_the_entry_point() -> None:
    spec = action()
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    used = set(re.findall(r"\$\{\{\s*inputs\.([a-z0-9-]+)\s*\}\}", text))
    assert used == set(spec["inputs"])
    assert set(INPUTS) == set(spec["inputs"])  # what delivery.action reads, all declared
    env = next(step for step in spec["runs"]["steps"] if step.get("id") == "deliver")["env"]
    for name in spec["inputs"]:
        variable = "INPUT_" + name.upper().replace("-", "_")
        assert env[variable] == f"${{{{ inputs.{name} }}}}"


def test_the_doc_quotes_every_file_a_user_copies_exactly() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    for path in (CONTROL, WORKER, CALLER, REUSABLE):
        assert path.read_text(encoding="utf-8") in blocks, path


def test_the_control_workflow_starts_on_a_label_or_a_dispatch_with_the_schedule_as_net(
        ) -> None:
    workflow = example_workflow()
    on = triggers(workflow)
    assert set(on) == CONTROL_TRIGGERS
    assert on["issues"]["types"] == ["labeled"]
    assert all("cron" in entry for entry in on["schedule"])
    assert workflow["permissions"] == {}
    job = workflow["jobs"]["deliver"]
    assert set(job["permissions"]) <= PERMISSION_SCOPES and job["permissions"] == {
        "contents": "read"}
    assert "group" in job["concurrency"] and job["concurrency"]["cancel-in-progress"] is False


def test_the_relay_caller_forwards_every_pr_event_to_the_reusable_relay() -> None:
    caller = load(CALLER)
    on = triggers(caller)
    assert set(on) == RELAY_TRIGGERS
    assert on["workflow_run"]["types"] == ["completed"]
    assert on["pull_request"]["types"] == ["closed", "labeled", "unlabeled"]
    assert caller["permissions"] == {}
    [job] = caller["jobs"].values()
    assert PINNED.fullmatch(job["uses"]) and "/.github/workflows/delivery-relay.yml@" in \
        job["uses"]
    called = triggers(load(REUSABLE))["workflow_call"]
    assert set(job["with"]) <= set(called["inputs"])
    assert {n for n, spec in called["inputs"].items() if spec.get("required")} <= set(
        job["with"])
    assert set(job["secrets"]) <= set(called["secrets"])
    assert len(CALLER.read_text(encoding="utf-8").split("\n")) < 40  # a short file to copy


def test_every_uses_is_pinned_by_sha_and_every_suppression_says_why() -> None:
    for path in (ROOT / "action.yml", CONTROL, WORKER, CALLER, REUSABLE):
        text = path.read_text(encoding="utf-8")
        for uses in re.findall(r"^\s*(?:- )?uses:\s*(\S+)", text, re.MULTILINE):
            assert PINNED.fullmatch(uses) or LOCAL_WORKFLOW.fullmatch(uses), (path, uses)
        for line in text.splitlines():
            if "zizmor: ignore" in line:
                reason = line.split("zizmor: ignore", 1)[1].partition("]")[2]
                assert reason.strip(" -") and len(reason) > 20, (path, line)


def app_tokens() -> list[dict[str, Any]]:
    steps = [step for workflow in (example_workflow(), load(WORKER), load(REUSABLE))
             for job in workflow["jobs"].values() for step in job.get("steps") or []]
    return [s for s in steps if s.get("uses", "").startswith(
        "actions/create-github-app-token@")]


def test_the_app_token_is_scoped_to_the_deliverys_repositories_and_needs() -> None:
    tokens = app_tokens()
    scoped = [token for token in tokens if token["with"].get("permission-contents") ==
              "write"]
    assert len(scoped) == 4  # the control job, a worker, the relay's resume and its worker
    for token in scoped:
        given = token["with"]
        # the names come from .github/delivery-repos: one line there adds a repository
        assert given["repositories"] == "${{ steps.repos.outputs.names }}" and given["owner"]
        granted = {key.removeprefix("permission-"): value for key, value in given.items()
                   if key.startswith("permission-")}
        # statuses: write — a run sets its PRs' `delivery/change-set` commit status (SPEC
        # §7.1); GitHub refuses that POST to a token that may only read statuses
        assert granted == {"contents": "write", "pull-requests": "write",
                           "issues": "write", "checks": "read", "statuses": "write",
                           "actions": "read"}  # a claim's Actions run: has it ended?
    for token in tokens:  # the relay's first token only reads the control repository,
        if token not in scoped:  # the worker's join reads its state refs and claims' runs
            assert {k: v for k, v in token["with"].items() if k.startswith("permission-")
                    } in ({"permission-contents": "read"},
                          {"permission-contents": "read", "permission-actions": "read"})


def test_the_examples_use_an_agent_that_edits_files_installed_by_the_action_once(
        ) -> None:
    steps = example_workflow()["jobs"]["deliver"]["steps"]
    deliver = next(s for s in steps if s.get("id") == "delivery")
    assert deliver["with"]["agent"] == "claude"
    for path in (CONTROL, WORKER, CALLER, REUSABLE):
        # the action installs the agent's CLI (action.yml); a step doing it too would
        # install it twice in one job
        assert "npm install" not in path.read_text(encoding="utf-8"), path
    install = next(step for step in action()["runs"]["steps"]
                   if step.get("name") == "Install the agent CLI")
    assert "npm ls --global" in install["run"]  # installed already in this job: kept


def test_the_control_workflow_fans_out_to_the_worker_matrix_once_its_job_has_ended(
        ) -> None:
    jobs = example_workflow()["jobs"]
    assert jobs["deliver"]["outputs"]["chunks"] == "${{ steps.delivery.outputs.chunks }}"
    assert jobs["work"]["needs"] == "deliver"
    assert jobs["work"]["uses"] == "./.github/workflows/delivery-work.yml"
    assert jobs["work"]["with"]["chunks"] == "${{ needs.deliver.outputs.chunks }}"
    worker = load(WORKER)
    chunk, join = worker["jobs"]["chunk"], worker["jobs"]["join"]
    assert chunk["strategy"]["matrix"]["chunk"] == "${{ fromJSON(inputs.chunks) }}"
    assert chunk["strategy"]["fail-fast"] is False
    run = next(s for s in chunk["steps"] if s.get("id") == "delivery")["with"]
    assert run["mode"] == "work" and run["chunk"] == "${{ matrix.chunk }}"
    # the next round's chunks come from the join, which runs after every leg, failed or not
    assert join["needs"] == "chunk" and join["if"] == "${{ !cancelled() }}"
    assert next(s for s in join["steps"] if s.get("id") == "delivery")["with"]["mode"] == \
        "join"
    assert triggers(worker)["workflow_call"]["outputs"]["chunks"]["value"] == \
        "${{ jobs.join.outputs.chunks }}"


def test_the_control_workflow_runs_a_fan_out_reached_by_a_worker_in_the_next_round(
        ) -> None:
    jobs = example_workflow()["jobs"]
    rounds = ["work", "work-2", "work-3", "work-4"]
    assert [name for name in jobs if name.startswith("work")] == rounds
    for before, after in itertools.pairwise(rounds):
        job = jobs[after]
        assert job["needs"] == ["deliver", before]
        assert job["uses"] == "./.github/workflows/delivery-work.yml"
        assert job["with"] == {"run-id": "${{ needs.deliver.outputs.run-id }}",
                               "chunks": f"${{{{ needs.{before}.outputs.chunks }}}}"}
        # a round runs after a round with a failed leg too (its other chunks were saved)
        assert job["if"].startswith("${{ !cancelled() && ")
    relay = load(REUSABLE)["jobs"]
    assert relay["work"]["needs"] == "resume"
    assert relay["work"]["strategy"]["matrix"]["chunk"] == \
        "${{ fromJSON(needs.resume.outputs.chunks) }}"


@pytest.mark.parametrize("path", [ROOT / "action.yml", CONTROL, WORKER, CALLER, REUSABLE],
                         ids=lambda path: path.name)
def test_zizmor_finds_nothing_of_medium_or_high_severity(path: Path) -> None:
    assert zizmor_findings(path) == []
