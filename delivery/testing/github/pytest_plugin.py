"""pytest fixtures for the fake GitHub. Enable them in a `conftest.py`:

    pytest_plugins = ["delivery.testing.github.pytest_plugin"]

- `fake_github_clock`: a `ManualClock` (time moves only when slept on);
- `fake_github`: a started `FakeGitHub` on that clock, stopped after the test;
- `fake_github_env`: the same fake, with its `GITHUB_API_URL`, `GITHUB_GRAPHQL_URL`,
  `GITHUB_SERVER_URL` and `GITHUB_TOKEN` set in the environment for the test.

pytest is imported here only: `delivery` and `delivery.testing.github` never import this
module, so pytest stays a test-time dependency.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from delivery.testing.github.clock import ManualClock
from delivery.testing.github.server import FakeGitHub


@pytest.fixture
def fake_github_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake_github(fake_github_clock: ManualClock) -> Iterator[FakeGitHub]:
    with FakeGitHub(clock=fake_github_clock) as server:
        yield server


@pytest.fixture
def fake_github_env(fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    for key, value in fake_github.env().items():
        monkeypatch.setenv(key, value)
    return fake_github
