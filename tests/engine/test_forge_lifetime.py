"""The GitHub forge a run opens for itself is closed by the run, on every way out (issue 35):
its connections to GitHub end with the run, not whenever the garbage collector comes by
(or never, while a caller holds the run's exception and with it the run's frames)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.interviewer import Answer
from delivery.engine.runner import RunRequest, World, resume_run, start_run
from delivery.errors import RunInterrupted, RunStoreError
from delivery.forges.github import GitHubForge
from delivery.store.eventlog import EventLog
from delivery.testing.github import FakeGitHub

PUBLISH = """
digraph P {
  graph [goal="g", folders="web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="printf 'hello\\n' > web/hello.txt"]
  ship [type=publish]
  gate [shape=hexagon, label="Merge it?"]
  start -> add -> change -> ship -> gate
  gate -> exit [label="[A] Approve"]
}
"""


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The run's own close, not the collector, must end what it opened: garbage made
    during the test stays where the test can see it."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def connections_to(port: int) -> int:
    """This process's TCP connections to `port` on 127.0.0.1 that are still open (Linux:
    our socket descriptors matched against /proc/net/tcp)."""
    ours = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            ours.add(target[len("socket:["):-1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port == port and fields[3] == "01" and fields[9] in ours:  # ESTABLISHED
            count += 1
    return count


def open_github_forges() -> list[GitHubForge]:
    return [o for o in gc.get_objects() if isinstance(o, GitHubForge) and not o.closed]


def start_paused(tmp_path: Path, github: FakeGitHub) -> tuple[RunRequest, World]:
    github.create_repo("octo/web", files={"README.md": "# web\n"})
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    request = RunRequest(workflow=write_flow(tmp_path, PUBLISH), workspace=workspace,
                         repos={"web": "octo/web"}, branch="delivery/life", gates="pause",
                         run_dir=tmp_path / "run")
    world = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=tmp_path / "cache",
                  environ={**os.environ, **github.env()})
    return request, world


class CtrlCAtTheGate:
    """The person at the terminal presses Ctrl-C when the gate asks."""

    def ask(self, node_id: str, question: str, choices: Sequence[str]) -> Answer | None:
        raise KeyboardInterrupt


@pytest.mark.skipif(not Path("/proc/net/tcp").is_file(), reason="reads Linux's /proc")
def test_a_github_run_stopped_by_ctrl_c_leaves_no_connection_to_github_open(
        tmp_path: Path, no_collector: None) -> None:
    with FakeGitHub() as github:
        request, world = start_paused(tmp_path, github)
        world.interviewer = CtrlCAtTheGate()
        # the caller keeps the exception (a log handler, a test): with it the run's frames
        with pytest.raises(RunInterrupted) as stopped:
            start_run(request, world)
        assert github.count("POST", "/api/v3/repos/octo/web/pulls") == 1  # it did talk
        assert connections_to(github.port) == 0, stopped.traceback
        assert open_github_forges() == []


def test_a_resume_refused_because_the_run_is_being_written_leaves_no_forge_open(
        tmp_path: Path, no_collector: None) -> None:
    with FakeGitHub() as github:
        request, world = start_paused(tmp_path, github)
        assert start_run(request, world).status == "paused"
        with EventLog(tmp_path / "run" / "events.jsonl"), \
                pytest.raises(RunStoreError, match="another process") as refused:
            resume_run(tmp_path / "run", world, {"gate": "A"})
        assert open_github_forges() == [], refused.traceback
