"""The pytest plugin shipped with the fake GitHub (enabled in tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

from delivery.testing.github import FakeGitHub, ManualClock


def test_the_fixtures_give_a_started_fake_on_the_manual_clock(
        fake_github: FakeGitHub, fake_github_clock: ManualClock) -> None:
    assert fake_github.clock is fake_github_clock
    answer = httpx.get(f"{fake_github.api_url}/user",
                       headers={"Authorization": f"token {fake_github.token}"})
    assert answer.status_code == 200 and fake_github.count("GET", "/api/v3/user") == 1


def test_the_env_fixture_points_github_variables_at_the_fake(
        fake_github_env: FakeGitHub) -> None:
    assert os.environ["GITHUB_API_URL"] == fake_github_env.api_url
    assert os.environ["GITHUB_TOKEN"] == fake_github_env.token


def test_the_fake_github_needs_no_pytest_at_run_time() -> None:
    code = ("import sys, delivery.testing.github, delivery.forges.github\n"
            "assert 'pytest' not in sys.modules, 'pytest was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
