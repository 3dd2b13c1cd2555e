"""Folder stages work on folders concurrently (SPEC §7.1, §8.1; issue 36 item 4):
worktree_add, publish, the probe's per-folder work and worktree_remove each have up to
`max_parallel` folders in flight (the node's, the graph's, `--max-parallel`, default 8),
with the same PRs, facts and context keys as one folder at a time, and a folder that fails
neither stops nor spoils the others. Concurrency is seen through a forge whose call waits
for its companions (tests/folder_stage_helpers.py), never through timing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from engine_helpers import FakeClock, write_flow
from folder_stage_helpers import FoldersAtOnce, many_remotes, repos_of

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.forges.local import LocalForge
from delivery.testing import flow
from delivery.testing.github import FakeGitHub

TICKET = "https://tracker.example/browse/T-36"
TOKEN_SHAPED = "ghp_" + "A1b2C3d4E5" * 4


def _changes(folders: str, line: str = "more") -> str:
    """A script stage appending `line` to app.txt in each of `folders` (space-separated)."""
    return f"for d in {folders}; do printf '{line}\\\\n' >> $d/app.txt; done"


def lifecycle(changed: str, graph: str = "") -> str:
    return flow(f"""
    add [type=worktree_add]
    change [shape=parallelogram, script="{_changes(changed)}"]
    ship [type=publish]
    look [type=probe]
    remove [type=worktree_remove]
    start -> add -> change -> ship -> look -> remove -> exit
    """, goal="Say more", graph=f'inputs="ticket"{graph}')


def start(root: Path, dot: str, repos: dict[str, str], forge: LocalForge,
          max_parallel: int | None = None) -> RunOutcome:
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    request = RunRequest(workflow=write_flow(root, dot), inputs={"ticket": TICKET},
                         workspace=workspace, repos=repos, gates="pause",
                         max_parallel=max_parallel)
    world = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=root / "cache",
                  forge=forge)
    return start_run(request, world)


def pulls(remote: Path) -> list[dict[str, Any]]:
    records = remote / "delivery" / "pulls.json"
    return list(json.loads(records.read_text())["pulls"]) if records.exists() else []


def test_worktree_add_publish_and_remove_have_max_parallel_folders_in_flight(
        tmp_path: Path) -> None:
    remotes = many_remotes(tmp_path / "remotes", 8)
    forge = FoldersAtOnce("git_remote", together=4)
    ran = start(tmp_path, lifecycle(" ".join(remotes)), repos_of(remotes), forge,
                max_parallel=4)
    assert ran.status == "succeeded", ran.failure_reason
    # every folder's forge remote is asked once by worktree_add, twice by publish (fetch,
    # push) and once by worktree_remove, each time with three other folders in flight
    assert forge.held == 8 * 4
    assert all(len(pulls(remote)) == 1 for remote in remotes.values())
    assert ran.context["worktree.clean"] is True


def test_the_probe_works_on_folders_at_once(tmp_path: Path) -> None:
    remotes = many_remotes(tmp_path / "remotes", 6)
    dot = flow(f"""
    add [type=worktree_add, max_parallel=1]
    change [shape=parallelogram, script="{_changes('f02 f05')}"]
    gate [shape=hexagon, label="Look?"]
    look [type=probe, probe="diff,worktree"]
    start -> add -> change -> gate
    gate -> look [label="yes"]
    look -> exit
    """, graph='inputs="ticket"')
    # worktree_add works on one folder at a time (its node says so); a resume asks the
    # base branches again, for the first time in the probe's diffs: three folders at once
    forge = FoldersAtOnce("default_branch", together=3)
    paused = start(tmp_path, dot, repos_of(remotes), forge, max_parallel=3)
    assert paused.status == "paused", paused.failure_reason
    assert forge.held == 0
    world = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=tmp_path / "cache",
                  forge=forge)
    ran = resume_run(paused.run_dir, world, answers={"gate": "yes"})
    assert ran.status == "succeeded", ran.failure_reason
    assert forge.held == 6
    assert [ran.context[f"{folder}.diff.files"] for folder in remotes] == [0, 1, 0, 0, 1, 0]
    assert all(ran.context[f"{folder}.worktree.exists"] for folder in remotes)


def test_a_resumed_run_keeps_the_max_parallel_it_started_with(tmp_path: Path) -> None:
    remotes = many_remotes(tmp_path / "remotes", 2)
    dot = flow("""
    gate [shape=hexagon, label="Go on?"]
    add [type=worktree_add]
    start -> gate
    gate -> add [label="yes"]
    add -> exit
    """, graph='inputs="ticket"')
    # were the two folders worked on at once, they would both be held (and meet)
    forge = FoldersAtOnce("git_remote", together=2)
    paused = start(tmp_path, dot, repos_of(remotes), forge, max_parallel=1)
    assert paused.status == "paused", paused.failure_reason
    world = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=tmp_path / "cache",
                  forge=forge)
    ran = resume_run(paused.run_dir, world, answers={"gate": "yes"})
    assert ran.status == "succeeded", ran.failure_reason
    assert forge.held == 0  # one folder at a time, as the run was started with
    assert all(ran.context[f"{folder}.worktree.exists"] for folder in remotes)


def _comparable(ran: RunOutcome, root: Path) -> dict[str, Any]:
    """The context without what differs between two runs of the same work: the run's id,
    its paths, commit ids and times."""
    text = json.dumps({key: value for key, value in ran.context.items()
                       if not key.startswith("internal.") and key not in ("outcome",)},
                      sort_keys=True)
    text = text.replace(str(root.resolve()), "ROOT").replace(str(root), "ROOT")
    text = re.sub(r"\b[0-9a-f]{40}\b", "SHA", text)
    return dict(json.loads(text))


def test_four_folders_at_once_give_the_same_prs_facts_and_keys_as_one_at_a_time(
        tmp_path: Path) -> None:
    seen: dict[int, tuple[dict[str, Any], list[str]]] = {}
    for limit in (1, 4):
        root = tmp_path / f"limit{limit}"
        remotes = many_remotes(root / "remotes", 12)
        changed = " ".join(folder for index, folder in enumerate(remotes) if index % 3 != 1)
        ran = start(root, lifecycle(changed), repos_of(remotes), LocalForge(),
                    max_parallel=limit)
        assert ran.status == "succeeded", ran.failure_reason
        bodies = [str(pull["body"]).replace(ran.run_id, "RUN").replace(str(root.resolve()),
                                                                       "ROOT")
                  for remote in remotes.values() for pull in pulls(remote)]
        seen[limit] = (_comparable(ran, root), bodies)
    assert seen[4] == seen[1]
    context, bodies = seen[4]
    assert len(bodies) == 8 and context["f02.pr.number"] == "" and context["f01.pr.number"] == 1
    assert bodies[0].count("- f") == 8  # each body links every sibling PR, in folder order
    assert bodies[0].index("- f01:") < bodies[0].index("- f12:")
    assert context["f03.diff.files"] == 1 and context["f02.diff.files"] == 0


def test_a_folder_that_fails_stops_neither_the_others_nor_their_links(
        tmp_path: Path) -> None:
    remotes = many_remotes(tmp_path / "remotes", 6)
    # put together by the script (the run's copy of a workflow holds no token shape)
    secret = (f"for d in f02 f05; do printf 'key: ghp_%s\\\\n' {TOKEN_SHAPED[4:]} "
              ">> $d/app.txt; done")
    dot = flow(f"""
    add [type=worktree_add]
    change [shape=parallelogram, script="{_changes(' '.join(remotes))}"]
    leak [shape=parallelogram, script="{secret}"]
    ship [type=publish]
    start -> add -> change -> leak -> ship -> exit
    """, graph='inputs="ticket"')
    ran = start(tmp_path, dot, repos_of(remotes), LocalForge(), max_parallel=3)
    assert ran.status == "failed"
    reason = ran.failure_reason
    assert reason.startswith("folder 'f02': app.txt: holds a secret")
    assert "; folder 'f05': app.txt: holds a secret" in reason
    assert "f01" not in reason and "f06" not in reason
    published = [folder for folder in remotes if folder not in ("f02", "f05")]
    assert [ran.context[f"{folder}.pr.number"] for folder in published] == [1, 1, 1, 1]
    assert pulls(remotes["f02"]) == [] and pulls(remotes["f05"]) == []
    for folder in published:
        [pull] = pulls(remotes[folder])
        assert [line.split(":")[0] for line in str(pull["body"]).splitlines()
                if line.startswith("- ")] == [f"- {other}" for other in published]


def test_publish_on_github_with_folders_at_once_opens_one_linked_pr_per_repository(
        tmp_path: Path) -> None:
    folders = [f"r{index}" for index in range(1, 7)]
    dot = flow(f"""
    add [type=worktree_add]
    change [shape=parallelogram, script="{_changes(' '.join(folders))}"]
    ship [type=publish]
    again [type=publish]
    look [type=probe, probe="pr"]
    start -> add -> change -> ship -> again -> look -> exit
    """, goal="Say more", graph='inputs="ticket"')
    with FakeGitHub() as github:
        for folder in folders:
            github.create_repo(f"octo/{folder}", files={"app.txt": f"{folder}\n"})
        workspace = tmp_path / "ws"
        workspace.mkdir()
        request = RunRequest(workflow=write_flow(tmp_path, dot), inputs={"ticket": TICKET},
                             workspace=workspace,
                             repos={folder: f"octo/{folder}" for folder in folders},
                             max_parallel=3)
        world = World(agent=ReplayBackend({}), clock=FakeClock(),
                      git_cache=tmp_path / "cache", environ={**os.environ, **github.env()})
        ran = start_run(request, world)
        assert ran.status == "succeeded", ran.failure_reason
        assert [ran.context[f"{folder}.pr.number"] for folder in folders] == [1] * 6
        assert ran.context["pr.state"] == "WAITING"
        for folder in folders:
            repository = github.repository(f"octo/{folder}")
            assert sorted(repository.pulls) == [1]  # the second publish found it again
            links = [line.split(":")[0] for line in repository.pulls[1].body.splitlines()
                     if line.startswith("- ")]
            assert links == [f"- {other}" for other in folders]
