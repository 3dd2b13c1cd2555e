"""The engine reaches GitHub only through the forge and the one GitHub client
(`probes.github_client`): no module of delivery/engine imports an HTTP or GitHub library."""

from __future__ import annotations

import ast
from pathlib import Path

import delivery.engine

HTTP_LIBRARIES = {"httpx", "github", "requests", "urllib3", "aiohttp"}


def imported_roots(source: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_engine_module_imports_an_http_or_github_library() -> None:
    engine = Path(delivery.engine.__file__).parent
    modules = sorted(engine.rglob("*.py"))
    assert len(modules) > 20  # the walk found the engine's modules
    offenders = {str(path.relative_to(engine)): sorted(imported_roots(path) & HTTP_LIBRARIES)
                 for path in modules if imported_roots(path) & HTTP_LIBRARIES}
    assert offenders == {}
