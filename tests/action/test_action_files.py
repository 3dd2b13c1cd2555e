"""action.yml and the example workflow in docs/github-action.md checked against the shape
GitHub reads (actionlint cannot be installed here: its PyPI package downloads the binary at
build time): keys, step kinds, and every `${{ }}` reference resolving to something declared."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from action_helpers import ROOT, action

from delivery.action.main import INPUTS

DOC = ROOT / "docs" / "github-action.md"
CONTROL = ROOT / "docs" / "workflows" / "delivery.yml"
CALLER = ROOT / "docs" / "workflows" / "delivery-relay.yml"
REUSABLE = ROOT / ".github" / "workflows" / "delivery-relay.yml"
PERMISSION_SCOPES = {"actions", "attestations", "checks", "contents", "deployments",
                     "discussions", "id-token", "issues", "packages", "pages",
                     "pull-requests", "repository-projects", "security-events", "statuses"}
CONTROL_TRIGGERS = {"workflow_dispatch", "issues", "schedule"}
RELAY_TRIGGERS = {"workflow_run", "pull_request_review", "pull_request_review_comment",
                  "issue_comment", "pull_request", "status"}
PINNED = re.compile(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}")


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
    for path in (CONTROL, CALLER, REUSABLE):
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
    for path in (ROOT / "action.yml", CONTROL, CALLER, REUSABLE):
        text = path.read_text(encoding="utf-8")
        for uses in re.findall(r"^\s*(?:- )?uses:\s*(\S+)", text, re.MULTILINE):
            assert PINNED.fullmatch(uses), (path, uses)
        for line in text.splitlines():
            if "zizmor: ignore" in line:
                reason = line.split("zizmor: ignore", 1)[1].partition("]")[2]
                assert reason.strip(" -") and len(reason) > 20, (path, line)


def test_the_app_token_is_scoped_to_the_deliverys_repositories_and_needs() -> None:
    steps = [*example_workflow()["jobs"]["deliver"]["steps"],
             *load(REUSABLE)["jobs"]["resume"]["steps"]]
    tokens = [s for s in steps if s.get("uses", "").startswith(
        "actions/create-github-app-token@")]
    assert len(tokens) == 2
    for token in tokens:
        given = token["with"]
        assert given["repositories"] and given["owner"]
        granted = {key.removeprefix("permission-"): value for key, value in given.items()
                   if key.startswith("permission-")}
        assert granted == {"contents": "write", "pull-requests": "write",
                           "issues": "write", "checks": "read", "statuses": "read",
                           "actions": "read"}  # a claim's Actions run: has it ended?


def test_the_examples_use_an_agent_that_edits_files_and_install_its_cli() -> None:
    steps = example_workflow()["jobs"]["deliver"]["steps"]
    deliver = next(s for s in steps if s.get("id") == "delivery")
    assert deliver["with"]["agent"] == "claude"
    assert any("@anthropic-ai/claude-code" in str(s.get("run", "")) for s in steps)
    assert "check_command=" in deliver["with"]["inputs"]
    relay = load(REUSABLE)
    assert "@anthropic-ai/claude-code" in str(triggers(relay)["workflow_call"]["inputs"])


def test_the_example_job_mints_an_app_token_and_passes_only_declared_inputs() -> None:
    job = example_workflow()["jobs"]["deliver"]
    assert job["runs-on"]
    steps = job["steps"]
    ids = {step.get("id") for step in steps}
    token_step = next(s for s in steps if s.get("uses", "").startswith(
        "actions/create-github-app-token@"))
    assert {"app-id", "private-key"} <= set(token_step["with"])
    delivery = next(s for s in steps if s.get("id") == "delivery")
    declared = action()["inputs"]
    assert set(delivery["with"]) <= set(declared)
    assert delivery["with"]["github-token"] == "${{ steps.app-token.outputs.token }}"
    outputs = set(action()["outputs"])
    text = yaml.safe_dump(example_workflow())
    for step_id, output in re.findall(r"steps\.([a-z-]+)\.outputs\.([a-z-]+)", text):
        assert step_id in ids
        if step_id == "delivery":
            assert output in outputs, output
