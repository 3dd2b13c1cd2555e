"""The rules of stages that run once per folder (`foreach="folders"`, SPEC §8.1).

Rule ids: `foreach_type` (only agent, prompt and script nodes run per folder),
`only_without_foreach` (`only=` selects folders of a foreach stage, and means nothing
elsewhere), `folder_outside_foreach` (`folder.*` is the folder a foreach stage runs for:
it exists in no other template and in no edge condition) and `per_folder_read` (a flat
read of what only foreach stages write: they write it as `<f>.<name>`). What a foreach
stage writes is modelled in writes.py; `folder.X` inside one reads `<f>.X` of every folder.
"""

from __future__ import annotations

from operator import itemgetter

from delivery.lang.attr_values import value_position
from delivery.lang.conditions import Compare, Truthy
from delivery.lang.declarations import PROBE_NAMESPACES
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


class FolderReads:
    """The validator's view of `folder.*` reads and per-folder writes, for one workflow.

    Inside a foreach stage, `folder.X` reads `<f>.X` of each folder it may run for: with
    declared folders, one read per folder (reported once, as `folder.X`); without,
    `folder.X` itself, which the writes of `*.X` (any folder) cover."""

    def __init__(self, workflow: Workflow) -> None:
        self.workflow = workflow
        self.origins: dict[Read, str] = {}  # a read of `<f>.X` made from `folder.X`
        self.reported: set[tuple[str, int, int]] = set()
        self._per_folder: dict[str, list[str]] | None = None

    def sort(self, reads: list[Read]) -> tuple[list[Read], list[Diagnostic]]:
        """The reads availability checks, and the `folder_outside_foreach` errors."""
        # one search of the keys joined (in C) rather than a test per read: a large
        # workflow has one read per template name and clause, and most read no folder.*
        if "\nfolder" not in "\n" + "\n".join(map(itemgetter(0), reads)):
            return reads, []
        kept: list[Read] = []
        problems: list[Diagnostic] = []
        workflow = self.workflow
        nodes, folders = workflow.nodes, workflow.folders
        for read in reads:
            key = read.key
            if not reads_folder(key):
                kept.append(read)
            elif read.edge is not None or not is_foreach(nodes[read.node]):
                problems.append(self._outside(read))
            elif key in ENGINE_FOLDER_KEYS:
                continue
            elif not folders:
                kept.append(read)
            else:
                rest = key.partition(".")[2]
                for folder in folders:
                    expanded = read._replace(key=f"{folder}.{rest}")
                    self.origins[expanded] = key
                    kept.append(expanded)
        return kept, problems

    def _outside(self, read: Read) -> Diagnostic:
        where = f"the condition of {read.edge.name}" if read.edge else \
            f"a template of '{read.node}', which is not a foreach stage"
        rest = read.key.partition(".")[2]
        example = f"{(self.workflow.folders or ('web',))[0]}.{rest or 'pr.state'}"
        return Diagnostic(
            "folder_outside_foreach", "error", f"'{read.key}' is read in {where}; folder.* "
            "exists only inside a foreach stage (the folder it runs for)",
            self.workflow.file, read.line, read.column,
            None if read.edge else read.node, read.edge.name if read.edge else None,
            f"read a folder's key as <f>.{rest or 'X'} (e.g. {example}), or context[f].X in "
            "a loop over folders; or add foreach=\"folders\" to the node")

    def written_names(self, read: Read) -> list[str]:
        """The written keys that would make `read` available: its key and the namespaces
        above it, and for a folder's key also `*.X` (written for any folder)."""
        parts = read.key.split(".")
        names = [".".join(parts[:cut]) for cut in range(1, len(parts) + 1)]
        if read in self.origins or parts[0] == FOLDER:
            names += ["*." + ".".join(parts[1:cut]) for cut in range(2, len(parts) + 1)]
        return names

    def subject(self, read: Read) -> str | None:
        """How a diagnostic names the read key; None when its `folder.X` was reported."""
        origin = self.origins.get(read)
        if origin is None:
            return f"'{read.key}'"
        if (origin, read.line, read.column) in self.reported:
            return None
        self.reported.add((origin, read.line, read.column))
        return f"'{origin}' (for folder '{read.key.partition('.')[0]}': '{read.key}')"

    def nothing_writes_fix(self, read: Read) -> str | None:
        """The fix of a folder's key nothing writes (None for another key)."""
        if read not in self.origins and not reads_folder(read.key):
            return None
        rest = read.key.partition(".")[2]
        if rest.partition(".")[0] in PROBE_NAMESPACES:
            return (f"probe every folder before this stage (a type=probe node without "
                    f"folder=), which writes <f>.{rest} for each")
        return (f"write {rest} for every folder before this stage: an output of an earlier "
                f"foreach stage (outputs=\"{rest}:text\", foreach=\"folders\"), a fact of "
                "a foreach script, or a probe's fact")

    def per_folder_problem(self, read: Read, where: str) -> tuple[str, str, str] | None:
        """(rule, message, fix) when `read` is a flat read of what only foreach stages
        write."""
        if read in self.origins:
            return None
        if self._per_folder is None:
            self._per_folder = per_folder_writers(self.workflow)
        table, workflow = self._per_folder, self.workflow
        parts = read.key.split(".")
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            writers = sorted(table.get(name, ()))
            if not writers:
                continue
            key, folder = read.key, (workflow.folders or ("web",))[0]
            inside = is_foreach(workflow.nodes[read.node]) and read.edge is None
            fix = (f"read folder.{key} here (this stage's folder), or <f>.{key} for one "
                   f"folder (e.g. {folder}.{key})" if inside else
                   f"read <f>.{key} for one folder (e.g. {folder}.{key}) or "
                   f"context[f].{key} in a loop over folders; inside a foreach stage, "
                   f"folder.{key}")
            return ("per_folder_read", f"'{key}' is read in the {where}, but only foreach "
                    f"stages ({', '.join(writers)}) write '{name}', and they write it per "
                    f"folder as <f>.{name}, never as '{name}'", fix)
        return None


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
