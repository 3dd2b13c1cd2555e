"""The small languages inside attributes: `inputs`, `defaults`, `outputs`, `facts`, `probe`.

Each parser returns typed objects or raises DeclarationError with the offset of the
problem inside the attribute value, so the loader can point at the exact column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from delivery.errors import DeclarationError

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")

# Engine keys (SPEC §3): exact names and namespaces.
ENGINE_KEYS = frozenset(
    {
        "goal",
        "outcome",
        "failure_reason",
        "failure_class",
        "failure_signature",
        "preferred_label",
        "last_stage",
        "last_response",
        "current_node",
        "current_work",
    }
)
ENGINE_NAMESPACES = ("graph", "inputs", "response", "parallel", "internal", "human.gate",
                     "stack.child")
PROBE_NAMESPACES = ("pr", "threads", "worktree", "diff")

PROBE_KINDS = ("pr", "threads", "diff", "worktree")
# Facts a probe of each kind writes per folder (`<folder>.<fact>`).
PROBE_FOLDER_FACTS: dict[str, tuple[str, ...]] = {
    "pr": ("pr.state", "pr.ready", "pr.number", "pr.url", "pr.raw"),
    "threads": ("threads.unresolved", "threads.ids"),
    "diff": ("diff.files", "diff.insertions", "diff.deletions", "diff.empty"),
    "worktree": ("worktree.exists", "worktree.dirty", "worktree.branch", "worktree.head"),
}
# Roll-ups a probe of each kind writes run-wide.
PROBE_ROLLUPS: dict[str, tuple[str, ...]] = {
    "pr": ("pr.state", "pr.ready"),
    "threads": ("threads.unresolved",),
    "diff": (),
    "worktree": (),
}
WORKTREE_REMOVE_FACTS = ("worktree.clean", "worktree.status")


# The names without a dot that reserved_reason refuses beyond ENGINE_KEYS and the folders:
# `context`, `folder` (a foreach stage's own folder, SPEC §8.1), a namespace itself
# (`human` for `human.gate`) and a probe namespace.
_RESERVED_WORDS = frozenset({"context", "human", "folder", *PROBE_NAMESPACES,
                             *(space for space in ENGINE_NAMESPACES if "." not in space)})


def reserved_reason(name: str, folders: tuple[str, ...] = ()) -> str | None:
    """Why `name` may not be declared as an input, output or fact; None when it may."""
    if "." not in name and name not in _RESERVED_WORDS and name not in ENGINE_KEYS and \
            name not in folders:
        return None  # the common plain name, without the walk below
    return _reserved_reason(name, folders)


def _reserved_reason(name: str, folders: tuple[str, ...]) -> str | None:
    if name in ENGINE_KEYS:
        return f"'{name}' is an engine key"
    root = name.split(".", 1)[0]
    if root == "context":
        return "'context.' is the prefix that names the context itself"
    if root == "folder":
        return "'folder' is reserved: folder.* is the folder a foreach stage runs for"
    for space in ENGINE_NAMESPACES:
        if (name == space or name.startswith(space + ".")
                or (space == "human.gate" and root == "human")):
            return f"'{space}.*' is the engine's namespace"
    for space in PROBE_NAMESPACES:
        if root == space:
            return f"'{space}.*' is written by probes"
    if root in folders:
        return f"'{root}.*' holds the probe facts of folder '{root}'"
    parts = name.split(".")
    if len(parts) >= 2 and parts[1] in PROBE_NAMESPACES:
        return f"'<folder>.{parts[1]}.*' holds per-folder probe facts"
    return None


@dataclass(frozen=True, slots=True)
class InputDecl:
    name: str
    optional: bool
    offset: int


@dataclass(frozen=True, slots=True)
class DefaultValue:
    name: str
    value: str
    offset: int


class OutputKind(str, Enum):  # noqa: UP042  (str() stays as it was)
    CHOICE = "choice"
    TEXT = "text"
    JSON = "json"
    WORK = "work"


# looked up per declared output: an Enum's call and its iteration are Python code
_OUTPUT_KINDS = {kind.value: kind for kind in OutputKind}
_OUTPUT_KIND_LIST = ", ".join(_OUTPUT_KINDS)


@dataclass(frozen=True, slots=True)
class OutputDecl:
    name: str
    kind: OutputKind
    offset: int


@dataclass(frozen=True, slots=True)
class FactDecl:
    name: str
    offset: int


def _split_list(text: str) -> list[tuple[str, int]]:
    """Split `a, b ,c` into stripped items with the offset where each starts."""
    items: list[tuple[str, int]] = []
    start = 0
    for part in text.split(","):
        stripped = part.strip()
        offset = start + (len(part) - len(part.lstrip()))
        items.append((stripped, offset))
        start += len(part) + 1
    if len(items) == 1 and items[0][0] == "":
        return []
    return items


def parse_inputs(text: str) -> list[InputDecl]:
    decls: list[InputDecl] = []
    seen: set[str] = set()
    for item, offset in _split_list(text):
        optional = item.endswith("?")
        name = item[:-1].rstrip() if optional else item
        if not name:
            raise DeclarationError(
                "inputs", text, offset, "empty input name", "write inputs=\"work,notes?\""
            )
        if not IDENTIFIER.match(name):
            raise DeclarationError(
                "inputs", text, offset, f"input name '{name}' is not an identifier",
                "input names match [A-Za-z_][A-Za-z0-9_]*; '?' after a name marks it optional",
            )
        if name == "goal":
            raise DeclarationError(
                "inputs", text, offset, "'goal' is built in",
                "remove it from inputs; set it with --goal, defaults or the graph's goal",
            )
        if name in seen:
            raise DeclarationError(
                "inputs", text, offset, f"input '{name}' is declared twice", "declare it once"
            )
        seen.add(name)
        decls.append(InputDecl(name, optional, offset))
    return decls


def parse_defaults(text: str) -> list[DefaultValue]:
    """`goal='Review this project',notes='Owner''s notes'`."""
    values: list[DefaultValue] = []
    i = 0
    n = len(text)
    fix = "write defaults=\"name='value',other='it''s'\" (single quotes, '' for a quote)"
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            if values:
                raise DeclarationError("defaults", text, i, "trailing ','", fix)
            return values
        start = i
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(text, i)
        if m is None:
            raise DeclarationError("defaults", text, i, "expected a name", fix)
        name = m.group()
        i = m.end()
        while i < n and text[i].isspace():
            i += 1
        if i >= n or text[i] != "=":
            raise DeclarationError("defaults", text, i, f"expected '=' after '{name}'", fix)
        i += 1
        while i < n and text[i].isspace():
            i += 1
        if i >= n or text[i] != "'":
            raise DeclarationError(
                "defaults", text, i, f"the value of '{name}' must be single-quoted", fix
            )
        i += 1
        chunks: list[str] = []
        while True:
            if i >= n:
                raise DeclarationError(
                    "defaults", text, i, f"unterminated value for '{name}'", fix
                )
            if text[i] == "'":
                if i + 1 < n and text[i + 1] == "'":
                    chunks.append("'")
                    i += 2
                    continue
                i += 1
                break
            chunks.append(text[i])
            i += 1
        if any(v.name == name for v in values):
            raise DeclarationError("defaults", text, start, f"'{name}' has two defaults", fix)
        values.append(DefaultValue(name, "".join(chunks), start))
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return values
        if text[i] != ",":
            raise DeclarationError("defaults", text, i, "expected ',' between defaults", fix)
        i += 1


def parse_outputs(text: str) -> list[OutputDecl]:
    decls: list[OutputDecl] = []
    kinds = _OUTPUT_KIND_LIST
    for item, offset in _split_list(text):
        name, sep, kind_text = item.partition(":")
        name, kind_text = name.strip(), kind_text.strip()
        if not sep:
            raise DeclarationError(
                "outputs", text, offset, f"'{item}' has no kind",
                f"write name:kind with kind one of {kinds}",
            )
        if not DOTTED_NAME.match(name):
            raise DeclarationError(
                "outputs", text, offset, f"output name '{name}' is not a dotted identifier",
                "names look like verdict or review.summary",
            )
        kind = _OUTPUT_KINDS.get(kind_text)
        if kind is None:
            raise DeclarationError(
                "outputs", text, offset + item.index(":") + 1,
                f"unknown output kind '{kind_text}'", f"use one of {kinds}",
            )
        if any(d.name == name for d in decls):
            raise DeclarationError(
                "outputs", text, offset, f"output '{name}' is declared twice", "declare it once"
            )
        decls.append(OutputDecl(name, kind, offset))
    if sum(1 for d in decls if d.kind is OutputKind.WORK) > 1:
        raise DeclarationError(
            "outputs", text, 0, "more than one work output",
            "a stage saves at most one work scope (it becomes current_work)",
        )
    return decls


def parse_facts(text: str) -> list[FactDecl]:
    decls: list[FactDecl] = []
    for name, offset in _split_list(text):
        if not DOTTED_NAME.match(name):
            raise DeclarationError(
                "facts", text, offset, f"fact name '{name}' is not a dotted identifier",
                "names look like tests.passed",
            )
        if any(d.name == name for d in decls):
            raise DeclarationError(
                "facts", text, offset, f"fact '{name}' is declared twice", "declare it once"
            )
        decls.append(FactDecl(name, offset))
    return decls


def parse_probe_kinds(text: str) -> tuple[str, ...]:
    kinds: list[str] = []
    for item, offset in _split_list(text):
        if item not in PROBE_KINDS:
            raise DeclarationError(
                "probe", text, offset, f"unknown probe kind '{item}'",
                f"use any of {', '.join(PROBE_KINDS)}",
            )
        if item not in kinds:
            kinds.append(item)
    if not kinds:
        raise DeclarationError("probe", text, 0, "no probe kind", "omit probe= to probe everything")
    return tuple(kinds)


def parse_folder_list(text: str) -> tuple[str, ...]:
    names: list[str] = []
    for item, offset in _split_list(text):
        if not IDENTIFIER.match(item):
            raise DeclarationError(
                "folders", text, offset, f"folder name '{item}' is not an identifier",
                "folder names match [A-Za-z_][A-Za-z0-9_]*",
            )
        reason = reserved_reason(item)
        if reason:
            raise DeclarationError("folders", text, offset, f"folder '{item}': {reason}",
                                   "choose another folder name")
        names.append(item)
    return tuple(names)
