"""No import cycle among the modules of delivery/ and probes/ (issue 35).

import-linter's `acyclic_siblings` contract (pyproject.toml) catches cycles between sibling
packages and modules; this checker also sees a module and its own package's __init__ in a
cycle, and reads the source itself so that it cannot be fooled by a stale graph cache.
Every import counts, including those inside functions (a function-level import only hides
a cycle until the function runs); imports under `if TYPE_CHECKING:` do not, as they never
run."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("delivery", "probes")


def module_files() -> dict[str, Path]:
    """Every module of the checked packages by dotted name (a package by its __init__)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_nodes(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """The statements that can run, at any depth, with `if TYPE_CHECKING:` bodies left out
    (their `else:` branches kept: those run)."""
    for node in nodes:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _run_time_nodes(node.orelse)
            continue
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _run_time_nodes([child])
            else:
                yield from _expression_nodes(child)


def _expression_nodes(node: ast.AST) -> Iterator[ast.AST]:
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            yield from _run_time_nodes([child])
        else:
            yield from _expression_nodes(child)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The checked modules that `module` imports when it runs, relative imports resolved;
    `from package import name` counts as importing `package.name` when that is a module."""
    is_package = path.name == "__init__.py"
    here = module.split(".") if is_package else module.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    imported: set[str] = set()
    for node in _run_time_nodes(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.add(_nearest_module(alias.name, modules))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here[: len(here) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                imported.add(candidate if candidate in modules else _nearest_module(base, modules))
    imported.discard("")
    imported.discard(module)
    return {name for name in imported if name in modules}


def _nearest_module(name: str, modules: dict[str, Path]) -> str:
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, with
    one shortest cycle through its first module spelled out for the failure message."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One shortest way from the component's first module back to itself."""
    start = component[0]
    members = set(component)
    paths: dict[str, list[str]] = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    return component


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    return f"{' -> '.join(shortest_cycle(graph, component))} (all: {', '.join(component)})"


def test_delivery_and_probes_have_no_import_cycle() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(describe(graph, c) for c in found)


def test_the_checker_sees_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg import b\n")
    (tmp_path / "pkg" / "b.py").write_text("def later() -> None:\n    from . import a\n")
    (tmp_path / "pkg" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    modules = {name: tmp_path / "pkg" / f"{name.split('.')[-1]}.py"
               for name in ("pkg.a", "pkg.b", "pkg.c")}
    modules["pkg"] = tmp_path / "pkg" / "__init__.py"
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert graph["pkg.c"] == set()
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
