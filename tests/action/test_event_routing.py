"""Every event a relay forwards resumes the run of its PR; the bot's own events are ignored;
a payload that is not of GitHub's shape is a one-line refusal, never a traceback (SPEC §13,
§14)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.action.events import RELAYED, plan
from delivery.action.main import main, parse_inputs
from delivery.errors import MalformedEvent, RunRefused

HERE = "octo/web"
BOT = {"login": "delivery[bot]", "type": "Bot"}
ADA = {"login": "ada", "type": "User"}


def decide(event: str, payload: dict[str, Any]) -> Any:
    return plan(event, payload, mode="auto", trigger_label="delivery",
                bot_login="delivery[bot]", inputs={}, repository="octo/control",
                actor="ada")


def relayed(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "repository": {"full_name": HERE}}


def test_a_completed_workflow_run_resumes_the_runs_of_its_prs_in_its_own_repository() -> None:
    payload = relayed({"action": "completed", "sender": BOT, "workflow_run": {
        "name": "ci", "conclusion": "failure", "head_branch": "delivery/t-1",
        "pull_requests": [{"number": 4, "base": {"repo": {"name": "web"}}}]}})
    decided = decide("workflow_run", payload)
    assert decided.kind == "resume" and decided.prs == [f"{HERE}#4"]
    assert "failure" in decided.reason


def test_a_workflow_run_that_has_not_completed_or_has_no_pr_resumes_nothing() -> None:
    requested = relayed({"action": "requested", "workflow_run": {"pull_requests": [
        {"number": 4}]}})
    assert decide("workflow_run", requested).kind == "ignore"
    lonely = relayed({"action": "completed", "workflow_run": {"pull_requests": []}})
    assert decide("workflow_run", lonely).kind == "ignore"


@pytest.mark.parametrize("action", ["closed", "labeled", "unlabeled"])
def test_a_closed_or_labeled_pull_request_resumes_its_run(action: str) -> None:
    # unlabeled: a person took delivery:stop off, so the paused run goes on
    payload = relayed({"action": action, "sender": ADA, "pull_request": {"number": 7}})
    decided = decide("pull_request", payload)
    assert decided.kind == "resume" and decided.prs == [f"{HERE}#7"]


def test_an_opened_or_synchronized_pull_request_waits_for_its_ci() -> None:
    payload = relayed({"action": "synchronize", "sender": ADA, "pull_request": {"number": 7}})
    assert decide("pull_request", payload).kind == "ignore"


def test_a_review_comment_resumes_the_run_of_its_pr() -> None:
    payload = relayed({"action": "created", "sender": ADA, "pull_request": {"number": 2},
                       "comment": {"body": "rename it", "user": ADA}})
    decided = decide("pull_request_review_comment", payload)
    assert decided.kind == "resume" and decided.prs == [f"{HERE}#2"]


def test_a_finished_commit_status_resumes_the_runs_of_its_branches() -> None:
    payload = relayed({"state": "failure", "context": "jenkins", "sha": "abc",
                       "branches": [{"name": "delivery/t-1"}], "sender": BOT})
    decided = decide("status", payload)
    assert decided.kind == "resume" and decided.heads == [f"{HERE}:delivery/t-1"]
    pending = {**payload, "state": "pending"}
    assert decide("status", pending).kind == "ignore"


@pytest.mark.parametrize(("event", "payload"), [
    ("pull_request", {"action": "labeled", "pull_request": {"number": 7}}),
    ("pull_request_review", {"action": "submitted", "pull_request": {"number": 7},
                             "review": {"body": "ok", "user": ADA}}),
    ("pull_request_review_comment", {"action": "created", "pull_request": {"number": 7},
                                     "comment": {"body": "x", "user": ADA}}),
    ("issue_comment", {"action": "created", "issue": {"number": 7, "pull_request": {}},
                       "comment": {"body": "x", "user": ADA}}),
])
def test_events_the_bot_caused_itself_resume_nothing(event: str,
                                                     payload: dict[str, Any]) -> None:
    decided = decide(event, relayed({**payload, "sender": BOT}))
    assert decided.kind == "ignore" and "bot" in decided.reason


@pytest.mark.parametrize(("event", "payload", "field"), [
    ("check_suite", {"check_suite": {"pull_requests": 5}}, "check_suite.pull_requests"),
    ("workflow_run", {"action": "completed", "workflow_run": {"pull_requests": [
        {"number": "four"}]}}, "workflow_run.pull_requests.0.number"),
    ("pull_request", {"action": "closed", "pull_request": {"number": True}},
     "pull_request.number"),
    ("issues", {"action": "labeled", "label": ["delivery"]}, "label"),
    ("status", {"state": "success", "branches": "main"}, "branches"),
    ("issue_comment", {"sender": "ada"}, "sender"),
])
def test_a_payload_field_of_the_wrong_type_is_refused_naming_the_field(
        event: str, payload: dict[str, Any], field: str) -> None:
    with pytest.raises(MalformedEvent) as refused:
        decide(event, payload)
    message = str(refused.value)
    assert field in message and "\n" not in message


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["action", "number", "pull_requests", "pull_request", "issue",
                         "comment", "review", "sender", "user", "login", "type", "body",
                         "label", "name", "workflow_run", "check_suite", "branches",
                         "state", "base", "repo", "full_name", "repository", "inputs"]),
        inner, max_size=5),
    max_leaves=25)
EVENTS = st.sampled_from([*RELAYED, "issues", "workflow_dispatch", "schedule", "push"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event=EVENTS, payload=st.dictionaries(st.sampled_from(
    ["action", "pull_request", "issue", "comment", "review", "sender", "label",
     "workflow_run", "check_suite", "branches", "state", "repository", "inputs"]), JSON,
    max_size=6))
def test_any_payload_is_planned_or_refused_in_one_line(event: str,
                                                       payload: dict[str, Any]) -> None:
    try:
        decided = decide(event, payload)
    except MalformedEvent as refused:
        assert "\n" not in str(refused) and " — " in str(refused)
        return
    assert decided.kind in ("start", "resume", "resume_all", "ignore")
    assert all("#" in pr for pr in decided.prs)


def run_action(tmp_path: Path, event: str, text: str) -> tuple[int, str]:
    payload = tmp_path / "event.json"
    payload.write_text(text, encoding="utf-8")
    out = tmp_path / "stdout"
    env = {"GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(payload),
           "GITHUB_REPOSITORY": "octo/control", "GITHUB_OUTPUT": str(tmp_path / "output"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "INPUT_GITHUB_TOKEN": "t0k3n-x",
           "RUNNER_TEMP": str(tmp_path / "tmp")}
    with out.open("w", encoding="utf-8") as stream:
        code = main(env, stream)
    return code, out.read_text(encoding="utf-8")


@pytest.mark.parametrize(("text", "problem"), [
    ("[" * 100_000 + "]" * 100_000, "nests arrays or objects too deeply"),
    ('{"pull_request": ' * 50_000 + "1" + "}" * 50_000, "nests arrays or objects too deeply"),
    ('{"check_suite": {"pull_requests": 5}}', "check_suite.pull_requests"),
    ("[1, 2]", "holds a list, not an object"),
])
def test_the_action_refuses_a_malformed_payload_in_one_line(tmp_path: Path, text: str,
                                                            problem: str) -> None:
    event = "check_suite" if "check_suite" in text else "pull_request"
    code, stdout = run_action(tmp_path, event, text)
    assert code == 2
    errors = [line for line in stdout.splitlines() if line.startswith("::error::")]
    assert len(errors) == 1 and problem in errors[0]
    assert "Traceback" not in stdout


def test_inputs_are_one_name_value_per_line_and_a_bad_line_is_refused() -> None:
    assert parse_inputs("check_command=make test A=1\n\n# note\nmax_repairs = 3\n") == {
        "check_command": "make test A=1", "max_repairs": "3"}
    with pytest.raises(RunRefused, match="NAME=VALUE"):
        parse_inputs("just words")



def test_the_default_workflow_is_the_bundled_deliver_dot() -> None:
    from delivery.action.main import bundled_workflow

    assert bundled_workflow().name == "deliver.dot" and bundled_workflow().is_file()


def test_a_status_events_branches_are_mapped_to_their_open_pull_requests() -> None:
    from delivery.action.main import _open_prs_of_heads
    from delivery.testing.github import FakeGitHub

    with FakeGitHub() as github:
        github.create_repo(HERE, files={"README.md": "# web\n"})
        github.push_files(HERE, "delivery/t-1", {"a.txt": "a\n"})
        github.push_files(HERE, "other", {"b.txt": "b\n"})
        number = github.open_pull(HERE, "delivery/t-1")
        github.open_pull(HERE, "other")
        found = _open_prs_of_heads(github.env(), [f"{HERE}:delivery/t-1"])
    assert found == [f"{HERE}#{number}"]
