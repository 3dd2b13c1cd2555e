"""A script of benchmarks/ loaded as a module, for the tests that keep each one from rotting
(the scripts are run as files, not imported as a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_benchmark(script: str) -> ModuleType:
    """benchmarks/<script>.py as the module `benchmark_<script>` (registered, as dataclasses
    with postponed annotations look their module up)."""
    name = f"benchmark_{script}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
