"""The run's records, typed: run info (`run.json`), the run state (a snapshot) and the
record each stage appends (its changes to the state).

Records are dataclasses with a `to_json()` and a checking `from_json()`: anything read
from disk goes through `from_json`, which raises `RunStoreError` naming the field that is
wrong (a reader never trusts a run file's shape). Dataclasses, not pydantic models: one
stage record is built per stage and thousands are read on a resume, where a model's
validation would cost more than the rest of the stage.

Outcomes are read back as what they are: a standard one as its `StageOutcome` member, a
workflow's own (`yes`, `needs_review`, ...) as a `CustomOutcome` (delivery.lang.outcomes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, TypeVar

from delivery.errors import RunStoreError
from delivery.lang.outcomes import Outcome, outcome_of


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PAUSED = "paused"
    CANCELLED = "cancelled"  # `delivery close`: its open PRs closed, never resumed


# a run in one of these is over: nothing more runs in it
ENDED: Final = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})


class GateMode(StrEnum):
    """What an unanswered human gate does off a terminal (`--gates`, SPEC §9.1)."""

    DENY = "deny"  # the gate's stage fails
    PAUSE = "pause"  # the run pauses; `resume --answer` continues it
    MANAGED = "managed"  # the node's agent answers a delegatable gate (others are denied)


_Member = TypeVar("_Member", bound=StrEnum)


# -- checking what was read -------------------------------------------------------------
def _fail(what: str, name: str, expected: str, found: Any) -> RunStoreError:
    return RunStoreError(f"{what}: '{name}' should be {expected}, found {_show(found)}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Reader:
    """Typed access to the members of one JSON object read from a run file."""

    def __init__(self, data: Any, what: str) -> None:
        if not isinstance(data, Mapping):
            raise RunStoreError(f"{what}: expected a JSON object, found {_show(data)}")
        self.data = data
        self.what = what

    def text(self, name: str, default: str | None = None) -> str:
        value = self.data.get(name, default)
        if not isinstance(value, str):
            raise _fail(self.what, name, "a string", value)
        return value

    def optional_str(self, name: str) -> str | None:
        value = self.data.get(name)
        if value is not None and not isinstance(value, str):
            raise _fail(self.what, name, "a string or null", value)
        return value

    def count(self, name: str, default: int | None = None) -> int:
        value = self.data.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _fail(self.what, name, "a whole number >= 0", value)
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.data.get(name, default)
        if not isinstance(value, bool):
            raise _fail(self.what, name, "true or false", value)
        return value

    def obj(self, name: str, default: Any = None) -> dict[str, Any]:
        value = self.data.get(name, {} if default is None else default)
        if not isinstance(value, dict):
            raise _fail(self.what, name, "a JSON object", value)
        return value

    def optional_object(self, name: str) -> dict[str, Any] | None:
        value = self.data.get(name)
        if value is not None and not isinstance(value, dict):
            raise _fail(self.what, name, "a JSON object or null", value)
        return value

    def str_map(self, name: str) -> dict[str, str]:
        value = self.obj(name)
        if not all(isinstance(v, str) for v in value.values()):
            raise _fail(self.what, name, "an object of strings", value)
        return value

    def int_map(self, name: str) -> dict[str, int]:
        value = self.obj(name)
        if not all(type(v) is int and v >= 0 for v in value.values()):
            raise _fail(self.what, name, "an object of whole numbers", value)
        return value

    def str_list(self, name: str) -> list[str]:
        value = self.data.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _fail(self.what, name, "a list of strings", value)
        return value

    def outcome_map(self, name: str) -> dict[str, Outcome]:
        return _outcomes(self.str_map(name))

    def status(self, name: str) -> RunStatus:
        return self.member(name, RunStatus.RUNNING)

    def member(self, name: str, default: _Member) -> _Member:
        """A member of `default`'s vocabulary, by its value."""
        kind = type(default)
        value = self.data.get(name, default.value)
        try:
            return kind(value)
        except ValueError:
            expected = "one of " + ", ".join(member.value for member in kind)
            raise _fail(self.what, name, expected, value) from None


# -- run.json ------------------------------------------------------------------------------
@dataclass
class RunInfo:
    """What was run: written once when the run starts (answers appended by `resume`)."""

    run_id: str
    workflow: str
    workflow_sha256: str
    workspace: str
    started: str
    agent: str = ""
    forge: str = ""  # local | github
    repos: dict[str, str] = field(default_factory=dict)  # folder -> repository location
    folders: dict[str, str] = field(default_factory=dict)  # folder -> working directory
    checks: dict[str, str] = field(default_factory=dict)  # folder -> local check command
    required_approvals: int = 0  # reviews a PR needs before merge (the local forge)
    branch: str = ""  # the run's branch in every folder
    git_cache: str = ""  # the clone cache worktrees hang on ("": the default)
    answers: dict[str, list[str]] = field(default_factory=dict)  # gate -> one per visit
    gates: GateMode = GateMode.DENY
    logs: str = ""  # `--logs DIR`: where the run's Attractor view is written ("": none)
    # `--budget` (run, or raised by resume): over the graph's budget_tokens= / budget_usd=
    budget_tokens: int = 0  # 0: not given
    budget_usd: float = 0.0  # 0: not given
    # `--max-parallel`: folders a stage works on at once, kept for resumes (0: not given)
    max_parallel: int = 0
    # `--max-runners`: worker jobs a foreach stage may fan out to in event mode (0: not
    # given, 1: no fan-out; SPEC §13)
    max_runners: int = 0
    # the process running the run, recorded by the start and every resume: a run whose
    # process is gone is shown `interrupted` (delivery.store.liveness); 0/"": not known
    pid: int = 0
    host: str = ""
    pid_started: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "workflow": self.workflow,
                "workflow_sha256": self.workflow_sha256, "agent": self.agent,
                "workspace": self.workspace, "forge": self.forge, "repos": self.repos,
                "folders": self.folders, "checks": self.checks,
                "required_approvals": self.required_approvals, "branch": self.branch,
                "git_cache": self.git_cache, "answers": self.answers,
                "gates": self.gates.value,
                "started": self.started, **({"logs": self.logs} if self.logs else {}),
                **({"budget_tokens": self.budget_tokens} if self.budget_tokens else {}),
                **({"budget_usd": self.budget_usd} if self.budget_usd else {}),
                **({"max_parallel": self.max_parallel} if self.max_parallel else {}),
                **({"max_runners": self.max_runners} if self.max_runners else {}),
                **({"pid": self.pid, "host": self.host, "pid_started": self.pid_started}
                   if self.pid else {})}

    @classmethod
    def from_json(cls, data: Any, what: str = "run.json") -> RunInfo:
        read = _Reader(data, what)
        answers = read.obj("answers")
        if not all(isinstance(v, list) and all(isinstance(a, str) for a in v)
                   for v in answers.values()):
            raise _fail(what, "answers", "an object of lists of strings", answers)
        usd = data.get("budget_usd", 0.0)
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not usd >= 0:
            raise _fail(what, "budget_usd", "an amount of dollars >= 0", usd)
        gates = read.member("gates", GateMode.DENY)
        return cls(run_id=read.text("run_id"), workflow=read.text("workflow"),
                   workflow_sha256=read.text("workflow_sha256"),
                   workspace=read.text("workspace"), started=read.text("started", ""),
                   agent=read.text("agent", ""), forge=read.text("forge", ""),
                   repos=read.str_map("repos"), folders=read.str_map("folders"),
                   checks=read.str_map("checks"),
                   required_approvals=read.count("required_approvals", 0),
                   branch=read.text("branch", ""),
                   git_cache=read.text("git_cache", ""), answers=answers, gates=gates,
                   logs=read.text("logs", ""),
                   budget_tokens=read.count("budget_tokens", 0), budget_usd=float(usd),
                   max_parallel=read.count("max_parallel", 0),
                   max_runners=read.count("max_runners", 0),
                   pid=read.count("pid", 0), host=read.text("host", ""),
                   pid_started=read.count("pid_started", 0))


# -- the run state ---------------------------------------------------------------------------
@dataclass
class RunState:
    """Where a run is: everything a resume needs. A snapshot is this, whole; after every
    stage the engine records only what changed (`take_record`), so a stage's cost does not
    grow with the run.

    Write the maps through the methods (`set_outcome`, `next_attempt`, `cut_path`) or note
    the change yourself: the record is built from what was noted, not by comparing.
    """

    run_id: str
    next_node: str | None
    context: dict[str, Any]  # stored values (large ones as artifact pointers)
    initial: dict[str, Any]  # restored by a loop restart
    path: list[str] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # last outcome per node
    attempts: dict[str, int] = field(default_factory=dict)  # stage folders per node
    answers_used: dict[str, int] = field(default_factory=dict)  # gate answers taken
    steps: int = 0
    status: RunStatus = RunStatus.RUNNING
    failure_reason: str = ""
    agent_state: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)  # agent tokens of the whole run
    # the states of the agents named by profile (a node's agent=); few and small
    agent_states: dict[str, Any] = field(default_factory=dict)
    # not saved: set on resume, cleared by the first agent stage after it
    resumed: bool = field(default=False, compare=False)
    # what changed since the last record (see take_record)
    _path_mark: int = field(default=0, init=False, repr=False, compare=False)
    _outcomes_changed: set[str] = field(default_factory=set, init=False, repr=False,
                                        compare=False)
    _attempts_changed: set[str] = field(default_factory=set, init=False, repr=False,
                                        compare=False)
    _answers_seen: dict[str, int] = field(default_factory=dict, init=False, repr=False,
                                          compare=False)
    _usage_seen: dict[str, int] = field(default_factory=dict, init=False, repr=False,
                                        compare=False)

    def __post_init__(self) -> None:
        self.mark_recorded()

    # -- writes the record follows --------------------------------------------------------
    def set_outcome(self, node_id: str, outcome: Outcome) -> None:
        self.outcomes[node_id] = outcome
        self._outcomes_changed.add(node_id)

    def next_attempt(self, node_id: str) -> int:
        attempt = self.attempts.get(node_id, 0) + 1
        self.attempts[node_id] = attempt
        self._attempts_changed.add(node_id)
        return attempt

    def cut_path(self, length: int) -> None:
        del self.path[length:]
        self._path_mark = min(self._path_mark, length)

    def mark_recorded(self) -> None:
        """Everything so far is saved: the next record starts from here."""
        self._path_mark = len(self.path)
        self._outcomes_changed.clear()
        self._attempts_changed.clear()
        self._answers_seen = dict(self.answers_used)
        self._usage_seen = dict(self.usage)

    def take_record(self, context_set: dict[str, Any], context_deleted: list[str],
                    agent_patch: dict[str, Any] | None,
                    agent_state: dict[str, Any] | None,
                    agent_states: dict[str, Any] | None = None) -> StageRecord:
        """The changes since the last record (the context's and agent's given), and mark
        them recorded. The gate answers map is compared whole: it has one entry per gate."""
        mark = self._path_mark
        answers = dict(self.answers_used) if self.answers_used != self._answers_seen else None
        usage = dict(self.usage) if self.usage != self._usage_seen else None
        record = StageRecord(
            next_node=self.next_node, steps=self.steps, status=self.status,
            failure_reason=self.failure_reason, path_from=mark, path_add=self.path[mark:],
            outcomes={k: self.outcomes[k] for k in self._outcomes_changed},
            attempts={k: self.attempts[k] for k in self._attempts_changed},
            answers_used=answers, context_set=context_set, context_deleted=context_deleted,
            agent_patch=agent_patch, agent_state=agent_state, usage=usage,
            agent_states=agent_states if agent_states != self.agent_states else None)
        if agent_states is not None:
            self.agent_states = agent_states
        self.mark_recorded()
        return record

    def apply(self, record: StageRecord) -> None:
        """Bring the state forward by one record (on resume)."""
        if record.path_from > len(self.path):
            raise RunStoreError(f"a stage record continues the path at {record.path_from}, "
                                f"but the state's path has {len(self.path)} nodes")
        del self.path[record.path_from:]
        self.path.extend(record.path_add)
        self.next_node, self.steps = record.next_node, record.steps
        self.status, self.failure_reason = record.status, record.failure_reason
        self.outcomes.update(record.outcomes)
        self.attempts.update(record.attempts)
        if record.answers_used is not None:
            self.answers_used = dict(record.answers_used)
        if record.usage is not None:
            self.usage = dict(record.usage)
        if record.agent_states is not None:
            self.agent_states = dict(record.agent_states)
        for key in record.context_deleted:
            self.context.pop(key, None)
        self.context.update(record.context_set)
        if record.agent_state is not None:
            self.agent_state = record.agent_state
        elif record.agent_patch is not None:
            # in place: a copy of the whole agent state per record (replay's cursors hold
            # one entry per stage run) made each resume cost more the longer the run
            patch_in_place(self.agent_state, record.agent_patch)
        self.mark_recorded()

    # -- whole ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "next_node": self.next_node, "context": self.context,
                "initial": self.initial, "path": self.path, "outcomes": self.outcomes,
                "attempts": self.attempts, "answers_used": self.answers_used,
                "steps": self.steps, "status": self.status.value,
                "failure_reason": self.failure_reason, "agent_state": self.agent_state,
                "usage": self.usage, "agent_states": self.agent_states}

    @classmethod
    def from_json(cls, data: Any, what: str = "checkpoint") -> RunState:
        read = _Reader(data, what)
        return cls(run_id=read.text("run_id"), next_node=read.optional_str("next_node"),
                   context=dict(read.obj("context")), initial=dict(read.obj("initial")),
                   path=list(read.str_list("path")), outcomes=read.outcome_map("outcomes"),
                   attempts=dict(read.int_map("attempts")),
                   answers_used=dict(read.int_map("answers_used")), steps=read.count("steps", 0),
                   status=read.status("status"),
                   failure_reason=read.text("failure_reason", ""),
                   agent_state=dict(read.obj("agent_state")),
                   usage=dict(read.int_map("usage")),
                   agent_states=dict(read.obj("agent_states")))


# The event type a stage record is logged as (SPEC §11: records appended to the event log).
RECORD_EVENT: Final = "state"


@dataclass
class StageRecord:
    """One stage's changes to the run state; appended to the event log after the stage.

    `path_from`/`path_add`: the path is cut to `path_from` nodes, then extended (a pause
    cuts it back). `agent_state` replaces the agent's state; otherwise `agent_patch`, a JSON
    merge patch (RFC 7396), is applied to it.
    """

    next_node: str | None
    steps: int
    status: RunStatus
    failure_reason: str
    path_from: int
    path_add: list[str]
    outcomes: dict[str, Outcome]
    attempts: dict[str, int]
    answers_used: dict[str, int] | None
    context_set: dict[str, Any]
    context_deleted: list[str]
    agent_patch: dict[str, Any] | None = None
    agent_state: dict[str, Any] | None = None
    usage: dict[str, int] | None = None  # the run's token counts, when they changed
    agent_states: dict[str, Any] | None = None  # the named agents' states, when changed

    def to_fields(self) -> dict[str, Any]:
        """The event's fields; empty changes are left out."""
        fields: dict[str, Any] = {"next_node": self.next_node, "steps": self.steps,
                                  "status": self.status.value, "path_from": self.path_from}
        optional = {"failure_reason": self.failure_reason, "path_add": self.path_add,
                    "outcomes": self.outcomes, "attempts": self.attempts,
                    "answers_used": self.answers_used, "context_set": self.context_set,
                    "context_deleted": self.context_deleted, "agent_patch": self.agent_patch,
                    "agent_state": self.agent_state, "usage": self.usage,
                    "agent_states": self.agent_states}
        fields.update((k, v) for k, v in optional.items() if v)
        return fields

    @classmethod
    def from_fields(cls, data: Any, what: str) -> StageRecord:
        """The record an event's fields hold; RunStoreError naming the field that is wrong.
        One pass over the fields as a stage writes them (`_as_written`); anything else —
        including every wrong field — goes through the checking reader."""
        record = _as_written(data)
        return record if record is not None else cls._read(data, what)

    @classmethod
    def _read(cls, data: Any, what: str) -> StageRecord:
        read = _Reader(data, what)
        answers = read.optional_object("answers_used")
        if answers is not None:
            answers = read.int_map("answers_used")
        usage = read.int_map("usage") if read.optional_object("usage") is not None else None
        return cls(next_node=read.optional_str("next_node"), steps=read.count("steps"),
                   status=read.status("status"), failure_reason=read.text("failure_reason", ""),
                   path_from=read.count("path_from"), path_add=read.str_list("path_add"),
                   outcomes=read.outcome_map("outcomes"), attempts=read.int_map("attempts"),
                   answers_used=answers, context_set=read.obj("context_set"),
                   context_deleted=read.str_list("context_deleted"),
                   agent_patch=read.optional_object("agent_patch"),
                   agent_state=read.optional_object("agent_state"), usage=usage,
                   agent_states=read.optional_object("agent_states"))


_STATUSES: Final = {status.value: status for status in RunStatus}


def _as_written(data: Any) -> StageRecord | None:
    """StageRecord._read(data) when every field is as a stage writes it, else None (the
    reader then says what is wrong): the same checks, in one pass and without a call per
    field — a resume reads a record per stage since the last snapshot. Types are compared
    exactly: JSON gives exact str/int/dict/list, and anything else takes the slow path."""
    if type(data) is not dict:
        return None
    get = data.get
    next_node, steps, path_from = get("next_node"), get("steps"), get("path_from")
    raw_status = get("status", RunStatus.RUNNING.value)
    status = _STATUSES.get(raw_status) if type(raw_status) is str else None
    failure_reason = get("failure_reason", "")
    if (status is None or type(steps) is not int or steps < 0 or type(path_from) is not int
            or path_from < 0 or type(failure_reason) is not str
            or (next_node is not None and type(next_node) is not str)):
        return None
    path_add, context_deleted = get("path_add", []), get("context_deleted", [])
    outcomes, attempts = get("outcomes", {}), get("attempts", {})
    context_set = get("context_set", {})
    if (type(path_add) is not list or type(context_deleted) is not list
            or type(outcomes) is not dict or type(attempts) is not dict
            or type(context_set) is not dict
            or not set(map(type, path_add)) <= _STR or not set(map(type, context_deleted)) <= _STR
            or not set(map(type, outcomes.values())) <= _STR
            or not _counts(attempts)):
        return None
    answers, usage = get("answers_used"), get("usage")
    if (answers is not None and not (type(answers) is dict and _counts(answers))) or (
            usage is not None and not (type(usage) is dict and _counts(usage))):
        return None
    agent_patch, agent_state = get("agent_patch"), get("agent_state")
    agent_states = get("agent_states")
    for value in (agent_patch, agent_state, agent_states):
        if value is not None and type(value) is not dict:
            return None
    return StageRecord(next_node, steps, status, failure_reason, path_from, path_add,
                       _outcomes(outcomes) if outcomes else {}, attempts, answers, context_set,
                       context_deleted, agent_patch, agent_state, usage, agent_states)


_STR: Final = frozenset({str})


def _outcomes(stored: dict[str, str]) -> dict[str, Outcome]:
    """Outcomes as stored (plain strings, in files of every version), typed."""
    return {node: outcome_of(text) for node, text in stored.items()}


def _counts(values: dict[str, Any]) -> bool:
    """Every value a whole number >= 0 (what _Reader.int_map accepts)."""
    return all(type(v) is int and v >= 0 for v in values.values())


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge member by member, null deletes, anything
    else replaces. Returns a new value (target is not changed)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def patch_in_place(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """`merge_patch(target, patch)` written into `target` (which must not be shared): the
    same result, without copying what the patch does not touch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            patch_in_place(target[key], value)
        else:
            target[key] = merge_patch(None, value)
