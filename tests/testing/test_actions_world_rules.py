"""The simulated Actions world applies GitHub's delivery rules: an event reaches only the
workflows of its own repository, a job whose `if:` is false is never queued, a newer pending
job of a concurrency group replaces the older one, what the default token changes raises no
event, and expressions evaluate as GitHub's do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from actions_world_helpers import (
    API,
    CI_WORKFLOW,
    CONTROL,
    ROOT,
    SECRETS,
    VARIABLES,
    WEB,
    build_world,
    doc_workflow,
)

from delivery.testing.actions import ActionsWorld
from delivery.testing.actions.expressions import (
    ExpressionError,
    evaluate,
    evaluate_if,
    substitute,
)
from delivery.testing.github import FakeGitHub
from delivery.testing.two_repos import ci_rule

BOT = {"login": "delivery[bot]", "type": "Bot"}
ADA = {"login": "ada", "type": "User"}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[ActionsWorld]:
    with FakeGitHub() as github:
        yield build_world(github, tmp_path)


def pr_event(world: ActionsWorld, repository: str, action: str,
             sender: dict[str, str]) -> None:
    world.github.push_files(repository, "delivery/t-1", {"x.txt": "x\n"})
    number = world.github.open_pull(repository, "delivery/t-1")
    world.emit(repository, "pull_request", {
        "action": action, "sender": sender,
        "pull_request": {"number": number, "head": {"ref": "delivery/t-1"}}})


def test_an_event_reaches_only_the_workflows_of_its_own_repository(
        world: ActionsWorld) -> None:
    pr_event(world, API, "labeled", ADA)
    assert [(job.repository, job.job) for job in world.queue] == [(API, "relay / resume")]
    world.emit(WEB, "issues", {"action": "labeled", "label": {"name": "delivery"},
                               "issue": {"number": 1}, "sender": ADA})
    assert len(world.queue) == 1  # the relay does not listen to issues; control never hears


def test_a_job_whose_if_is_false_is_skipped_and_never_queued(world: ActionsWorld) -> None:
    pr_event(world, API, "closed", BOT)  # the bot's own merge
    assert world.queue == []
    # the relay's jobs: `resume` skipped, and `work`, which needs it, skipped with it
    assert [(job.job, job.state) for job in world.jobs if not job.call] == [
        ("relay / resume", "skipped"), ("relay / work", "skipped")]


def test_a_newer_pending_job_of_a_group_cancels_the_older_one(world: ActionsWorld) -> None:
    pr_event(world, API, "labeled", ADA)
    world.emit(API, "pull_request_review", {
        "action": "submitted", "review": {"body": "ok", "user": ADA}, "sender": ADA,
        "pull_request": {"number": 1, "head": {"ref": "delivery/t-1"}}})
    first, second = [job for job in world.jobs if not job.call]
    assert first.group == second.group == "delivery-octo/api-delivery/t-1"
    assert first.state == "cancelled" and world.queue == [second]


def test_the_schedule_fires_only_on_a_tick_and_only_where_a_workflow_has_one(
        world: ActionsWorld) -> None:
    assert world.queue == []
    world.tick()
    assert [(job.repository, job.event) for job in world.queue] == [(CONTROL, "schedule")]


# one folder, one PR, no agent: what matters is who pushed it
FLOW = """
digraph D {
  graph [goal="Deliver", inputs="ticket,notes?,check_command?",
         defaults="notes='',check_command=''", folders="api"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="printf 'hello\\n' > api/hello.txt"]
  ship [type=publish]
  start -> add -> change -> ship -> exit
}
"""


def test_what_the_default_token_changes_starts_no_workflow(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        world = ActionsWorld(github, tmp_path, action_root=ROOT, secrets=SECRETS,
                             variables=VARIABLES)
        control = doc_workflow("delivery.yml").replace(
            "${{ steps.app-token.outputs.token }}", "${{ github.token }}").replace(
            "agent: claude", "workflow: flow.dot")
        world.add_repository(CONTROL, workflows={"delivery.yml": control},
                             files={"flow.dot": FLOW, ".github/delivery-repos":
                                    f"api={API}\nweb={WEB}\n"},
                             collaborators={"alice": "write"})
        for repository in (API, WEB):
            world.add_repository(repository, workflows={
                "ci.yml": CI_WORKFLOW, "delivery.yml": doc_workflow("delivery-relay.yml")},
                files={"README.md": "# target\n"}, check_rules=(ci_rule(),))
        world.label_issue(CONTROL, 1, title="Say hello")
        ran = world.settle()
        assert [job.token for job in ran] == ["default"]
        assert ran[0].outputs["status"] == "succeeded", ran[0].stdout + ran[0].stderr
        assert github.repository(API).pulls  # the PR was opened...
        # ...and neither CI nor a relay ever started (the fan-out rounds were skipped)
        assert [job.job for job in world.jobs if job.state != "skipped"] == ["deliver"]


@pytest.mark.parametrize(("expression", "value"), [
    ("github.event.issue.number || github.run_id", 7),
    ("github.event.pull_request.number || 'none'", "none"),
    ("github.event.label.name == 'DELIVERY'", True),  # strings compare without case
    ("!endsWith(github.event.sender.login, '[bot]') && github.event.sender.type != 'Bot'",
     False),
    ("github.event['label'].name", "delivery"),
    ("contains(fromJSON('[\"a\", \"b\"]'), 'b')", True),
    ("format('{0}-{1}', 'a', 2)", "a-2"),
])
def test_expressions_evaluate_as_githubs(expression: str, value: object) -> None:
    contexts = {"github": {"run_id": "99", "event": {
        "issue": {"number": 7}, "label": {"name": "delivery"}, "sender": BOT}}}
    assert evaluate(expression, contexts) == value


def test_templates_substitute_and_conditions_default_to_true() -> None:
    contexts = {"inputs": {"name": "api"}, "vars": {}}
    assert substitute("at ${{ inputs.name }}/${{ vars.MISSING }}.", contexts) == "at api/."
    assert evaluate_if(None, contexts) and not evaluate_if("${{ vars.MISSING }}", contexts)
    with pytest.raises(ExpressionError, match="ends too early"):
        evaluate("contains(inputs.name", contexts)
