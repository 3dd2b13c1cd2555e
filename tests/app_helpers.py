"""Shared pieces for the GitHub App tests: a fake GitHub whose clock starts at real time
(PyGithub signs an App's JWT on that clock's seconds) with an App installed on `octo`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from delivery.testing.github import FakeGitHub, ManualClock
from delivery.testing.github.apps import FakeApp

APP_ID = 4242
ACCESS_TOKENS = "/access_tokens"


@dataclass
class AppWorld:
    github: FakeGitHub
    app: FakeApp
    clock: ManualClock

    def env(self) -> dict[str, str]:
        return self.github.app_env(self.app)

    def mints(self) -> int:
        return sum(1 for r in self.github.requests
                   if r.method == "POST" and r.path.endswith(ACCESS_TOKENS) and r.status == 201)


@pytest.fixture
def app_world() -> Iterator[AppWorld]:
    clock = ManualClock(now=float(int(time.time())))
    with FakeGitHub(clock=clock) as github:
        for name in ("octo/web", "octo/api"):
            github.create_repo(name, files={"app.py": "print(0)\n"})
        app = github.register_app(APP_ID)
        app.install("octo")
        yield AppWorld(github, app, clock)
