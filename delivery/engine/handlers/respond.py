"""`respond` stages (SPEC §7.1): answer review threads in the threads themselves.

`threads=` names a json context value mapping thread ids to `{reply, resolve}` — what a
repair agent declares with `outputs="threads:json"`. The stage posts `reply` in each
thread it names, then resolves the threads whose `resolve` is true. It runs after the fix
was pushed: a folder whose worktree still holds uncommitted or unpushed work fails the
stage before anything is posted, since resolving a thread for a fix the reviewer cannot
see would hide the thread from them.

Only threads the last probe saw unresolved on the run's own PRs (`<f>.threads.ids`) are
answered; any other id in the agent's answer (a guess, or text a PR smuggled into the
reply) is skipped and named in the stage's events, never posted to. A key may name the
folder (`api:3`) where the bare id would be ambiguous (the local forge numbers threads per
PR). Replies are marker-keyed find-or-create: the marker is the thread id and a hash of
the reply, so a killed and resumed stage (or a later run answering the same thread with
the same words) finds its reply instead of posting it twice. What is posted is the reply
as a reader of the page sees it (hidden parts removed), secrets masked (SPEC §14).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, TypeAdapter, ValidationError

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.engine.handlers.folders import (
    StageProblem,
    folder_repository,
    need_forge,
    stage_folders,
)
from delivery.errors import DeliveryError
from delivery.git import unpushed_commits
from delivery.hidden_text import quiet_mentions, strip_hidden
from delivery.lang.model import Node
from delivery.lang.outcomes import StageOutcome
from probes.worktree import worktree_state

MAX_REPLY_CHARS = 20_000  # GitHub takes 65,536; a reply longer than this is cut, and says so


class ThreadAnswer(BaseModel):
    """One thread's answer: what to reply (empty: no reply) and whether to resolve it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    reply: StrictStr = ""
    resolve: StrictBool = False


_ANSWERS = TypeAdapter(dict[str, ThreadAnswer])


@dataclass(frozen=True)
class Target:
    folder: str
    number: int
    thread_id: str
    answer: ThreadAnswer


def reply_marker(thread_id: str, reply: str) -> str:
    key = hashlib.sha256(f"{thread_id}\n{reply}".encode()).hexdigest()[:16]
    return f"<!-- delivery:reply thread={thread_id} key={key} -->"


def reply_body(reply: str, redact: Callable[[str], str]) -> str:
    """The text posted: visible, masked, bounded, paging nobody; the marker goes after it."""
    text = redact(strip_hidden(reply)).strip()
    if len(text) > MAX_REPLY_CHARS:
        text = text[:MAX_REPLY_CHARS] + "\n\n(reply cut at 20,000 characters)"
    return quiet_mentions(text)


def run_respond(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        answers = _answers(node, context)
        targets, skipped = _targets(node, env, context, answers)
        for key, why in skipped:
            events.append(("thread_skipped", {"node": node.id, "thread": key, "reason": why}))
        if not targets:
            return StageResult(StageOutcome.SUCCEEDED, events=events)
        forge = need_forge(env, "answering review threads")
        _check_pushed(env, {t.folder for t in targets if t.answer.resolve})
        bodies = {t.thread_id: reply_body(t.answer.reply, env.redact) for t in targets}
        for target in targets:  # every reply first, then the resolves
            text = bodies[target.thread_id]
            if not text:
                continue
            marker = reply_marker(target.thread_id, text)
            try:
                posted = forge.reply_to_review_thread(
                    folder_repository(env, target.folder), target.number, target.thread_id,
                    body=f"{text}\n\n{marker}", marker=marker)
            except DeliveryError as err:
                raise StageProblem(f"folder '{target.folder}': {err}") from None
            events.append(("thread_reply", {"node": node.id, "folder": target.folder,
                                            "thread": target.thread_id,
                                            "created": posted.created}))
        for target in targets:
            if not target.answer.resolve:
                continue
            try:
                forge.resolve_review_thread(folder_repository(env, target.folder),
                                            target.number, target.thread_id)
            except DeliveryError as err:
                raise StageProblem(f"folder '{target.folder}': {err}") from None
            events.append(("thread_resolved", {"node": node.id, "folder": target.folder,
                                               "thread": target.thread_id}))
    except (StageProblem, DeliveryError) as problem:
        return StageResult.fail(str(problem))
    return StageResult(StageOutcome.SUCCEEDED, events=events)


def _answers(node: Node, context: Context) -> dict[str, ThreadAnswer]:
    key = node.threads_key
    if not key:
        raise StageProblem(f"respond node '{node.id}' has no threads= (name the json "
                           "context value with the answers, e.g. threads=threads)")
    value = context.get(key)
    if value is None or value == "":
        return {}  # nothing was answered
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise StageProblem(f"'{key}' is not JSON: write it as {{\"<thread id>\": "
                               "{\"reply\": \"...\", \"resolve\": true}}") from None
    try:
        return _ANSWERS.validate_python(value)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise StageProblem(f"'{key}' is not a map of thread ids to {{reply, resolve}} "
                           f"(at {where or 'the top'}: {first['msg']}); write it as "
                           "{\"<thread id>\": {\"reply\": \"...\", \"resolve\": true}}"
                           ) from None


def _open_threads(context: Context, folder: str) -> list[str]:
    raw = context.get(f"{folder}.threads.ids")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else []
        except ValueError:
            raw = []
    return [str(item) for item in raw] if isinstance(raw, list) else []


def _targets(node: Node, env: StageEnv, context: Context,
             answers: dict[str, ThreadAnswer]) -> tuple[list[Target], list[tuple[str, str]]]:
    folders = stage_folders(node, env)
    open_by_folder = {folder: _open_threads(context, folder) for folder in folders}
    targets: list[Target] = []
    skipped: list[tuple[str, str]] = []
    for key, answer in answers.items():
        folder, sep, bare = key.partition(":")
        if sep and folder in open_by_folder:
            owners = [folder] if bare in open_by_folder[folder] else []
            thread_id = bare
        else:
            thread_id = key
            owners = [f for f, ids in open_by_folder.items() if key in ids]
        if not owners:
            skipped.append((key, "not an unresolved thread of this run's pull requests"))
            continue
        if len(owners) > 1:
            raise StageProblem(f"thread '{key}' is open in more than one folder "
                               f"({', '.join(owners)}): key the answer as "
                               f"'{owners[0]}:{key}'")
        number = context.get(f"{owners[0]}.pr.number")
        if not isinstance(number, int) and not str(number or "").isdigit():
            skipped.append((key, f"folder '{owners[0]}' has no pull request"))
            continue
        targets.append(Target(owners[0], int(number), thread_id, answer))
    return targets, skipped


def _check_pushed(env: StageEnv, folders: set[str]) -> None:
    """Resolving says "fixed": the fix must be on the PR branch, not only in the worktree."""
    for folder in sorted(folders):
        path = env.folders.get(folder)
        if path is None:
            continue
        state = worktree_state(path)
        if not state.exists:
            continue  # a review without worktrees (review-prs.dot): nothing to push
        if state.dirty or unpushed_commits(path):
            raise StageProblem(f"folder '{folder}': the fix is not pushed yet (the worktree "
                               "has uncommitted or unpushed work), so no thread was "
                               "answered; put a publish stage before the respond stage")
