"""action.yml and the example workflow in docs/github-action.md checked against the shape
GitHub reads (actionlint cannot be installed here: its PyPI package downloads the binary at
build time): keys, step kinds, and every `${{ }}` reference resolving to something declared."""

from __future__ import annotations

import re
from typing import Any

import yaml
from action_helpers import ROOT, action

from delivery.action.main import INPUTS

DOC = ROOT / "docs" / "github-action.md"
PERMISSION_SCOPES = {"actions", "attestations", "checks", "contents", "deployments",
                     "discussions", "id-token", "issues", "packages", "pages",
                     "pull-requests", "repository-projects", "security-events", "statuses"}
TRIGGERS = {"workflow_dispatch", "issues", "check_suite", "pull_request_review",
            "issue_comment", "schedule"}


def example_workflow() -> dict[Any, Any]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", text, re.DOTALL)
    assert block, "docs/github-action.md has no yaml block"
    loaded: dict[Any, Any] = yaml.safe_load(block.group(1))
    return loaded


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


def test_the_example_workflow_has_the_triggers_permissions_and_concurrency() -> None:
    workflow = example_workflow()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads `on` as true
    assert set(triggers) >= TRIGGERS
    assert triggers["issues"]["types"] == ["labeled"]
    assert triggers["check_suite"]["types"] == ["completed"]
    assert all("cron" in entry for entry in triggers["schedule"])
    permissions = workflow["permissions"]
    assert set(permissions) <= PERMISSION_SCOPES
    assert set(permissions.values()) <= {"read", "write", "none"}
    assert permissions["contents"] == "write" and permissions["pull-requests"] == "write"
    assert "group" in workflow["concurrency"]


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
