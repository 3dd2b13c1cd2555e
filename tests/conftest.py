"""Fixtures shared by the whole suite: the fake GitHub's, from the plugin we ship, and the
engine's harness (`delivery.testing`: FakeClock, `run_dot`, `invoke`), so tests and
embedders use the same tools; `tests/engine_helpers.py` and `tests/durability_driver.py`
hold what only these tests need."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from long_runs import is_long

from delivery.testing.clock import FakeClock
from delivery.testing.github import FakeGitHub, ManualClock
from delivery.testing.runs import Ran, run_dot

pytest_plugins = ["delivery.testing.github.pytest_plugin"]


@pytest.fixture(autouse=True)
def _not_on_an_actions_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite may itself run on GitHub Actions (GITHUB_ACTIONS=true), where the CLI
    wraps its output in stop-commands; tests that want Action mode set it themselves."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.fixture(autouse=True)
def _writes_not_paced_in_real_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake GitHub answers in milliseconds: a second between writes would be real
    waiting in every run test. Pacing is tested on a ManualClock (tests/forges/
    test_pacing.py) and in the 50-folder benchmark, which leave this variable out."""
    monkeypatch.setenv("DELIVERY_WRITE_SPACING", "0")


@pytest.fixture
def clock(fake_github_clock: ManualClock) -> ManualClock:
    """The fake GitHub's clock, under the short name the GitHub tests use."""
    return fake_github_clock


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    """A started fake GitHub (`fake_github`), under the short name the GitHub tests use."""
    return fake_github


@pytest.fixture
def fake_clock() -> FakeClock:
    """The engine's clock for tests: sleeps recorded, returning at once."""
    return FakeClock()


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., Ran]:
    """`run(DOT, replies={...}, ...)`: run a workflow text in this test's folder."""

    def run_here(dot: str, **kwargs: Any) -> Ran:
        return run_dot(tmp_path, dot, **kwargs)

    return run_here


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", default=False,
                     help="deeper soak and chaos runs and the tests marked long (campaigns "
                     "of 50-200 repositories); also DELIVERY_SOAK=long")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if is_long(config):
        return
    skip = pytest.mark.skip(reason="a long run: give --long (or DELIVERY_SOAK=long)")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)
