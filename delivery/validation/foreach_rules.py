"""The rules of stages that run once per folder (`foreach="folders"`, SPEC §8.1).

Rule ids: `foreach_type` (only agent, prompt and script nodes run per folder),
`only_without_foreach` (`only=` selects folders of a foreach stage, and means nothing
elsewhere), `folder_outside_foreach` (`folder.*` is the folder a foreach stage runs for:
it exists in no other template and in no edge condition) and `per_folder_read` (a flat
read of what only foreach stages write: they write it as `<f>.<name>`). What a foreach
stage writes is modelled in writes.py; `folder.X` inside one reads `<f>.X` of every folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from delivery.lang.attr_values import value_position
from delivery.lang.conditions import Compare, Truthy
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import Attribute, Node, NodeType, Workflow
from delivery.validation.availability import Read
from delivery.validation.writes import FOREACH_TYPES, flat_names, stage_writes

FOLDER = "folder"
# What the engine tells a foreach stage about its folder whatever ran before: its name and
# its check command (`--check F=CMD`, the profile's, or the `check_command` input).
ENGINE_FOLDER_KEYS = frozenset({"folder", "folder.name", "folder.check_command"})
# the stages that work on every folder by themselves
_FOLDER_STAGES = frozenset({NodeType.PROBE, NodeType.PUBLISH, NodeType.MERGE, NodeType.RESPOND,
                            NodeType.WORKTREE_ADD, NodeType.WORKTREE_REMOVE})


def is_foreach(node: Node) -> bool:
    """Whether `node` runs once per folder (a foreach on another type is an error)."""
    return node.foreach and node.type in FOREACH_TYPES


def reads_folder(key: str) -> bool:
    return key == FOLDER or key.startswith("folder.")


def at_attr(rule: str, workflow: Workflow, attr: Attribute, message: str, fix: str, *,
        node: str | None = None, edge: str | None = None, offset: int = 0) -> Diagnostic:
    line, column = value_position(attr.value, offset)
    return Diagnostic(rule, "error", message, workflow.file, line, column, node, edge, fix)


def check_foreach_nodes(workflow: Workflow) -> list[Diagnostic]:
    """`foreach=` on a node that cannot run per folder; `only=` without `foreach=`."""
    found: list[Diagnostic] = []
    for node in workflow.nodes.values():
        attrs = node.attrs
        if "foreach" not in attrs and "only" not in attrs:
            continue  # most nodes: nothing to check
        foreach = attrs.get("foreach")
        if node.foreach and foreach is not None and node.type not in FOREACH_TYPES:
            kind = node.type.value if node.type else "unknown"
            already = f" (a {kind} stage works on every folder already)" \
                if node.type in _FOLDER_STAGES else ""
            found.append(at_attr("foreach_type", workflow, foreach, f"'{node.id}' is a {kind} "
                             "node, which does not run once per folder",
                             "foreach= runs agent, prompt or script nodes once per folder; "
                             f"remove it from this {kind} node{already}", node=node.id))
        only = attrs.get("only")
        if only is not None and foreach is None:
            found.append(at_attr("only_without_foreach", workflow, only, f"'{node.id}' has only= "
                             "but no foreach=, so no folder is selected and only= does "
                             "nothing", 'add foreach="folders" (only= selects the folders '
                             "a foreach stage runs for), or remove only=", node=node.id))
    return found


def only_reads(workflow: Workflow) -> list[Read]:
    """What each foreach stage's `only=` condition reads, before the stage runs."""
    reads: list[Read] = []
    for node in workflow.nodes.values():
        if node.only is None or not is_foreach(node):
            continue
        value = node.attrs["only"].value
        for atom in node.only.atoms():
            if isinstance(atom, (Compare, Truthy)):
                line, column = value_position(value, atom.offset)
                reads.append(Read(atom.key, node.id, None, line, column))
    return reads


def sort_folder_reads(workflow: Workflow, reads: list[Read]
                      ) -> tuple[list[Read], list[Diagnostic], dict[Read, str]]:
    """The reads availability checks, the `folder_outside_foreach` errors, and for each
    read made from a `folder.X` the key as written.

    Inside a foreach stage, `folder.X` reads `<f>.X` of each folder it may run for: with
    declared folders, one read per folder; without, `folder.X` itself, which the writes of
    `*.X` (any folder) cover."""
    if not any(reads_folder(read.key) for read in reads):
        return reads, [], {}
    kept: list[Read] = []
    problems: list[Diagnostic] = []
    origins: dict[Read, str] = {}
    nodes, folders = workflow.nodes, workflow.folders
    for read in reads:
        key = read.key
        if not reads_folder(key):
            kept.append(read)
            continue
        if read.edge is not None or not is_foreach(nodes[read.node]):
            where = f"the condition of {read.edge.name}" if read.edge else \
                f"a template of '{read.node}', which is not a foreach stage"
            problems.append(Diagnostic(
                "folder_outside_foreach", "error", f"'{key}' is read in {where}; folder.* "
                "exists only inside a foreach stage (the folder it runs for)",
                workflow.file, read.line, read.column,
                None if read.edge else read.node, read.edge.name if read.edge else None,
                f"read a folder's key as <f>.{key.partition('.')[2] or 'X'} (e.g. "
                f"{(folders or ('web',))[0]}.{key.partition('.')[2] or 'pr.state'}), or "
                "context[f].X in a loop over folders; or add foreach=\"folders\" to the "
                "node"))
            continue
        if key in ENGINE_FOLDER_KEYS:
            continue
        if not folders:
            kept.append(read)
            continue
        rest = key.partition(".")[2]
        for folder in folders:
            expanded = read._replace(key=f"{folder}.{rest}")
            origins[expanded] = key
            kept.append(expanded)
    return kept, problems, origins


def per_folder_writers(workflow: Workflow) -> dict[str, list[str]]:
    """The flat names foreach stages write only per folder → those stages."""
    table: dict[str, list[str]] = {}
    for node in workflow.nodes.values():
        if not is_foreach(node):
            continue
        own = stage_writes(node, workflow.folders)
        flat = set(own.always) | set(own.on_success)  # `<node>.failed_folders`, `.failed`
        for name in flat_names(node):
            if name not in flat:
                table.setdefault(name, []).append(node.id)
    return table


def per_folder_problem(read: Read, where: str, workflow: Workflow,
                       table: Mapping[str, Iterable[str]]) -> tuple[str, str, str] | None:
    """(rule, message, fix) when `read` is a flat read of what only foreach stages write."""
    parts = read.key.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        writers = sorted(table.get(name, ()))
        if not writers:
            continue
        folder = (workflow.folders or ("web",))[0]
        inside = is_foreach(workflow.nodes[read.node]) and read.edge is None
        fix = (f"read folder.{read.key} here (this stage's folder), or <f>.{read.key} for "
               f"one folder (e.g. {folder}.{read.key})" if inside else
               f"read <f>.{read.key} for one folder (e.g. {folder}.{read.key}) or "
               f"context[f].{read.key} in a loop over folders; inside a foreach stage, "
               f"folder.{read.key}")
        return ("per_folder_read", f"'{read.key}' is read in the {where}, but only foreach "
                f"stages ({', '.join(writers)}) write '{name}', and they write it per "
                f"folder as <f>.{name}, never as '{name}'", fix)
    return None
