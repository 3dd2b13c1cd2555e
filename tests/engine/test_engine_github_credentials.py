"""A two-folder delivery on the fake GitHub, watched from outside: every git process the
run starts is a real program (a recording `git` wrapper first on PATH), so the test sees
each command line as `/proc/<pid>/cmdline` would show it to other users of the machine.
The token must reach GitHub as a header and never appear on a command line; the merge
stage reads every folder's PR in one GraphQL request."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run
from delivery.testing import flow
from delivery.testing.github import FakeGitHub

FLOW = flow("""
add [type=worktree_add]
change [shape=parallelogram,
        script="printf 'hi\\n' > web/hello.txt && printf 'hi\\n' > api/hello.txt"]
ship [type=publish]
look [type=probe]
land [type=merge, order="api,web"]
after [type=probe, probe="pr"]
remove [type=worktree_remove]
start -> add -> change -> ship -> look -> land -> after -> remove -> exit
""", goal="Say hello", graph='inputs="ticket", folders="web,api"', name="D")

WRAPPER = """#!/bin/sh
# records each invocation's argv, one argument per line, then runs the real git
{{ printf '%s\\n' "---"; for arg in "$@"; do printf '%s\\n' "$arg"; done; }} >> {log}
exec {real} "$@"
"""


@pytest.fixture
def recorded_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that logs its argv; the log's path."""
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git-argv.log"
    wrapper = bin_dir / "git"
    wrapper.write_text(WRAPPER.format(log=log, real=real))
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def _invocations(log: Path) -> list[list[str]]:
    calls: list[list[str]] = []
    for line in log.read_text().splitlines():
        if line == "---":
            calls.append([])
        elif calls:
            calls[-1].append(line)
    return calls


def _verb(argv: list[str]) -> str:
    """git's subcommand: the first argument that is neither an option nor an option's value."""
    rest = iter(argv)
    for arg in rest:
        if arg in ("-c", "-C", "--git-dir", "--work-tree", "--namespace"):
            next(rest, None)
        elif not arg.startswith("-"):
            return arg
    return ""


@pytest.mark.slow
def test_the_token_reaches_github_as_a_header_and_never_a_command_line(
        tmp_path: Path, recorded_git: Path) -> None:
    with FakeGitHub() as github:
        for name in ("web", "api"):
            github.create_repo(f"octo/{name}", files={"README.md": f"# {name}\n"})
        workspace = tmp_path / "ws"
        workspace.mkdir()
        request = RunRequest(workflow=write_flow(tmp_path, FLOW),
                             inputs={"ticket": "T-7"}, workspace=workspace,
                             repos={"web": "octo/web", "api": "octo/api"})
        world = World(agent=ReplayBackend({}), clock=FakeClock(),
                      git_cache=tmp_path / "cache", environ={**os.environ, **github.env()})
        ran = start_run(request, world)
        assert ran.status == "succeeded", ran.failure_reason
        assert ran.context["pr.state"] == "MERGED"

        calls = _invocations(recorded_git)
        verbs = {_verb(call) for call in calls}
        assert {"fetch", "push", "worktree"} <= verbs  # the wrapper saw the run's git
        secrets = [github.token,
                   base64.b64encode(f"x-access-token:{github.token}".encode()).decode()]
        for call in calls:
            text = "\0".join(call)
            assert not any(secret in text for secret in secrets), call
            assert "extraheader" not in text.lower(), call

        git_requests = [r for r in github.requests if not r.path.startswith("/api/")]
        pushes = [r for r in git_requests if r.path.endswith("git-receive-pack")]
        assert len({r.path for r in pushes}) == 2  # both repositories were pushed to
        assert git_requests and all(r.authorized for r in git_requests)

        # preflight, ship (its change-set look), look, land and after: one GraphQL
        # request each, whatever the number of folders; land's re-read of each PR before
        # its merge; once who the token is (only its own sticky comments are edited); and
        # the stop switch's one read of the delivery:stop labels before ship (before land
        # it uses what the probe `look` read)
        assert github.count("POST", "/api/graphql") == 9
        merges = [r.path for r in github.requests
                  if r.method == "PUT" and r.path.endswith("/merge")]
        assert merges == ["/api/v3/repos/octo/api/pulls/1/merge",
                          "/api/v3/repos/octo/web/pulls/1/merge"]
