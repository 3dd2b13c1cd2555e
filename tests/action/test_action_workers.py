"""The Action's worker jobs of a fanned-out stage (SPEC §13 "Fan-out across runners",
`mode: work`), each run as Actions runs the action's step: two workers racing for one
chunk (one runs it, the other ends `superseded` having run nothing), and a worker on a
self-hosted runner whose workspace and clone cache hold an earlier run's leftovers."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from action_helpers import Actions, Job
from test_action_job import REPO, labeled

from delivery.testing.github import FakeGitHub

TARGETS = {"f1": "octo/f1", "f2": "octo/f2", "f3": "octo/f3", "f4": "octo/f4"}

# one agent call per folder, its edits published once every chunk is in
FLOW = """digraph D {
  graph [goal="Deliver", inputs="ticket,notes?", defaults="notes=''"]
  start [shape=Mdiamond]; exit [shape=Msquare]
  add [type=worktree_add]
  implement [foreach="folders", max_parallel=1,
             prompt="Ticket {{ ticket }}: you work in folder {{ folder.name }}."]
  ship [type=publish]
  start -> add -> implement -> ship -> exit
}
"""


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.create_repo(REPO, files={"README.md": "# control\n"},
                           collaborators={"alice": "write"})
        for target in TARGETS.values():
            server.create_repo(target, files={"README.md": f"# {target}\n"})
        yield server


def actions_for(tmp_path: Path, fake: FakeGitHub, delay: float) -> Actions:
    env = fake.env()
    env.pop("GITHUB_TOKEN")
    runner = Actions(tmp_path, env, REPO)
    (runner.workspace / "flow.dot").write_text(FLOW, encoding="utf-8")
    command = (f"{sys.executable} -m delivery.testing.actions.folder_agent "
               f"--delay {delay} --log {tmp_path / 'agent-calls.log'}")
    (runner.workspace / "delivery.toml").write_text(
        f'[profiles.scripted]\nbackend = "command"\ncommand = "{command}"\ntimeout = "2m"\n',
        encoding="utf-8")
    return runner


def inputs_for(fake: FakeGitHub, **extra: str) -> dict[str, str]:
    repos = "\n".join(f"{name}={target}" for name, target in TARGETS.items())
    return {"workflow": "flow.dot", "repos": repos, "github-token": fake.token,
            "agent": "scripted", "max-runners": "2", **extra}


def fanned_out(actions: Actions, fake: FakeGitHub, *, cache: Path | None = None,
               checkout: Path | None = None) -> str:
    """The labelled issue's job: the run paused for two workers (f1,f2 | f3,f4)."""
    job = actions.job("issues", labeled(), inputs_for(fake), cache=cache, checkout=checkout)
    assert (job.outputs["status"], job.outputs["chunks"]) == ("paused", "[1,2]"), \
        job.stdout + job.stderr
    return job.outputs["run-id"]


def worker_job(actions: Actions, fake: FakeGitHub, run_id: str, chunk: int, *,
               cache: Path | None = None, checkout: Path | None = None) -> Job:
    return actions.job("workflow_dispatch", {}, inputs_for(fake, mode="work", **{
        "run-id": run_id, "chunk": str(chunk)}), cache=cache, checkout=checkout)


def _calls(tmp_path: Path) -> Counter[str]:
    log = tmp_path / "agent-calls.log"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return Counter(line.split()[0] for line in lines)


def _published(fake: FakeGitHub, target: str) -> dict[str, str]:
    """The files of the PR's branch in `target` (the run's one PR there)."""
    [pr] = fake.repository(target).pulls.values()
    where = fake.repository(target).path
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", pr.head], cwd=where,
                           capture_output=True, text=True, check=True).stdout.split()
    return {name: subprocess.run(["git", "show", f"{pr.head}:{name}"], cwd=where,
                                 capture_output=True, text=True, check=True).stdout
            for name in names}


def test_two_workers_racing_for_a_chunk_run_it_once_and_the_loser_is_superseded(
        tmp_path: Path, fake: FakeGitHub) -> None:
    actions = actions_for(tmp_path, fake, delay=1.0)
    run_id = fanned_out(actions, fake)
    with ThreadPoolExecutor(max_workers=2) as pool:
        racing = list(pool.map(lambda _: worker_job(actions, fake, run_id, 1), range(2)))
    story = "\n".join(job.stdout + job.stderr for job in racing)
    assert sorted(job.outputs["status"] for job in racing) == ["chunk_done", "superseded"], \
        story
    assert all(job.code == 0 for job in racing), story
    [lost] = [job for job in racing if job.outputs["status"] == "superseded"]
    assert "chunk 1" in lost.stdout, story
    assert _calls(tmp_path) == {"f1": 1, "f2": 1}  # the chunk's folders, once each


@pytest.mark.slow  # five Action jobs, two runs: about 20 s (a person's files at stake)
def test_a_self_hosted_worker_amid_an_earlier_runs_leftovers_runs_its_chunk_from_the_run(
        tmp_path: Path, fake: FakeGitHub) -> None:
    actions = actions_for(tmp_path, fake, delay=0.1)
    machine = tmp_path / "self-hosted"  # its checkout and clone cache kept between jobs
    kept = {"checkout": machine / "work", "cache": machine / "cache"}
    # an earlier run of the ticket, fanned out and run in part on this machine, left its
    # worktrees in the checkout (one with an edit and a person's notes), a chunk's
    # directory and worktrees, and clones at the commit it was based on
    earlier = fanned_out(actions, fake, **kept)
    assert worker_job(actions, fake, earlier, 1, **kept).outputs["status"] == "chunk_done"
    notes = kept["checkout"] / "f1" / "notes.txt"
    notes.write_text("a person's notes\n", encoding="utf-8")
    edited = kept["checkout"] / "f1" / "README.md"
    edited.write_text("an edit of the earlier run\n", encoding="utf-8")
    for target in TARGETS.values():  # the targets moved on since: the clones are stale
        fake.push_files(target, "main", {"NEW.md": "since then\n"})
    (tmp_path / "agent-calls.log").unlink()

    run_id = fanned_out(actions, fake)
    stale = kept["checkout"] / ".delivery" / "work" / f"{run_id}-1"
    stale.mkdir(parents=True)  # a chunk directory a killed attempt left
    (stale / "checkpoint.json").write_text("{ torn", encoding="utf-8")
    worker = worker_job(actions, fake, run_id, 1, **kept)
    assert worker.outputs["status"] == "chunk_done", worker.stdout + worker.stderr
    last = worker_job(actions, fake, run_id, 2)  # a hosted runner continues the run
    assert last.outputs["status"] == "succeeded", last.stdout + last.stderr
    assert _calls(tmp_path) == {name: 1 for name in TARGETS}
    for name, target in TARGETS.items():  # this run's edits alone, on today's main
        assert _published(fake, target) == {
            "README.md": f"# {target}\n", "NEW.md": "since then\n",
            "CHANGES.md": f"- {name}: changed by the campaign\n"}, target
    # the earlier run's worktree as it was
    assert notes.read_text(encoding="utf-8") == "a person's notes\n"
    assert edited.read_text(encoding="utf-8") == "an edit of the earlier run\n"
