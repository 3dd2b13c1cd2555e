"""Fixtures shared by the whole suite: the fake GitHub's, from the plugin we ship."""

from __future__ import annotations

import pytest

from delivery.testing.github import FakeGitHub, ManualClock

pytest_plugins = ["delivery.testing.github.pytest_plugin"]


@pytest.fixture
def clock(fake_github_clock: ManualClock) -> ManualClock:
    """The fake GitHub's clock, under the short name the GitHub tests use."""
    return fake_github_clock


@pytest.fixture
def fake(fake_github: FakeGitHub) -> FakeGitHub:
    """A started fake GitHub (`fake_github`), under the short name the GitHub tests use."""
    return fake_github


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", default=False,
                     help="deeper soak and chaos runs (tests/soak; also DELIVERY_SOAK=long)")
