"""What an Actions event asks of delivery (`mode: auto`), decided from the payload alone.

    control repository:
      issues labeled (the trigger label), workflow_dispatch   -> start a run
      schedule                                                -> resume every paused run
    any repository (the relay workflow of a target repository, SPEC §13):
      workflow_run completed (CI finished on a PR)            -> resume the PR's run
      pull_request_review, pull_request_review_comment        -> resume the PR's run
      issue_comment on a PR                                   -> resume the PR's run
      pull_request closed / labeled / unlabeled               -> resume the PR's run
      status (CI outside Actions) success/failure/error       -> resume the runs of its branches
      check_suite completed (CI that is not Actions)          -> resume the suite's PRs
      issue_comment `/delivery answer <gate> <label>`         -> resume with that answer

A PR's run is found by `--for-pr` (its marker; the ownership checks are the resume's). Events
caused by the bot itself are ignored here, except those that report CI on its pushes
(`workflow_run`, `status`, `check_suite`: their sender is whoever pushed). Whether the person
behind a start or an answer may steer runs (write permission) is checked through the API
afterwards (`main`, SPEC §14).

The fields read are declared as pydantic models; a payload whose fields have the wrong types
(`"pull_requests": 5`, a number that is a string of letters) is refused with one line naming
the field (`MalformedEvent`), never a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from delivery.errors import MalformedEvent
from delivery.hidden_text import strip_hidden

ANSWER = re.compile(r"^/delivery\s+answer\s+(\S+)\s+(.+?)\s*$", re.MULTILINE)
# the events a target repository's relay forwards; each resumes the run of one PR
RELAYED = ("workflow_run", "pull_request_review", "pull_request_review_comment",
           "issue_comment", "pull_request", "status", "check_suite")
# CI reports: their sender is the author of the push, which is the bot for a run's own PRs
CI_EVENTS = frozenset({"workflow_run", "status", "check_suite"})
PR_ACTIONS = frozenset({"closed", "labeled", "unlabeled"})  # unlabeled: delivery:stop taken off
FINAL_STATUS = frozenset({"success", "failure", "error"})


# the Action's `mode` input: start a run, resume one, or decide from the event
Mode = Literal["auto", "start", "resume"]
MODES: Final = get_args(Mode)


@dataclass
class Plan:
    kind: Literal["start", "resume", "resume_all", "ignore"]
    reason: str = ""
    # start
    ticket: str = ""
    goal: str = ""
    notes: str = ""
    # resume: by run id, or by the PRs that carry its marker
    run_id: str = ""
    prs: list[str] = field(default_factory=list)
    # resume: the head branches a commit status was set on (`owner/name:branch`); the open
    # PRs of each are looked up, then resumed like `prs`
    heads: list[str] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    # who caused it: checked for write permission when the event starts or steers a run
    actor: str = ""
    needs_permission: bool = False


# -- the payload fields read (everything else is ignored) ---------------------------------

class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


Number = Annotated[StrictInt, Field(gt=0)]
_M = TypeVar("_M", bound=_Model)


class _User(_Model):
    login: str = ""
    type: str = ""


class _Repo(_Model):
    full_name: str = ""
    name: str = ""


class _Base(_Model):
    repo: _Repo | None = None


class _PrRef(_Model):
    number: Number
    base: _Base | None = None


class _Label(_Model):
    name: str = ""


class _Issue(_Model):
    number: Number | None = None
    title: str | None = ""
    body: str | None = ""
    html_url: str = ""
    pull_request: dict[str, Any] | None = None


class _Comment(_Model):
    body: str | None = ""
    user: _User | None = None


class _Envelope(_Model):
    action: str = ""
    sender: _User | None = None
    repository: _Repo | None = None


class _IssuesEvent(_Envelope):
    label: _Label | None = None
    issue: _Issue = Field(default_factory=_Issue)


class _CommentEvent(_Envelope):
    issue: _Issue = Field(default_factory=_Issue)
    comment: _Comment = Field(default_factory=_Comment)


class _ReviewEvent(_Envelope):
    pull_request: _PrRef
    review: _Comment = Field(default_factory=_Comment)
    comment: _Comment = Field(default_factory=_Comment)


class _PullRequestEvent(_Envelope):
    pull_request: _PrRef
    label: _Label | None = None


class _Run(_Model):
    name: str = ""
    conclusion: str | None = None
    head_branch: str | None = ""
    pull_requests: list[_PrRef] = Field(default_factory=list)


class _WorkflowRunEvent(_Envelope):
    workflow_run: _Run


class _Suite(_Model):
    pull_requests: list[_PrRef] = Field(default_factory=list)


class _CheckSuiteEvent(_Envelope):
    check_suite: _Suite


class _Branch(_Model):
    name: str


class _StatusEvent(_Envelope):
    state: str = ""
    context: str = ""
    branches: list[_Branch] = Field(default_factory=list)


class _Dispatch(_Model):
    inputs: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


def _read(model: type[_M], event_name: str, payload: Mapping[str, Any]) -> _M:
    try:
        return model.model_validate(payload)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(the payload)"
        more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
        raise MalformedEvent(f"{event_name} event payload field {where}",
                             f"{first['msg'].lower()}{more}",
                             "this is not a payload GitHub sends; re-run the job from a real "
                             "event, or fix the payload given as GITHUB_EVENT_PATH") from None


def is_bot(user: _User | Mapping[str, Any] | None, bot_login: str) -> bool:
    if user is None:
        return False
    if isinstance(user, Mapping):
        login, kind = str(user.get("login") or ""), str(user.get("type") or "")
    else:
        login, kind = user.login, user.type
    return login == bot_login or login.endswith("[bot]") or kind == "Bot"


def plan(event_name: str, payload: Mapping[str, Any], *, mode: Mode, trigger_label: str,
         bot_login: str, inputs: Mapping[str, str], repository: str,
         actor: str = "") -> Plan:
    """What to do for this event (`mode`: start, resume, auto); MalformedEvent (one line)
    for a payload whose fields are not of GitHub's types."""
    envelope = _read(_Envelope, event_name, payload)
    sender_login = envelope.sender.login if envelope.sender else ""
    if mode == "start":
        return _start_from_inputs(event_name, payload, inputs, actor or sender_login)
    if mode == "resume":
        run_id = inputs.get("run-id", "")
        if run_id:
            return Plan("resume", run_id=run_id)
        return Plan("resume_all", reason="mode resume without a run id: every paused run")
    if event_name == "workflow_dispatch":
        return _start_from_inputs(event_name, payload, inputs, actor or sender_login)
    if event_name == "issues":
        return _issue_labeled(_read(_IssuesEvent, event_name, payload), trigger_label,
                              bot_login)
    if event_name == "schedule":
        return Plan("resume_all", reason="schedule: the safety net resumes every paused run")
    if event_name in RELAYED and event_name not in CI_EVENTS and is_bot(envelope.sender,
                                                                         bot_login):
        return Plan("ignore", reason="the bot ignores its own comments, reviews and "
                    f"{event_name} events")
    here = (envelope.repository.full_name if envelope.repository else "") or repository
    if event_name == "workflow_run":
        return _workflow_run(_read(_WorkflowRunEvent, event_name, payload), here)
    if event_name == "check_suite":
        suite = _read(_CheckSuiteEvent, event_name, payload).check_suite
        prs = [_pr_name(pr, here) for pr in suite.pull_requests]
        if not prs:
            return Plan("ignore", reason="the check suite belongs to no pull request")
        return Plan("resume", prs=prs, reason="check suite completed")
    if event_name == "status":
        return _status(_read(_StatusEvent, event_name, payload), here)
    if event_name == "pull_request":
        event = _read(_PullRequestEvent, event_name, payload)
        if event.action not in PR_ACTIONS:
            return Plan("ignore", reason=f"pull_request.{event.action} resumes no run "
                        "(CI reports it when it finishes)")
        target = _pr_name(event.pull_request, here)
        return Plan("resume", prs=[target], reason=f"pull request {event.action}: {target}")
    if event_name in ("pull_request_review", "pull_request_review_comment"):
        review = _read(_ReviewEvent, event_name, payload)
        item = review.review if event_name == "pull_request_review" else review.comment
        if is_bot(item.user, bot_login):
            return Plan("ignore", reason="the bot ignores its own comments and reviews")
        target = _pr_name(review.pull_request, here)
        return _answer_or_resume(event_name, item, target, on_pr=True, ticket="")
    if event_name == "issue_comment":
        comment = _read(_CommentEvent, event_name, payload)
        if is_bot(comment.comment.user, bot_login):
            return Plan("ignore", reason="the bot ignores its own comments and reviews")
        number = comment.issue.number
        on_pr = comment.issue.pull_request is not None
        return _answer_or_resume(event_name, comment.comment, f"{here}#{number}",
                                 on_pr=on_pr and number is not None,
                                 ticket=comment.issue.html_url)
    return Plan("ignore", reason=f"the {event_name} event does not start or resume runs")


def _start_from_inputs(event_name: str, payload: Mapping[str, Any], inputs: Mapping[str, str],
                       actor: str) -> Plan:
    dispatched = _read(_Dispatch, event_name, payload).inputs
    ticket = str(dispatched.get("ticket") or inputs.get("ticket") or "")
    goal = str(dispatched.get("goal") or inputs.get("goal") or "")
    if not ticket and not goal:
        return Plan("ignore", reason="nothing to start: give the ticket or goal input")
    return Plan("start", ticket=ticket, goal=strip_hidden(goal), actor=actor,
                needs_permission=True, reason="dispatched")


def _issue_labeled(event: _IssuesEvent, trigger_label: str, bot_login: str) -> Plan:
    if event.action != "labeled":
        return Plan("ignore", reason=f"issues.{event.action} does not start a run")
    label = event.label.name if event.label else ""
    if label != trigger_label:
        return Plan("ignore", reason=f"label {label!r} is not the trigger label "
                    f"{trigger_label!r}")
    if is_bot(event.sender, bot_login):
        return Plan("ignore", reason="the label was added by a bot")
    ticket = event.issue.html_url
    title = strip_hidden(event.issue.title or "").strip()
    body = strip_hidden(event.issue.body or "").strip()
    return Plan("start", ticket=ticket, goal=title or f"Deliver {ticket}", notes=body,
                actor=event.sender.login if event.sender else "", needs_permission=True,
                reason=f"issue labeled {label}")


def _workflow_run(event: _WorkflowRunEvent, here: str) -> Plan:
    run = event.workflow_run
    if event.action != "completed":
        return Plan("ignore", reason=f"workflow_run.{event.action}: CI has not finished")
    # GitHub lists the PRs of the run's head branch in this repository (none for a fork's)
    prs = [_pr_name(pr, here) for pr in run.pull_requests]
    if not prs:
        return Plan("ignore", reason=f"workflow run {run.name!r} belongs to no pull request")
    return Plan("resume", prs=prs, reason=f"workflow {run.name!r} completed "
                f"({run.conclusion or 'no conclusion'})")


def _status(event: _StatusEvent, here: str) -> Plan:
    if event.state not in FINAL_STATUS:
        return Plan("ignore", reason=f"status {event.context!r} is {event.state!r}: "
                    "not finished")
    heads = [f"{here}:{branch.name}" for branch in event.branches if branch.name]
    if not heads:
        return Plan("ignore", reason="the commit status is on no branch")
    return Plan("resume", heads=heads, reason=f"status {event.context!r}: {event.state}")


def _answer_or_resume(event_name: str, item: _Comment, target: str, *, on_pr: bool,
                      ticket: str) -> Plan:
    author = item.user.login if item.user else ""
    text = strip_hidden(item.body or "")
    answers = {gate: label for gate, label in ANSWER.findall(text)}
    if answers:
        # an answer on the ticket or on one of the run's PRs; the run is found by the PR's
        # marker, or (on the ticket) among the paused runs of that ticket
        return Plan("resume", prs=[target] if on_pr else [], answers=answers,
                    actor=author, needs_permission=True, ticket=ticket,
                    reason=f"/delivery answer from {author}")
    if not on_pr:
        return Plan("ignore", reason="a comment on an issue that answers no gate")
    return Plan("resume", prs=[target], reason=f"{event_name} on {target}")


def _pr_name(pr: _PrRef, here: str) -> str:
    # the event's own repository unless the PR names its base repository (check_suite)
    repo = pr.base.repo.full_name if pr.base and pr.base.repo else ""
    return f"{repo or here}#{pr.number}"

