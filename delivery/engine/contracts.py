"""Output contracts of agent and prompt stages (SPEC §5).

The engine appends `contract_text(...)` to a stage's prompt; the agent must end its reply
with a JSON object `{"context_updates": {...}}` (bare or in a ```json fence). `parse_reply`
finds the last such object and checks it against the declared outputs, collecting every
problem; `correction_prompt` tells the agent what was wrong in a correction turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from delivery.engine.work import WORK_SCOPE, WorkScope
from delivery.errors import ContractViolation as ContractViolation
from delivery.lang.conditions import Compare
from delivery.lang.declarations import OutputDecl, OutputKind, reserved_reason
from delivery.lang.model import Node, Workflow
from delivery.lang.outcomes import CustomOutcome, Outcome, StageOutcome, standard_outcome

MAX_CORRECTIONS = 2

# outcomes whose reply's context_updates are ignored (and its texts taken as they are)
_NO_UPDATES: Final = frozenset({StageOutcome.FAILED, StageOutcome.RETRY})
_STANDARD_LISTED: Final = ", ".join(f'"{outcome}"' for outcome in StageOutcome)
_CUSTOM_OUTCOME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")
_MARKERS = ("context_updates", "outcome")
_TAGS = "leaf, hierarchy, candidate, goal"


def choice_literals(workflow: Workflow, node: Node) -> dict[str, list[str]]:
    """For each choice output of `node`: the literals its outgoing edge conditions compare
    that name with (`=` and `!=`), sorted and deduplicated."""
    result: dict[str, list[str]] = {}
    for out in node.outputs:
        if out.kind is not OutputKind.CHOICE:
            continue
        literals = {
            atom.literal
            for edge in workflow.outgoing.get(node.id, [])
            if edge.condition is not None
            for atom in edge.condition.atoms()
            if isinstance(atom, Compare) and atom.key == out.name and atom.op in ("=", "!=")
        }
        result[out.name] = sorted(literals)
    return result


# -- the contract -----------------------------------------------------------------------

_WORK_VARIANTS = (
    '{"type": "leaf", "ticket": "<http(s) URL>", "parent": "<http(s) URL>" or null}'
    " (parent must differ from ticket)",
    '{"type": "hierarchy", "ticket": "<http(s) URL>", "children": ["<http(s) URL>", ...]}'
    " (at least one child)",
    '{"type": "candidate", "description": "<text>", "evidence": ["<text>", ...]}'
    " (at least one piece of evidence)",
    '{"type": "goal", "goal": "<text>"}',
)

_EXTRAS = (
    "The same object may also carry:\n"
    '- "outcome": "succeeded" or "failed" (report "failed" only when you could not do the'
    ' task; then context_updates is ignored), "partial_success", "retry" (run this stage'
    ' again) or "skipped"\n'
    '- "failure_reason": a string saying why the task failed\n'
    '- "preferred_label": a string, the label of the outgoing edge you prefer\n'
    '- "suggested_next_ids": a list of node ids you suggest going to next'
)


def _accepts(out: OutputDecl, literals: Sequence[str]) -> str:
    if out.kind is OutputKind.CHOICE:
        if not literals:
            return "a non-empty string"
        quoted = (json.dumps(literal, ensure_ascii=False) for literal in literals)
        return "exactly one of " + ", ".join(quoted)
    if out.kind is OutputKind.TEXT:
        return "a non-empty string"
    if out.kind is OutputKind.JSON:
        return "a JSON object or array (a string, number, boolean or null is rejected)"
    variants = "".join(f"\n    {variant}" for variant in _WORK_VARIANTS)
    return (
        "a work scope, one of:" + variants + "\n"
        "  URLs must start with http:// or https://; text values must not be empty"
    )


def contract_text(outputs: Sequence[OutputDecl], choices: Mapping[str, Sequence[str]]) -> str:
    """The exact output contract appended to an agent or prompt stage's prompt."""
    lines = ["## Output contract", ""]
    if not outputs:
        lines += [
            "This stage declares no outputs, so a closing JSON object is optional. If you",
            "end your reply with one (bare or in a ```json fence), it has the form",
            '{"context_updates": {"<key>": <value>, ...}}: any key is accepted except the',
            "engine's own (goal, outcome, graph.*, inputs.*, response.*, parallel.*, ...).",
            "",
            _EXTRAS,
        ]
        return "\n".join(lines) + "\n"
    shape = ", ".join(f'"{out.name}": <{out.kind.value}>' for out in outputs)
    lines += [
        "End your reply with a JSON object, bare or in a ```json fence, of this form:",
        "",
        '{"context_updates": {' + shape + "}}",
        "",
        'If your reply contains several JSON objects with "context_updates", the last one'
        " counts.",
        "Every key below is required and no other key is accepted in context_updates:",
    ]
    for out in outputs:
        accepted = _accepts(out, choices.get(out.name, ()))
        lines.append(f'- "{out.name}" ({out.kind.value}): {accepted}')
    lines += ["", _EXTRAS]
    return "\n".join(lines) + "\n"


# -- reading a reply --------------------------------------------------------------------


@dataclass(frozen=True)
class AcceptedReply:
    updates: dict[str, Any] = field(default_factory=dict)
    work: WorkScope | None = None
    outcome: Outcome | None = None
    failure_reason: str = ""
    preferred_label: str = ""
    suggested_next_ids: tuple[str, ...] = ()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _decode_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value starting at `start` and where it ends, or (None, start + 1).

    Decodes a growing window rather than the whole text: a decoding error costs time
    proportional to its offset, so a long reply with many stray `{` stays fast. An error
    near the window's end (or an unterminated string) may be the cut itself: grow and retry.
    """
    size = 4096
    while True:
        window = text[start : start + size]
        try:
            value, end = _DECODER.raw_decode(window)
        except ValueError as err:
            cut = start + size < len(text) and (
                getattr(err, "pos", 0) >= len(window) - 32
                or str(err).startswith("Unterminated string")
            )
            if cut:
                size *= 4
                continue
            return None, start + 1
        return value, start + end


def _objects(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Outermost JSON objects carrying a marker key, in order, with their start offsets.

    Every `{` is a candidate start; the decoder respects strings and escapes, so braces
    inside strings never end an object. An object with a marker is taken whole (objects
    nested in it are not candidates); one without is searched for nested candidates.
    """
    start = _OBJECT_START.search(text)
    while start is not None:
        i = start.start()
        value, end = _decode_at(text, i)
        if isinstance(value, dict) and any(marker in value for marker in _MARKERS):
            yield i, value
            start = _OBJECT_START.search(text, end)
        else:
            start = _OBJECT_START.search(text, i + 1)


# Where an object with a key can start: `{`, a first key (a string: no quote, backslash or
# control character outside an escape), its colon, then the first character of a JSON
# value (NaN and Infinity included), with JSON's whitespace between. Any other `{` starts
# no object, or an empty one, which has no marker: skipping it changes nothing. A reply
# full of code (f-strings, dict literals such as {"key": name}, shell `${...}`, `{}`) then
# costs a decode only where one is valid JSON so far.
_OBJECT_START: Final = re.compile(
    r'\{[ \t\n\r]*"(?:[^"\\\x00-\x1f]|\\.)*"[ \t\n\r]*:[ \t\n\r]*[-"{\[0-9tfnNI]')


def _balanced_end(text: str, start: int) -> int:
    """The end of the balanced `{...}` starting at `start` (strings respected), or -1."""
    depth, in_string, escaped = 0, False, False
    for j in range(start, len(text)):
        ch = text[j]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def _no_object_problem(reply: str) -> str:
    """Why no object was found: point at a broken one mentioning context_updates if any."""
    problem = ('the reply ends with no JSON object with "context_updates" (expected '
               '{"context_updates": {...}} at the end, bare or in a ```json fence)')
    mention = reply.rfind('"context_updates"')
    start = reply.rfind("{", 0, mention) if mention != -1 else -1
    while start != -1:
        end = _balanced_end(reply, start)
        if end == -1 or end > mention:
            try:
                json.loads(reply[start:end] if end != -1 else reply[start:])
            except ValueError as err:
                return f"{problem}: the object that mentions it is not valid JSON ({err})"
            break
        start = reply.rfind("{", 0, start)
    return problem


def _found(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _work_problems(name: str, err: ValidationError) -> list[str]:
    problems: list[str] = []
    for item in err.errors():
        loc = [str(part) for part in item["loc"]]
        where = ".".join(loc[1:])
        kind, found = item["type"], item.get("input")
        if kind == "union_tag_invalid":
            detail = f'"type" must be one of {_TAGS}, found {_found(found.get("type"))}'
        elif kind == "union_tag_not_found":
            detail = f'it has no "type" (one of {_TAGS})'
        elif kind == "model_attributes_type":
            detail = f"expected an object, found {_found(found)}"
        elif kind == "missing":
            detail = f'"{where}" is missing'
        elif kind == "extra_forbidden":
            detail = f'"{where}" is not a field of a {loc[0]} scope'
        elif kind == "too_short":
            detail = f'"{where}" must list at least one item, found {_found(found)}'
        elif kind == "value_error":
            message = str(item["ctx"]["error"]) if "ctx" in item else item["msg"]
            detail = f'"{where}": {message}' if where else message
        else:
            detail = f'"{where}": {item["msg"].lower()}, found {_found(found)}'
        problems.append(f"'{name}' (work) must be a valid work scope: {detail}")
    return problems


def _check_value(
    out: OutputDecl, value: Any, literals: Sequence[str]
) -> tuple[Any, WorkScope | None, list[str]]:
    """(stored value, work scope, problems) for one declared output."""
    name, kind = out.name, out.kind
    if kind is OutputKind.CHOICE:
        if isinstance(value, str) and (value in literals if literals else value.strip()):
            return value, None, []
        return None, None, [f"'{name}' (choice) must be {_accepts(out, literals)}, "
                            f"found {_found(value)}"]
    if kind is OutputKind.TEXT:
        if isinstance(value, str) and value.strip():
            return value, None, []
        return None, None, [f"'{name}' (text) must be a non-empty string, found {_found(value)}"]
    if kind is OutputKind.JSON:
        if isinstance(value, (dict, list)):
            canonical = json.dumps(value, sort_keys=True, separators=(",", ":"),
                                   ensure_ascii=False)
            return canonical, None, []
        return None, None, [f"'{name}' (json) must be a JSON object or array; a scalar is "
                            f"rejected, found {_found(value)}"]
    try:
        scope = WORK_SCOPE.validate_python(value)
    except ValidationError as err:
        return None, None, _work_problems(name, err)
    return scope.model_dump(), scope, []


def _free_updates(updates_raw: Mapping[str, Any], folders: tuple[str, ...],
                  problems: list[str]) -> dict[str, Any]:
    """An Attractor node's updates (no `outputs=`): any key outside the reserved ones."""
    accepted: dict[str, Any] = {}
    for key, value in updates_raw.items():
        key = key[len("context."):] if key.startswith("context.") else key
        reason = reserved_reason(key, folders) if key else "an empty key"
        if reason:
            problems.append(f"'{key}' cannot be set: {reason}")
        else:
            accepted[key] = value
    return accepted


def _suggested(raw: Any, problems: list[str]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return tuple(raw)
    problems.append(f'"suggested_next_ids" must be a list of node ids, found {_found(raw)}')
    return ()


def parse_reply(
    reply: str, outputs: Sequence[OutputDecl], choices: Mapping[str, Sequence[str]],
    folders: tuple[str, ...] = (),
) -> AcceptedReply:
    """Check the reply against the contract; raise ContractViolation with every problem."""
    found = list(_objects(reply))
    if not found:
        if not outputs:
            return AcceptedReply()
        raise ContractViolation([_no_object_problem(reply)])
    obj = found[-1][1]
    problems: list[str] = []

    outcome: Outcome | None = None
    if "outcome" in obj:
        raw = obj["outcome"]
        standard = standard_outcome(raw) if isinstance(raw, str) else None
        if standard is not None:  # (Attractor's `success` and `fail` too)
            outcome = standard
        elif isinstance(raw, str) and _CUSTOM_OUTCOME.match(raw):
            outcome = CustomOutcome(raw)  # a custom outcome (`yes`): routes as a success
        else:
            problems.append(f'"outcome" must be {_STANDARD_LISTED} or a custom word, '
                            f'found {_found(raw)}')
    suggested = _suggested(obj.get("suggested_next_ids"), problems)
    texts: dict[str, str] = {}
    if "preferred_label" not in obj and "preferred_next_label" in obj:
        # the name of Attractor's status file (its Appendix C)
        obj = {**obj, "preferred_label": obj["preferred_next_label"]}
    for key in ("failure_reason", "preferred_label"):
        raw = obj.get(key, "")
        if raw is None:
            raw = ""
        if isinstance(raw, str):
            texts[key] = raw.strip()
        elif outcome in _NO_UPDATES:
            texts[key] = _found(raw)
        else:
            problems.append(f'"{key}" must be a string, found {_found(raw)}')

    if outcome in _NO_UPDATES:
        reason = texts.get("failure_reason") or (
            "the agent reported failure without a reason" if outcome == StageOutcome.FAILED
            else "the agent asked to run the stage again")
        return AcceptedReply({}, None, outcome, reason, texts.get("preferred_label", ""))

    updates_raw = obj.get("context_updates", {})
    updates: dict[str, Any] = {}
    work: WorkScope | None = None
    if not isinstance(updates_raw, dict):
        problems.append(f'"context_updates" must be an object, found {_found(updates_raw)}')
    elif not outputs:
        updates = _free_updates(updates_raw, folders, problems)
    else:
        declared = {out.name for out in outputs}
        for key in updates_raw:
            if key not in declared:
                names = ", ".join(sorted(declared)) or "none"
                problems.append(f"'{key}' is not a declared output (declared: {names})")
        for out in outputs:
            if out.name not in updates_raw:
                problems.append(f"'{out.name}' ({out.kind.value}) is missing from "
                                f"context_updates")
                continue
            literals = choices.get(out.name, ())
            value, scope, value_problems = _check_value(out, updates_raw[out.name], literals)
            problems += value_problems
            if not value_problems:
                updates[out.name] = value
                work = scope if scope is not None else work
    if problems:
        raise ContractViolation(problems)
    return AcceptedReply(updates, work, outcome, texts.get("failure_reason", ""),
                         texts.get("preferred_label", ""), suggested)


def correction_prompt(violation: ContractViolation, contract: str) -> str:
    """What the agent is told in a correction turn: the problems, then the contract again."""
    problems = "\n".join(f"- {problem}" for problem in violation.problems)
    return (
        "Your reply did not satisfy the output contract:\n"
        f"{problems}\n\n"
        "Reply again, ending with a corrected JSON object.\n\n"
        f"{contract}"
    )
