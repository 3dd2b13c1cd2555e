"""What each stage writes into the context, as the validator models it (SPEC §3, §5 to §8).

A write is a dotted key; a key starting with `*.` stands for that key under every folder
(`*.pr.state` is `web.pr.state`, `api.pr.state`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from delivery.lang.declarations import (
    PROBE_FOLDER_FACTS,
    PROBE_ROLLUPS,
    WORKTREE_REMOVE_FACTS,
    OutputKind,
)
from delivery.lang.model import Node, NodeType, Workflow
from delivery.lang.syntax import slot_constructor

# Written before the first stage or by every stage: reading them is always fine.
ALWAYS_AVAILABLE = frozenset(
    {"goal", "outcome", "failure_reason", "failure_class", "failure_signature", "last_stage",
     "current_node", "preferred_label", "graph.goal", "context", "folders", "inputs",
     "parallel", "graph", "internal"}
)
ALWAYS_AVAILABLE_PREFIXES = ("internal.",)
HUMAN_GATE_KEYS = ("human.gate.selected", "human.gate.label", "human.gate.text")
# What a manager loop writes about its child, whatever its outcome (Attractor §4.11).
CHILD_KEYS = ("stack.child.status", "stack.child.outcome", "stack.child.run_id",
              "stack.child.run_dir", "stack.child.current_node", "stack.child.completed_nodes",
              "stack.child.failure_reason", "stack.child.cycles")
# What `publish` writes for each folder it publishes (SPEC §7.1).
PUBLISH_FOLDER_FACTS = ("pr.number", "pr.url")


@dataclass(frozen=True, slots=True)
class StageWrites:
    always: tuple[str, ...]  # written whatever the outcome
    on_success: tuple[str, ...]  # written only when the stage succeeds


# StageWrites(always, on_success) without its __init__ (one per node of every file checked)
_make_writes: Callable[[tuple[str, ...], tuple[str, ...]], StageWrites] = \
    slot_constructor(StageWrites)


def initial_writes(workflow: Workflow) -> list[str]:
    keys = [f"graph.{name}" for name in workflow.attrs]
    for decl in workflow.inputs:
        keys += [decl.name, f"inputs.{decl.name}"]
    return keys


def stage_writes(node: Node, folders: Sequence[str] = ()) -> StageWrites:
    """What `node` writes; `folders` are the graph's declared folders (`folders=`)."""
    if node.foreach and node.type in FOREACH_TYPES:
        return _per_folder(node, _flat_writes(node, folders), folders)
    return _flat_writes(node, folders)


# The node types that may run once per folder (`foreach="folders"`, SPEC §8.1).
FOREACH_TYPES = frozenset({NodeType.AGENT, NodeType.PROMPT, NodeType.SCRIPT})


def _per_folder(node: Node, flat: StageWrites, folders: Sequence[str]) -> StageWrites:
    """A foreach stage's writes: each key its handler writes lands as `<f>.<key>` for each
    folder (each declared one, or any as `*.`), with `<f>.outcome` and `<f>.failure_reason`;
    the node itself writes `<node>.failed_folders` and, for a script, `<node>.failed`."""
    targets = list(folders) or ["*"]
    always = [f"{f}.{key}" for f in targets
              for key in (*flat.always, "outcome", "failure_reason")]
    always.append(f"{node.id}.failed_folders")
    if node.type is NodeType.SCRIPT:
        always.append(f"{node.id}.failed")
    success = [f"{f}.{key}" for f in targets for key in flat.on_success]
    return _make_writes(tuple(always), tuple(success))


def flat_names(node: Node) -> tuple[str, ...]:
    """The keys a foreach stage would write under its flat names (its outputs, facts and
    the handler's own keys), which it writes only per folder."""
    flat = _flat_writes(node, ())
    return flat.always + flat.on_success


def _flat_writes(node: Node, folders: Sequence[str]) -> StageWrites:
    always: list[str] = []
    success: list[str] = []
    kind = node.type
    if kind in (NodeType.AGENT, NodeType.PROMPT):
        success += [f"response.{node.id}", "last_response"]
        for out in node.outputs:
            success.append(out.name)
            if out.kind is OutputKind.WORK:
                success.append("current_work")
    elif kind is NodeType.SCRIPT:
        always += [f"{node.id}.failed", "tool.output"]
        success += [fact.name for fact in node.facts]
    elif kind is NodeType.PROBE:
        folder = node.folder
        for probe_kind in node.probe_kinds:
            for fact in PROBE_FOLDER_FACTS[probe_kind]:
                success.append(f"{folder}.{fact}" if folder else f"*.{fact}")
            success += list(PROBE_ROLLUPS[probe_kind])
    elif kind is NodeType.PUBLISH:
        # under its folder, each declared folder, or (none declared) any folder, as a probe
        targets = [node.folder] if node.folder else list(folders) or ["*"]
        success += [f"{folder}.{fact}" for folder in targets for fact in PUBLISH_FOLDER_FACTS]
    elif kind is NodeType.WORKTREE_REMOVE:
        success += list(WORKTREE_REMOVE_FACTS)
    elif kind is NodeType.HUMAN:
        success += list(HUMAN_GATE_KEYS)
    elif kind is NodeType.MANAGER_LOOP:
        always += list(CHILD_KEYS)
    return _make_writes(tuple(always), tuple(success))


def writes_freely(node: Node) -> bool:
    """An Attractor agent node (no `outputs=`): its reply may set any non-reserved key, so
    what it writes is not known before the run (SPEC §5, §10)."""
    return node.type in (NodeType.AGENT, NodeType.PROMPT) and not node.outputs


def is_always_available(key: str) -> bool:
    return key in ALWAYS_AVAILABLE or key.startswith(ALWAYS_AVAILABLE_PREFIXES)
