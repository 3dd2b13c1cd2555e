"""What an Actions event asks of delivery (`mode: auto`), decided from the payload alone.

    issues labeled (the trigger label), workflow_dispatch  -> start a run
    check_suite, pull_request_review, issue_comment on a PR -> resume the PR's run
    issue_comment `/delivery answer <gate> <label>`          -> resume with that answer
    schedule                                                 -> resume every paused run

Whether the person behind a start or an answer may steer runs (write permission) is
checked through the API afterwards (`main`); events caused by the bot itself are ignored
here (SPEC §14).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from delivery.hidden_text import strip_hidden

ANSWER = re.compile(r"^/delivery\s+answer\s+(\S+)\s+(.+?)\s*$", re.MULTILINE)


@dataclass
class Plan:
    kind: str  # "start" | "resume" | "resume_all" | "ignore"
    reason: str = ""
    # start
    ticket: str = ""
    goal: str = ""
    notes: str = ""
    # resume: by run id, or by the PRs that carry its marker
    run_id: str = ""
    prs: list[str] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    # who caused it: checked for write permission when the event starts or steers a run
    actor: str = ""
    needs_permission: bool = False


def is_bot(user: Mapping[str, Any] | None, bot_login: str) -> bool:
    if not user:
        return False
    login = str(user.get("login") or "")
    return login == bot_login or login.endswith("[bot]") or user.get("type") == "Bot"


def plan(event_name: str, payload: Mapping[str, Any], *, mode: str, trigger_label: str,
         bot_login: str, inputs: Mapping[str, str], repository: str,
         actor: str = "") -> Plan:
    """What to do for this event (`mode`: start, resume, auto)."""
    if mode == "start":
        return _start_from_inputs(payload, inputs, actor or _login(payload.get("sender")))
    if mode == "resume":
        run_id = inputs.get("run-id", "")
        if run_id:
            return Plan("resume", run_id=run_id)
        return Plan("resume_all", reason="mode resume without a run id: every paused run")
    sender = payload.get("sender") if isinstance(payload.get("sender"), Mapping) else None
    if event_name == "workflow_dispatch":
        return _start_from_inputs(payload, inputs, actor or _login(sender))
    if event_name == "issues":
        return _issue_labeled(payload, trigger_label, bot_login, repository)
    if event_name == "schedule":
        return Plan("resume_all", reason="schedule: the safety net resumes every paused run")
    if event_name == "check_suite":
        suite = _mapping(payload.get("check_suite"))
        prs = [f"{repository_of(payload, pr, repository)}#{pr.get('number')}"
               for pr in suite.get("pull_requests") or [] if isinstance(pr, Mapping)]
        if not prs:
            return Plan("ignore", reason="the check suite belongs to no pull request")
        return Plan("resume", prs=prs, reason="check suite completed")
    if event_name in ("pull_request_review", "pull_request_review_comment", "issue_comment"):
        return _comment_or_review(event_name, payload, bot_login, repository)
    return Plan("ignore", reason=f"the {event_name} event does not start or resume runs")


def _start_from_inputs(payload: Mapping[str, Any], inputs: Mapping[str, str],
                       actor: str) -> Plan:
    dispatched = _mapping(payload.get("inputs"))
    ticket = str(dispatched.get("ticket") or inputs.get("ticket") or "")
    goal = str(dispatched.get("goal") or inputs.get("goal") or "")
    if not ticket and not goal:
        return Plan("ignore", reason="nothing to start: give the ticket or goal input")
    return Plan("start", ticket=ticket, goal=strip_hidden(goal), actor=actor,
                needs_permission=True, reason="dispatched")


def _issue_labeled(payload: Mapping[str, Any], trigger_label: str, bot_login: str,
                   repository: str) -> Plan:
    if payload.get("action") != "labeled":
        return Plan("ignore", reason=f"issues.{payload.get('action')} does not start a run")
    label = str(_mapping(payload.get("label")).get("name") or "")
    if label != trigger_label:
        return Plan("ignore", reason=f"label {label!r} is not the trigger label "
                    f"{trigger_label!r}")
    sender = _mapping(payload.get("sender"))
    if is_bot(sender, bot_login):
        return Plan("ignore", reason="the label was added by a bot")
    issue = _mapping(payload.get("issue"))
    ticket = str(issue.get("html_url") or "")
    title = strip_hidden(str(issue.get("title") or "")).strip()
    body = strip_hidden(str(issue.get("body") or "")).strip()
    return Plan("start", ticket=ticket, goal=title or f"Deliver {ticket}", notes=body,
                actor=_login(sender), needs_permission=True,
                reason=f"issue labeled {label}")


def _comment_or_review(event_name: str, payload: Mapping[str, Any], bot_login: str,
                       repository: str) -> Plan:
    item = _mapping(payload.get("comment") if event_name != "pull_request_review"
                    else payload.get("review"))
    author = _mapping(item.get("user"))
    if is_bot(author, bot_login) or is_bot(_mapping(payload.get("sender")), bot_login):
        return Plan("ignore", reason="the bot ignores its own comments and reviews")
    if event_name == "issue_comment":
        issue = _mapping(payload.get("issue"))
        number = issue.get("number")
        on_pr = isinstance(issue.get("pull_request"), Mapping)
    else:
        pr = _mapping(payload.get("pull_request"))
        number, on_pr = pr.get("number"), True
    text = strip_hidden(str(item.get("body") or ""))
    answers = {gate: label for gate, label in ANSWER.findall(text)}
    target = f"{repository}#{number}"
    if answers:
        # an answer on the ticket or on one of the run's PRs; the run is found by the PR's
        # marker, or (on the ticket) among the paused runs of that ticket
        return Plan("resume", prs=[target] if on_pr else [], answers=answers,
                    actor=_login(author), needs_permission=True,
                    ticket=str(_mapping(payload.get("issue")).get("html_url") or ""),
                    reason=f"/delivery answer from {_login(author)}")
    if not on_pr:
        return Plan("ignore", reason="a comment on an issue that answers no gate")
    return Plan("resume", prs=[target], reason=f"{event_name} on {target}")


def repository_of(payload: Mapping[str, Any], pr: Mapping[str, Any], default: str) -> str:
    repo = _mapping(_mapping(pr.get("base")).get("repo"))
    return str(repo.get("full_name") or _mapping(payload.get("repository")).get("full_name")
               or default)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _login(user: Any) -> str:
    return str(_mapping(user).get("login") or "")
