"""Probe and worktree stages in whole runs, against the local forge and real git
repositories (SPEC §7, §7.1): worktrees on the run's branch, per-folder facts and roll-ups,
removal that keeps unfinished work, the settings a resume reuses."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow
from git_helpers import commit_to, make_remote

from delivery.agents.replay import ReplayBackend
from delivery.engine.run_inputs import ticket_slug
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.errors import RunRefused
from delivery.forges.local import LocalForge
from delivery.testing import flow

TICKET = "https://tracker.example/browse/T-7"
BRANCH = f"delivery/{ticket_slug(TICKET)}"  # the branch the ticket names

LIFECYCLE = flow("""
add [type=worktree_add]
change [shape=parallelogram, script="printf 'new\\n' > web/new.txt"]
look [type=probe]
remove [type=worktree_remove]
start -> add -> change -> look -> remove -> exit
""", graph='inputs="ticket", folders="web,api"')


def world(tmp_path: Path) -> World:
    return World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=tmp_path / "cache")


def start(tmp_path: Path, dot: str, repos: Mapping[str, Path], *,
          checks: Mapping[str, str] | None = None, gates: str = "deny") -> RunOutcome:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    request = RunRequest(workflow=write_flow(tmp_path, dot), inputs={"ticket": TICKET},
                         workspace=workspace, repos={k: str(v) for k, v in repos.items()},
                         checks=dict(checks or {}), gates=gates)
    return start_run(request, world(tmp_path))


@pytest.fixture
def remotes(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "remotes"
    root.mkdir()
    return {name: make_remote(root, name, {"app.txt": f"{name}\n"}) for name in ("web", "api")}


def test_worktrees_are_made_probed_and_removed_keeping_unfinished_work(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    ran = start(tmp_path, LIFECYCLE, remotes)
    assert ran.status == "succeeded", ran.failure_reason
    ctx = ran.context
    assert ctx["web.worktree.exists"] is True and ctx["web.worktree.branch"] == BRANCH
    assert ctx["web.worktree.dirty"] is True and ctx["api.worktree.dirty"] is False
    assert (ctx["web.diff.files"], ctx["web.diff.insertions"], ctx["web.diff.empty"]) == \
        (1, 1, False)
    assert ctx["api.diff.empty"] is True
    assert ctx["web.pr.state"] == "NONE" and ctx["pr.state"] == "NONE"
    assert ctx["threads.unresolved"] == 0
    assert ctx["worktree.clean"] is False
    assert ctx["worktree.status"] == "web: kept: uncommitted changes; api: removed"
    assert (tmp_path / "ws" / "web" / "new.txt").read_text() == "new\n"
    assert not (tmp_path / "ws" / "api").exists()
    info = json.loads((ran.run_dir / "run.json").read_text())
    assert info["branch"] == BRANCH and info["forge"] == "local"
    assert info["repos"] == {name: str(path.resolve()) for name, path in remotes.items()}
    assert info["folders"] == {name: str(tmp_path / "ws" / name) for name in remotes}


KEEPERS = """
digraph K {
  graph [goal="g", inputs="ticket", folders="web,api,docs"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  person [shape=parallelogram, script="printf 'TOKEN=mine\\n' > web/.env; \\
mkdir -p api/build && echo cached > api/build/out.bin; \\
mv docs ../outside-docs && ln -s ../outside-docs docs"]
  remove [type=worktree_remove]
  start -> add -> person -> remove -> exit
}
"""


def test_worktree_remove_keeps_ignored_files_and_never_follows_a_symlink(
        tmp_path: Path) -> None:
    root = tmp_path / "remotes"
    root.mkdir()
    remotes = {name: make_remote(root, name, {"app.txt": f"{name}\n",
                                              ".gitignore": ".env\nbuild/\n"})
               for name in ("web", "api", "docs")}
    ran = start(tmp_path, KEEPERS, remotes)
    assert ran.status == "succeeded", ran.failure_reason
    assert ran.context["worktree.clean"] is False
    assert ran.context["worktree.status"] == (
        "web: kept: git-ignored files: .env; api: kept: git-ignored files: build/; "
        "docs: kept: a symlink to ../outside-docs; not followed, left as it is")
    assert (tmp_path / "ws" / "web" / ".env").read_text() == "TOKEN=mine\n"
    assert (tmp_path / "ws" / "api" / "build" / "out.bin").read_text() == "cached\n"
    assert (tmp_path / "outside-docs" / "app.txt").read_text() == "docs\n"


def test_the_probe_reads_the_prs_of_the_runs_branch_and_routes_on_them(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    forge = LocalForge()
    for name, remote in remotes.items():
        commit_to(remote, BRANCH, {"broken.txt" if name == "api" else "ok.txt": "x"})
        forge.find_or_create_pull_request(str(remote), head=BRANCH, base="main",
                                          title="t", body="")
    dot = flow("""
    look [type=probe, probe="pr,threads"]
    repair [shape=parallelogram, script="true"]
    start -> look
    look -> repair [condition="pr.state=CI_FAILED"]
    look -> exit
    repair -> exit
    """, graph='inputs="ticket", folders="web,api"')
    ran = start(tmp_path, dot, remotes, checks={"web": "test ! -f broken.txt",
                                                "api": "test ! -f broken.txt"})
    assert ran.status == "succeeded", ran.failure_reason
    assert ran.path == ["start", "look", "repair", "exit"]
    ctx = ran.context
    assert (ctx["web.pr.state"], ctx["web.pr.ready"]) == ("WAITING", True)
    assert ctx["api.pr.state"] == "CI_FAILED" and ctx["pr.state"] == "CI_FAILED"
    assert json.loads(ctx["api.pr.raw"])["failing_checks"][0]["conclusion"] == "FAILURE"
    assert ctx["api.pr.url"].endswith("#1")
    assert "web.worktree.exists" not in ctx and "web.diff.files" not in ctx


def test_a_probe_of_one_folder_still_rolls_up_every_folder(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    forge = LocalForge()
    commit_to(remotes["web"], BRANCH, {"ok.txt": "x"})
    number = forge.find_or_create_pull_request(str(remotes["web"]), head=BRANCH, base="main",
                                               title="t", body="").number
    forge.review(str(remotes["web"]), number, "CHANGES_REQUESTED", "no", author="r")
    dot = flow("""
    all [type=probe, probe="pr"]
    one [type=probe, probe="pr", folder=api]
    start -> all -> one -> exit
    """, graph='inputs="ticket", folders="web,api"')
    ran = start(tmp_path, dot, remotes)
    assert ran.status == "succeeded", ran.failure_reason
    assert ran.context["api.pr.state"] == "NONE"
    assert ran.context["pr.state"] == "CHANGES_REQUIRED"  # web, as last observed


def test_a_folder_that_is_a_plain_directory_is_refused_before_the_first_stage(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    not_git = tmp_path / "plain"
    not_git.mkdir()
    dot = flow("""
    look [type=probe, probe="pr"]
    start -> look -> exit
    """, graph='inputs="ticket"')
    with pytest.raises(RunRefused) as refused:
        start(tmp_path, dot, {"web": remotes["web"], "api": not_git})
    assert refused.value.subject == f"repos['api']='{not_git}'"  # a library caller's words
    assert "is a plain directory, not a git repository" in str(refused.value)
    assert not (tmp_path / "ws" / ".delivery").exists()  # nothing was written


def test_a_resume_reuses_the_runs_folders_forge_branch_and_worktrees(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    dot = flow("""
    add [type=worktree_add]
    change [shape=parallelogram, script="printf 'x\\n' > web/x.txt"]
    gate [shape=hexagon, label="Go on?"]
    again [type=worktree_add]
    look [type=probe, probe="worktree,diff"]
    start -> add -> change -> gate
    gate -> again [label="yes"]
    again -> look -> exit
    """, graph='inputs="ticket", folders="web,api"')
    paused = start(tmp_path, dot, remotes, gates="pause")
    assert paused.status == "paused", paused.failure_reason
    resumed = resume_run(paused.run_dir, world(tmp_path), answers={"gate": "yes"})
    assert resumed.status == "succeeded", resumed.failure_reason
    # the second worktree_add reused the worktree: the uncommitted file is still there
    assert resumed.context["web.worktree.branch"] == BRANCH
    assert resumed.context["web.diff.files"] == 1
    assert (tmp_path / "ws" / "web" / "x.txt").is_file()


def test_a_check_for_an_unknown_folder_is_refused(tmp_path: Path,
                                                  remotes: dict[str, Path]) -> None:
    with pytest.raises(RunRefused, match="folder 'docs'"):
        start(tmp_path, LIFECYCLE, remotes, checks={"docs": "true"})


def test_a_run_mixing_paths_and_github_repositories_is_refused(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    request = RunRequest(workflow=write_flow(tmp_path, LIFECYCLE), inputs={"ticket": TICKET},
                         workspace=workspace,
                         repos={"web": str(remotes["web"]), "api": "octo/api"})
    with pytest.raises(RunRefused, match=r"repos\['web'\]=.*one forge"):
        start_run(request, world(tmp_path))
    request.forge = "local"
    with pytest.raises(RunRefused, match=r"repos\['api'\]='octo/api': is not a local directory"):
        start_run(request, world(tmp_path))


def test_required_approvals_from_delivery_toml_hold_a_pr_back(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    commit_to(remotes["web"], BRANCH, {"ok.txt": "x"})
    LocalForge().find_or_create_pull_request(str(remotes["web"]), head=BRANCH, base="main",
                                             title="t", body="")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "delivery.toml").write_text("[forge.local]\nrequired_approvals = 1\n")
    dot = flow("""
    look [type=probe, probe="pr"]
    start -> look -> exit
    """, graph='inputs="ticket"')
    ran = start(tmp_path, dot, {"web": remotes["web"]})
    assert ran.status == "succeeded", ran.failure_reason
    assert (ran.context["web.pr.state"], ran.context["web.pr.ready"]) == ("WAITING", False)
    assert json.loads(ran.context["web.pr.raw"])["review"] == "REVIEW_REQUIRED"


def test_a_probe_in_a_run_without_folders_sees_no_pr(tmp_path: Path) -> None:
    dot = flow("""
    look [type=probe]
    start -> look -> exit
    """, graph='inputs="ticket"')
    ran = start(tmp_path, dot, {})
    assert ran.status == "succeeded", ran.failure_reason
    assert (ran.context["pr.state"], ran.context["pr.ready"],
            ran.context["threads.unresolved"]) == ("NONE", False, 0)


def test_parallel_branches_make_and_probe_worktrees_concurrently(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    dot = flow("""
    fan [shape=component]
    add_web [type=worktree_add, folder=web]
    add_api [type=worktree_add, folder=api]
    look_web [type=probe, folder=web, probe="worktree,diff"]
    look_api [type=probe, folder=api, probe="worktree,diff"]
    join [shape=tripleoctagon]
    look [type=probe, probe="worktree"]
    start -> fan
    fan -> add_web -> look_web -> join
    fan -> add_api -> look_api -> join
    join -> look -> exit
    """, graph='inputs="ticket", folders="web,api"')
    ran = start(tmp_path, dot, remotes)
    assert ran.status == "succeeded", ran.failure_reason
    assert ran.context["web.worktree.branch"] == ran.context["api.worktree.branch"] == BRANCH
    results = ran.context["parallel.results"]
    assert [r["context"]["web.diff.empty" if r["node"] == "add_web" else "api.diff.empty"]
            for r in results] == [True, True]
