"""Shared fixtures. The harness itself is the shipped `delivery.testing` package (FakeClock,
`run_dot`, `invoke`), so tests and embedders use the same tools; `tests/engine_helpers.py`
and `tests/durability_driver.py` hold what only these tests need."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from delivery.testing.clock import FakeClock
from delivery.testing.runs import Ran, run_dot


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., Ran]:
    """`run(DOT, replies={...}, ...)`: run a workflow text in this test's folder."""

    def run_here(dot: str, **kwargs: Any) -> Ran:
        return run_dot(tmp_path, dot, **kwargs)

    return run_here
