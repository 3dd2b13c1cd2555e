"""A scripted person sharing a run's PRs with the bot (SPEC §7.1 "People on the branch
win"), for tests and for people embedding delivery.

`People` is what a person can do to a forge — push a commit, force-push a rewrite, open and
resolve review threads, review, close and reopen a PR, move the base branch — with two
implementations: `GitHubPeople` (the fake GitHub of `delivery.testing.github`, as a person
on the web UI or with git would) and `LocalPeople` (the local forge's bare repositories
and PR records).

`ScriptedPerson` acts on a seeded random schedule between the stages of a run (it is an
engine observer: pass it as `observer=`, or call `act()` yourself) and remembers what it
did, so a test can assert that nothing it pushed was lost and nothing it removed came back:

    person = ScriptedPerson(GitHubPeople(github), {"api": "octo/api"}, branch, seed=3)
    outcome = start_run(request, world, observer=person)
    assert person.lost(...) == []

Thread actions go through `People.open_thread` / `resolve_thread`; a forge that answers
threads itself (the `respond` stage) needs nothing more from the person.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.forges.local import LocalForge, ReviewState, git_dir_of
from delivery.lang.model import Node, NodeType
from delivery.testing.github import FakeGitHub

PERSON = "maria"
IDENTITY = {"GIT_AUTHOR_NAME": "Maria Person", "GIT_AUTHOR_EMAIL": "maria@example.com",
            "GIT_COMMITTER_NAME": "Maria Person", "GIT_COMMITTER_EMAIL": "maria@example.com"}


@dataclass(frozen=True)
class PullView:
    """A PR as a person sees it on the forge."""

    number: int
    state: str  # open | closed | merged
    unresolved: tuple[int, ...]  # ids of unresolved review threads
    changes_requested: bool  # some reviewer's latest opinion asks for changes
    head_sha: str


class People(Protocol):
    """What a person can do on a forge (see the module docstring)."""

    def git_dir(self, repository: str) -> Path: ...

    def default_branch(self, repository: str) -> str: ...

    def pulls(self, repository: str, head: str) -> list[PullView]: ...

    def open_thread(self, repository: str, number: int, body: str) -> int: ...

    def resolve_thread(self, repository: str, number: int, thread: int) -> None: ...

    def review(self, repository: str, number: int, state: ReviewState, body: str) -> None: ...

    def close(self, repository: str, number: int) -> None: ...

    def reopen(self, repository: str, number: int) -> None: ...

    def bot_replies(self, repository: str, number: int) -> list[tuple[int, str]]:
        """(thread id, body) of every reply the bot posted in a review thread."""
        ...


def _git(git_dir: Path, *args: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(["git", "--git-dir", str(git_dir), *args], input=stdin,
                          capture_output=True, text=True, check=check,
                          env={**os.environ, **IDENTITY})
    return done.stdout.strip()


def ref_sha(git_dir: Path, ref: str) -> str:
    return _git(git_dir, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                check=False)


def read_file(git_dir: Path, ref: str, path: str) -> str | None:
    done = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{ref}:{path}"],
                          capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else None


def commit_tree(git_dir: Path, start: str, files: Mapping[str, str | None], parents:
                Sequence[str], message: str) -> str:
    """A commit of `start`'s tree with `files` applied (None removes), on `parents`."""
    with tempfile.TemporaryDirectory(prefix="person-index-") as scratch:
        env = {**os.environ, **IDENTITY, "GIT_INDEX_FILE": str(Path(scratch) / "index")}

        def run(*args: str, stdin: str | None = None) -> str:
            return subprocess.run(["git", "--git-dir", str(git_dir), *args], input=stdin,
                                  capture_output=True, text=True, check=True,
                                  env=env).stdout.strip()

        run("read-tree", start)
        for name, text in files.items():
            if text is None:  # --index-info, as --force-remove needs a work tree
                run("update-index", "--index-info", stdin=f"0 {'0' * 40}\t{name}\n")
            else:
                blob = run("hash-object", "-w", "--stdin", stdin=text)
                run("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
        tree = run("write-tree")
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return run(*args, "-m", message)


def push_commit(git_dir: Path, branch: str, files: Mapping[str, str | None],
                message: str) -> str:
    """A person's commit on top of `branch` (an ordinary push)."""
    head = ref_sha(git_dir, f"refs/heads/{branch}")
    sha = commit_tree(git_dir, head, files, [head], message)
    _git(git_dir, "update-ref", f"refs/heads/{branch}", sha, head)
    return sha


def force_push_without(git_dir: Path, branch: str, base: str, path: str) -> str:
    """A person's rewrite of `branch`: one commit on the fork point with the branch's
    content minus `path` — the history that held `path` is gone (a force-push)."""
    head = ref_sha(git_dir, f"refs/heads/{branch}")
    fork = _git(git_dir, "merge-base", head, f"refs/heads/{base}")
    sha = commit_tree(git_dir, head, {path: None}, [fork], f"Remove {path}")
    _git(git_dir, "update-ref", f"refs/heads/{branch}", sha, head)
    return sha


def delete_branch(git_dir: Path, branch: str) -> None:
    """A person deletes `branch` on the remote (`git push origin :branch`), say to take a
    leaked file off it."""
    _git(git_dir, "update-ref", "-d", f"refs/heads/{branch}")


class GitHubPeople:
    """`People` on the fake GitHub."""

    def __init__(self, github: FakeGitHub) -> None:
        self.github = github

    def git_dir(self, repository: str) -> Path:
        return self.github.repository(repository).path

    def default_branch(self, repository: str) -> str:
        return self.github.repository(repository).default_branch

    def pulls(self, repository: str, head: str) -> list[PullView]:
        with self.github.state.lock:
            repo = self.github.repository(repository)
            views = []
            for pr in repo.pulls.values():
                if pr.head != head:
                    continue
                state = "merged" if pr.merged else pr.state
                opinions = self.github.state.latest_opinions(pr)
                views.append(PullView(
                    pr.number, state, tuple(t.id for t in pr.threads if not t.resolved),
                    any(r.state == "CHANGES_REQUESTED" for r in opinions),
                    self.github.state.head_sha(repo, pr)))
            return views

    def open_thread(self, repository: str, number: int, body: str) -> int:
        return self.github.add_thread(repository, number, author=PERSON, body=body,
                                      path="app.py", line=1).id

    def resolve_thread(self, repository: str, number: int, thread: int) -> None:
        self.github.resolve_thread(repository, number, thread)

    def review(self, repository: str, number: int, state: ReviewState, body: str) -> None:
        self.github.add_review(repository, number, PERSON, state, body)

    def close(self, repository: str, number: int) -> None:
        self.github.close(repository, number)

    def reopen(self, repository: str, number: int) -> None:
        self.github.reopen(repository, number)

    def bot_replies(self, repository: str, number: int) -> list[tuple[int, str]]:
        pr = self.github.pull(repository, number)
        return [(t.id, c.body) for t in pr.threads for c in t.comments[1:]
                if c.author == self.github.login]

    def label(self, repository: str, number: int, name: str) -> None:
        """Set a label on an issue or PR (GitHub records the person on its timeline)."""
        self.github.add_label(repository, number, name, actor=PERSON)

    def unlabel(self, repository: str, number: int, name: str) -> None:
        self.github.remove_label(repository, number, name, actor=PERSON)


@dataclass
class LabelsAfter(Progress):
    """A person who sets `label` on the open PR of `branch` in `repository` (or on
    issue `number`, a ticket) right after stage `node` finishes — mid-run, as someone
    watching the PRs would (the stop switch's tests)."""

    people: GitHubPeople
    repository: str
    node: str
    label: str
    branch: str = ""
    number: int = 0
    done: bool = False

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.id != self.node or self.done:
            return
        number = self.number or next(p.number for p in self.people.pulls(
            self.repository, self.branch) if p.state == "open")
        self.people.label(self.repository, number, self.label)
        self.done = True


class LocalPeople:
    """`People` on the local forge (repositories are paths of bare repositories)."""

    def __init__(self, forge: LocalForge | None = None) -> None:
        self.forge = forge or LocalForge()

    def git_dir(self, repository: str) -> Path:
        return git_dir_of(repository)

    def default_branch(self, repository: str) -> str:
        return self.forge.default_branch(repository)

    def _records(self, repository: str) -> list[dict[str, Any]]:
        path = git_dir_of(repository) / "delivery" / "pulls.json"
        if not path.is_file():
            return []
        return list(json.loads(path.read_text(encoding="utf-8"))["pulls"])

    def pulls(self, repository: str, head: str) -> list[PullView]:
        git_dir = git_dir_of(repository)
        views = []
        for pull in self._records(repository):
            if pull["head"] != head:
                continue
            latest: dict[str, str] = {}
            for review in pull["reviews"]:
                if review["state"] in ("APPROVED", "CHANGES_REQUESTED"):
                    latest[review["author"]] = review["state"]
            views.append(PullView(
                int(pull["number"]),
                str(pull["state"]),
                tuple(t["id"] for t in pull["threads"]
                      if not t["resolved"]),
                "CHANGES_REQUESTED" in latest.values(),
                str(pull["merged_head_sha"]) if pull["state"] == "merged"
                else ref_sha(git_dir, f"refs/heads/{head}")))
        return views

    def open_thread(self, repository: str, number: int, body: str) -> int:
        return self.forge.comment(repository, number, body, path="app.py", line=1,
                                  author=PERSON)

    def resolve_thread(self, repository: str, number: int, thread: int) -> None:
        self.forge.resolve_thread(repository, number, thread)

    def review(self, repository: str, number: int, state: ReviewState, body: str) -> None:
        self.forge.review(repository, number, state, body, author=PERSON)

    def close(self, repository: str, number: int) -> None:
        self.forge.close_pull_request(repository, number)

    def reopen(self, repository: str, number: int) -> None:
        self.forge.reopen_pull_request(repository, number)

    def bot_replies(self, repository: str, number: int) -> list[tuple[int, str]]:
        replies: list[tuple[int, str]] = []
        for pull in self._records(repository):
            if pull["number"] != number:
                continue
            for thread in pull["threads"]:
                for reply in thread.get("replies", []):
                    replies.append((int(thread["id"]), str(reply.get("body", ""))))
        return replies


ACTIONS = ("push", "rewrite", "thread", "request_changes", "close_reopen", "move_base",
           "close")
# how often each is drawn; closing for good is rare (it ends the run)
WEIGHTS = (4, 2, 3, 3, 2, 3, 0.3)


@dataclass
class ScriptedPerson(Progress):
    """A person acting between stages at random (seeded), and a reviewer who answers:
    after the bot pushes past their request, they approve and resolve their threads.

    `drop` is the file a rewrite removes (when the PR branch holds it); `conflict_file` is
    the file a base move changes on its first line, where the run's change also is."""

    people: People
    repos: Mapping[str, str]  # folder -> repository
    branch: str
    seed: int = 0
    chance: float = 0.35  # of acting after a stage
    max_actions: int = 6
    drop: str = "creds.txt"
    conflict_file: str = "shared.txt"
    actions: list[str] = field(default_factory=list)
    pushed: dict[str, dict[str, str]] = field(default_factory=dict)  # repo -> file -> text
    removed: dict[str, set[str]] = field(default_factory=dict)  # repo -> files
    base_lines: dict[str, list[str]] = field(default_factory=dict)  # repo -> lines on base
    closed_for_good: set[str] = field(default_factory=set)
    merge_snapshots: list[tuple[str, PullView]] = field(default_factory=list)
    blocked_merges: list[str] = field(default_factory=list)  # merged while blocked

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._asked: dict[tuple[str, int], str] = {}  # (repo, PR) -> head when asked

    # -- the engine observer -------------------------------------------------------------
    def stage_started(self, node: Node, attempt: int) -> None:
        if node.type is NodeType.MERGE:  # what the merge stage finds (nobody acts during it)
            for repository in self.repos.values():
                for view in self.people.pulls(repository, self.branch):
                    if view.state == "open":
                        self.merge_snapshots.append((repository, view))

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.type is NodeType.MERGE:
            self._check_merges()
        self.answer()
        if len(self.actions) < self.max_actions and self.rng.random() < self.chance:
            self.act()

    def _check_merges(self) -> None:
        """Every PR merged by the stage that just ended was mergeable as a person sees it:
        no unresolved thread, no changes requested (else named in `blocked_merges`)."""
        for repository, before in self.merge_snapshots:
            now = [v for v in self.people.pulls(repository, self.branch)
                   if v.number == before.number]
            if now and now[0].state == "merged" and (before.unresolved
                                                      or before.changes_requested):
                self.blocked_merges.append(f"{repository}#{before.number}: {before}")
        self.merge_snapshots.clear()

    # -- what the person does -------------------------------------------------------------
    def _open(self, repository: str) -> PullView | None:
        views = [v for v in self.people.pulls(repository, self.branch) if v.state == "open"]
        return views[-1] if views else None

    def answer(self) -> None:
        """The reviewer's side: a request the bot has pushed past is approved, its threads
        resolved (a bot that resolves threads itself leaves nothing to do here)."""
        for repository in self.repos.values():
            view = self._open(repository)
            if view is None:
                continue
            asked = self._asked.get((repository, view.number))
            if asked is None or asked == view.head_sha:
                continue
            for thread in view.unresolved:
                self.people.resolve_thread(repository, view.number, thread)
            if view.changes_requested:
                self.people.review(repository, view.number, "APPROVED", "Thanks, that works.")
            del self._asked[(repository, view.number)]

    def act(self) -> str:
        """One action drawn at random on one repository; what was done ("" for nothing)."""
        repository = self.rng.choice(sorted(self.repos.values()))
        action = self.rng.choices(ACTIONS, WEIGHTS)[0]
        done = getattr(self, f"_{action}")(repository)
        if done:
            folder = next(f for f, r in self.repos.items() if r == repository)
            self.actions.append(f"{action} {folder}: {done}")
        return str(done)

    def _push(self, repository: str) -> str:
        git_dir = self.people.git_dir(repository)
        if self._open(repository) is None or not ref_sha(git_dir, f"refs/heads/{self.branch}"):
            return ""
        name = f"person-{len(self.actions) + 1}.txt"
        text = f"written by {PERSON} ({self.seed})\n"
        push_commit(git_dir, self.branch, {name: text}, f"Add {name}")
        self.pushed.setdefault(repository, {})[name] = text
        return name

    def _rewrite(self, repository: str) -> str:
        git_dir = self.people.git_dir(repository)
        if self._open(repository) is None or \
                read_file(git_dir, f"refs/heads/{self.branch}", self.drop) is None:
            return ""
        force_push_without(git_dir, self.branch, self.people.default_branch(repository),
                           self.drop)
        self.removed.setdefault(repository, set()).add(self.drop)
        return f"force-pushed without {self.drop}"

    def _thread(self, repository: str) -> str:
        view = self._open(repository)
        if view is None:
            return ""
        if view.unresolved:
            self.people.resolve_thread(repository, view.number, view.unresolved[0])
        thread = self.people.open_thread(repository, view.number,
                                         "This breaks the API, do not merge yet.")
        self._asked[(repository, view.number)] = view.head_sha
        return f"thread {thread} on #{view.number}"

    def _request_changes(self, repository: str) -> str:
        view = self._open(repository)
        if view is None:
            return ""
        self.people.review(repository, view.number, "CHANGES_REQUESTED",
                           "Please log the greeting.")
        self._asked[(repository, view.number)] = view.head_sha
        return f"changes requested on #{view.number}"

    def _close_reopen(self, repository: str) -> str:
        view = self._open(repository)
        if view is None:
            return ""
        self.people.close(repository, view.number)
        self.people.reopen(repository, view.number)
        return f"closed and reopened #{view.number}"

    def _close(self, repository: str) -> str:
        view = self._open(repository)
        if view is None:
            return ""
        self.people.close(repository, view.number)
        self.closed_for_good.add(repository)
        return f"closed #{view.number}"

    def _move_base(self, repository: str) -> str:
        git_dir = self.people.git_dir(repository)
        base = self.people.default_branch(repository)
        current = read_file(git_dir, f"refs/heads/{base}", self.conflict_file) or ""
        line = f"base line {len(self.actions) + 1} by {PERSON}"
        push_commit(git_dir, base, {self.conflict_file: f"{line}\n{current}"},
                    f"Change {self.conflict_file} on {base}")
        self.base_lines.setdefault(repository, []).append(line)
        return line

    # -- what a test checks afterwards ---------------------------------------------------
    def lost(self) -> list[str]:
        """What the person pushed that is neither on the PR branch nor (merged) on the
        base: empty when nothing was lost."""
        missing = []
        for repository, files in self.pushed.items():
            git_dir = self.people.git_dir(repository)
            where = self._landing(repository)
            for name, text in files.items():
                if read_file(git_dir, where, name) != text:
                    missing.append(f"{repository}: {name} ({where})")
        for repository, lines in self.base_lines.items():
            git_dir = self.people.git_dir(repository)
            base = self.people.default_branch(repository)
            content = read_file(git_dir, f"refs/heads/{base}", self.conflict_file) or ""
            missing += [f"{repository}: base line {line!r}" for line in lines
                        if line not in content]
        return missing

    def returned(self) -> list[str]:
        """What the person removed that is back on the PR branch or the base."""
        back = []
        for repository, files in self.removed.items():
            git_dir = self.people.git_dir(repository)
            base = self.people.default_branch(repository)
            for ref in (f"refs/heads/{self.branch}", f"refs/heads/{base}"):
                back += [f"{repository}: {name} on {ref}" for name in files
                         if ref_sha(git_dir, ref) and read_file(git_dir, ref, name) is not None]
        return back

    def _landing(self, repository: str) -> str:
        views = self.people.pulls(repository, self.branch)
        if views and views[-1].state == "merged":
            return f"refs/heads/{self.people.default_branch(repository)}"
        return f"refs/heads/{self.branch}"
