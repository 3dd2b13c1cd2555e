"""Publish and merge stages in whole runs on the local forge (SPEC §7.1): one PR per changed
folder, found again rather than duplicated, bodies with one marked block linking the
ticket and every sibling PR; merges in order, stopping at the first PR that cannot merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow
from git_helpers import git, make_remote

from delivery.agents.replay import ReplayBackend
from delivery.engine.handlers.publishing import with_block
from delivery.engine.run_inputs import ticket_slug
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.forges.base import MergeResult, PullRequestRef
from delivery.forges.local import LocalForge
from delivery.testing import flow

TICKET = "https://tracker.example/browse/T-9"
BRANCH = f"delivery/{ticket_slug(TICKET)}"  # the branch the ticket names


def publish_flow(order: str = "") -> str:
    return flow(f"""
    add [type=worktree_add]
    change [shape=parallelogram,
            script="printf 'hello\\n' > web/hello.txt; printf 'more\\n' >> api/app.txt"]
    ship [type=publish]
    ship_again [type=publish]
    look [type=probe, probe="pr"]
    land [type=merge{order}]
    after [type=probe, probe="pr"]
    remove [type=worktree_remove]
    start -> add -> change -> ship -> ship_again -> look -> land -> after -> remove -> exit
    """, goal="Say hello", graph='inputs="ticket", folders="web,api,docs"', name="D")


@pytest.fixture
def remotes(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "remotes"
    root.mkdir()
    return {name: make_remote(root, name, {"app.txt": f"{name}\n"})
            for name in ("web", "api", "docs")}


def run(tmp_path: Path, remotes: dict[str, Path], *, order: str = "",
        checks: dict[str, str] | None = None) -> RunOutcome:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    dot = publish_flow(order=f', order="{order}"' if order else "")
    request = RunRequest(workflow=write_flow(tmp_path, dot), inputs={"ticket": TICKET},
                         workspace=workspace, repos={k: str(v) for k, v in remotes.items()},
                         checks=checks or {})
    world = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=tmp_path / "cache")
    return start_run(request, world)


def pulls(remote: Path) -> list[dict[str, object]]:
    data = json.loads((remote / "delivery" / "pulls.json").read_text())
    return list(data["pulls"])


def test_a_delivery_publishes_merges_and_cleans_up(tmp_path: Path,
                                                   remotes: dict[str, Path]) -> None:
    ran = run(tmp_path, remotes, order="api,web")
    assert ran.status == "succeeded", ran.failure_reason
    ctx = ran.context
    assert (ctx["web.pr.number"], ctx["api.pr.number"]) == (1, 1)
    assert ctx["docs.pr.state"] == "NONE"  # no change, no PR
    assert not (remotes["docs"] / "delivery" / "pulls.json").exists()
    assert ctx["pr.state"] == "MERGED"
    assert (ctx["worktree.clean"], ctx["worktree.status"]) == \
        (True, "web: removed; api: removed; docs: removed")
    assert git(remotes["web"], "show", "main:hello.txt") == "hello"
    assert git(remotes["api"], "show", "main:app.txt") == "api\nmore"
    assert git(remotes["web"], "log", "-1", "--format=%s", BRANCH) == "Say hello"


def test_publishing_twice_keeps_one_pr_per_folder_with_one_linking_block(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    ran = run(tmp_path, remotes, checks={"web": "false"})  # the merge stops: PRs stay open
    assert ran.status == "failed"
    web, api = pulls(remotes["web"]), pulls(remotes["api"])
    assert len(web) == 1 and len(api) == 1
    body = str(web[0]["body"])
    assert body.count("<!-- delivery:begin") == 1 and body.count("<!-- delivery:end -->") == 1
    assert f"Ticket: {TICKET}" in body
    assert f"- web: {remotes['web'].resolve()}#1" in body
    assert f"- api: {remotes['api'].resolve()}#1" in body
    assert f"run={ran.run_id}" in body
    assert body == api[0]["body"]


def test_the_merge_stops_at_the_first_pr_that_cannot_merge_and_names_it(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    ran = run(tmp_path, remotes, order="web,api", checks={"api": "false"})
    assert ran.status == "failed"
    assert "folder 'api'" in ran.failure_reason and "CI_FAILED" in ran.failure_reason
    assert "merged before it: web" in ran.failure_reason
    assert git(remotes["web"], "show", "main:hello.txt") == "hello"
    assert pulls(remotes["api"])[0]["state"] == "open"


def test_order_puts_the_named_folders_first(tmp_path: Path, remotes: dict[str, Path]) -> None:
    ran = run(tmp_path, remotes, order="api", checks={"web": "false"})
    assert ran.status == "failed" and "folder 'web'" in ran.failure_reason
    assert pulls(remotes["api"])[0]["state"] == "merged"  # api went first
    assert pulls(remotes["web"])[0]["state"] == "open"


def test_a_rewrite_keeps_a_persons_text_outside_the_block() -> None:
    edited = "Context from a person.\n\n<!-- delivery:begin run=r1 -->\nold\n" \
             "<!-- delivery:end -->\nFooter."
    rewritten = with_block(edited, "<!-- delivery:begin run=r1 -->\nnew\n<!-- delivery:end -->")
    assert rewritten == "Context from a person.\n\n<!-- delivery:begin run=r1 -->\nnew\n" \
                        "<!-- delivery:end -->\nFooter."
    assert with_block("Hi", "B") == "Hi\n\nB"


class KilledAfter(LocalForge):
    """The local forge, with the process 'killed' right after a given write succeeded
    (KeyboardInterrupt is not an Exception: the engine does not catch it, as with a kill)."""

    def __init__(self, write: str) -> None:
        super().__init__()
        self.write = write

    def find_or_create_pull_request(self, repository: str, *, head: str, base: str,
                                    title: str, body: str) -> PullRequestRef:
        ref = super().find_or_create_pull_request(repository, head=head, base=base,
                                                  title=title, body=body)
        if self.write == "create":
            raise KeyboardInterrupt
        return ref

    def merge_pull_request(self, repository: str, number: int, *,
                           expected_head_sha: str) -> MergeResult:
        result = super().merge_pull_request(repository, number,
                                            expected_head_sha=expected_head_sha)
        if self.write == "merge":
            raise KeyboardInterrupt
        return result


@pytest.mark.parametrize("write", ["create", "merge"])
def test_a_run_killed_after_a_write_resumes_without_duplicating_it(
        tmp_path: Path, remotes: dict[str, Path], write: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    request = RunRequest(workflow=write_flow(tmp_path, publish_flow(order="")),
                         inputs={"ticket": TICKET}, workspace=workspace,
                         run_dir=tmp_path / "run",
                         repos={k: str(v) for k, v in remotes.items()})
    killed = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=tmp_path / "cache",
                   forge=KilledAfter(write))
    with pytest.raises(KeyboardInterrupt):
        start_run(request, killed)
    again = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=tmp_path / "cache")
    resumed = resume_run(tmp_path / "run", again)
    assert resumed.status == "succeeded", resumed.failure_reason
    for name in ("web", "api"):
        assert len(pulls(remotes[name])) == 1
        assert pulls(remotes[name])[0]["state"] == "merged"
        # one delivery commit on the branch, one merge commit on main
        assert git(remotes[name], "rev-list", "--count", f"main..{BRANCH}") == "0"
        assert git(remotes[name], "rev-list", "--count", "--merges", "main") == "1"
        assert git(remotes[name], "rev-list", "--count", f"{BRANCH}", "--not",
                   "main~1") == "1"


class DraftPulls(LocalForge):
    """The local forge, where every PR is opened as a draft."""

    def find_or_create_pull_request(self, repository: str, *, head: str, base: str,
                                    title: str, body: str) -> PullRequestRef:
        ref = super().find_or_create_pull_request(repository, head=head, base=base,
                                                  title=title, body=body)
        self.set_draft(repository, ref.number)
        return ref


def test_the_merge_stopping_at_a_draft_says_it_is_a_draft(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    request = RunRequest(workflow=write_flow(tmp_path, publish_flow(order="")),
                         inputs={"ticket": TICKET}, workspace=workspace,
                         repos={k: str(v) for k, v in remotes.items()})
    world = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=tmp_path / "cache",
                  forge=DraftPulls())
    ran = start_run(request, world)
    assert ran.status == "failed"
    assert "folder 'web': PR #1 is a draft" in ran.failure_reason
    assert "mark it ready for review" in ran.failure_reason
    assert "WAITING" not in ran.failure_reason
    assert pulls(remotes["web"])[0]["state"] == "open"


def test_publish_writes_each_folders_pr_and_an_empty_one_for_a_folder_without_changes(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    # read right after publish, as the validator allows (no probe in between)
    dot = flow("""
add [type=worktree_add]
change [shape=parallelogram, script="printf 'hello\\n' > web/hello.txt"]
ship [type=publish]
tell [shape=parallelogram,
      script="printf '%s|%s|%s' {{ web.pr.number }} {{ web.pr.url }} x{{ docs.pr.url }}"]
start -> add -> change -> ship -> tell -> exit
""", goal="Say hello", graph='inputs="ticket", folders="web,api,docs"', name="D")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    request = RunRequest(workflow=write_flow(tmp_path, dot), inputs={"ticket": TICKET},
                         workspace=workspace, repos={k: str(v) for k, v in remotes.items()})
    ran = start_run(request, World(agent=ReplayBackend({}), clock=FakeClock(),
                                   git_cache=tmp_path / "cache"))
    assert ran.status == "succeeded", ran.failure_reason
    ctx = ran.context
    assert (ctx["web.pr.number"], ctx["web.pr.url"]) == (1, f"{remotes['web'].resolve()}#1")
    assert (ctx["docs.pr.number"], ctx["docs.pr.url"]) == ("", "")
    assert ctx["tool.output"] == f"1|{remotes['web'].resolve()}#1|x"


TITLED = flow("""
think [type=prompt, prompt="Scope and plan {{ ticket }}", outputs="%s"]
add [type=worktree_add]
change [shape=parallelogram, script="printf 'hello\\n' > web/hello.txt"]
ship [type=publish]
start -> think -> add -> change -> ship -> exit
""", goal="Deliver the ticket", graph='inputs="ticket", folders="web"', name="D")


def _titled_run(tmp_path: Path, remotes: dict[str, Path], outputs: str,
                updates: dict[str, object]) -> tuple[str, str]:
    """(the PR's title, the commit's subject) after a run whose `think` node said `updates`."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    reply = json.dumps({"context_updates": updates})
    request = RunRequest(workflow=write_flow(tmp_path, TITLED % outputs),
                         inputs={"ticket": TICKET}, workspace=workspace,
                         repos={"web": str(remotes["web"])})
    world = World(agent=ReplayBackend({"think": [reply]}), clock=FakeClock(),
                  git_cache=tmp_path / "cache")
    ran = start_run(request, world)
    assert ran.status == "succeeded", ran.failure_reason
    (pull,) = pulls(remotes["web"])
    return str(pull["title"]), git(remotes["web"], "log", "-1", "--format=%s", BRANCH)


def test_the_pr_title_and_commit_come_from_the_plan_not_the_graphs_goal(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    plan = "web: greet the visitor by name on the home page, escaping the name first " \
        "(it comes from the visitor)\nthen: tests"
    title, subject = _titled_run(tmp_path, remotes, "plan:text", {"plan": plan})
    assert title == subject
    assert len(title) == 72 and title.endswith("…")  # bounded, cut at the first line
    assert title.startswith("web: greet the visitor by name")


def test_the_pr_title_comes_from_a_scope_that_says_its_work_in_words(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    scope = {"type": "goal", "goal": "Greet visitors by name"}
    title, subject = _titled_run(tmp_path, remotes, "scope:work", {"scope": scope})
    assert (title, subject) == ("Greet visitors by name", "Greet visitors by name")
