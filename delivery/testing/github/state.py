"""The fake GitHub's in-memory state: repositories (real bare git repositories), pull
requests, reviews, review threads, comments, check runs and commit statuses.

What GitHub derives, the fake derives too: a PR's head SHA is the branch's tip in the bare
repository, checks come from the repository's check rules run against the head commit's
tree, mergeability from `git merge-tree`, the review decision from the reviews submitted.
"""

from __future__ import annotations

import itertools
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from delivery.testing.github import gitops

FAILING_CONCLUSIONS = frozenset(
    {"FAILURE", "TIMED_OUT", "CANCELLED", "ACTION_REQUIRED", "STARTUP_FAILURE"})
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
BOT_SUFFIX = "[bot]"  # an App's account: GraphQL answers it as a `Bot` without the suffix


class Tree:
    """The files of one commit, handed to a check predicate."""

    def __init__(self, repo: Path, sha: str) -> None:
        self.repo = repo
        self.sha = sha

    def paths(self) -> list[str]:
        return gitops.list_files(self.repo, self.sha)

    def read(self, path: str) -> str | None:
        return gitops.read_file(self.repo, self.sha, path)


CheckOutcome = bool | tuple[bool, str]


@dataclass(frozen=True)
class CheckRule:
    """A CI job: `predicate(tree)` or `command` (run in a checkout of the head commit,
    exit 0 = success) decides the check run's conclusion for each head commit."""

    name: str
    predicate: Callable[[Tree], CheckOutcome] | None = None
    command: Sequence[str] | None = None


@dataclass
class CheckRun:
    id: int
    name: str
    head_sha: str
    status: str  # COMPLETED | IN_PROGRESS
    conclusion: str | None  # SUCCESS | FAILURE | None while in progress
    summary: str
    details_url: str


@dataclass
class ActionsRun:
    """A workflow run of GitHub Actions (`GET /repos/{o}/{r}/actions/runs/{id}`): queued,
    in_progress or completed, with its conclusion once completed."""

    id: int
    status: str = "in_progress"
    conclusion: str = ""
    attempt: int = 1


@dataclass
class StatusContext:
    context: str
    state: str  # SUCCESS | FAILURE | ERROR | PENDING | EXPECTED
    target_url: str
    description: str


@dataclass
class Review:
    id: int
    author: str
    state: str  # APPROVED | CHANGES_REQUESTED | COMMENTED | DISMISSED
    body: str
    commit_sha: str
    submitted_at: str


@dataclass
class ThreadComment:
    id: int
    author: str
    body: str


@dataclass
class ReviewThread:
    id: int
    path: str
    line: int
    comments: list[ThreadComment]
    resolved: bool = False
    outdated: bool = False


@dataclass
class IssueComment:
    id: int
    number: int
    author: str
    body: str
    created_at: str
    updated_at: str


@dataclass
class Issue:
    number: int
    title: str
    author: str
    created_at: str
    body: str = ""
    state: str = "open"


@dataclass
class LabelEvent:
    """An entry of an issue's or PR's timeline: `LabeledEvent` or `UnlabeledEvent`."""

    kind: str  # LabeledEvent | UnlabeledEvent
    label: str
    actor: str
    created_at: str


@dataclass
class Pull:
    number: int
    title: str
    body: str
    head: str
    base: str
    author: str
    created_at: str
    draft: bool = False
    state: str = "open"  # open | closed
    merged: bool = False
    merged_at: str | None = None
    closed_at: str | None = None
    merge_commit_sha: str | None = None
    last_head_sha: str = ""  # the head when last seen (kept when the branch is deleted)
    reviews: list[Review] = field(default_factory=list)
    threads: list[ReviewThread] = field(default_factory=list)
    # a PR from a fork: the head repository (`eve/web`); its commits live in the base
    # repository as `refs/pull/<number>/head`, as on GitHub. "": the head is a branch here
    fork: str = ""

    @property
    def head_owner(self) -> str:
        """The owner of the head repository ("" when it is the base repository)."""
        return self.fork.split("/", 1)[0]


@dataclass
class Repository:
    owner: str
    name: str
    path: Path
    id: int
    default_branch: str = "main"
    check_rules: list[CheckRule] = field(default_factory=list)
    required_approvals: int = 0
    require_checks: bool = False
    # branch protection of the default branch: status contexts (or check names) that must
    # be SUCCESS on a PR's head before GitHub lets anyone merge it
    required_contexts: list[str] = field(default_factory=list)
    # False: the token cannot read the protection (GraphQL answers its rules null)
    protection_readable: bool = True
    hold_checks: bool = False  # check runs stay IN_PROGRESS until released
    mergeability_delay: int = 0  # reads answering UNKNOWN after each head/base change
    # people's permissions here (admin, maintain, write, triage, read, none), by login;
    # anyone not listed has `default_permission`: the fake's people are maintainers unless
    # a test says otherwise (`default_permission="read"`: a public repository, where
    # anyone may review but their opinion does not count)
    collaborators: dict[str, str] = field(default_factory=dict)
    default_permission: str = "write"
    # what the fake's token may do here (GitHub's viewerPermission, lower case): below
    # `write` its pushes and REST writes are refused with 403, as GitHub refuses them
    token_permission: str = "admin"
    # an App's repository permissions left out of its token ("pull_requests", "contents",
    # "issues", "statuses"): their writes answer 403, as GitHub answers an integration
    token_denied: set[str] = field(default_factory=set)
    # the merge methods the repository's settings allow; a merge asking for another is
    # refused with 405, as GitHub refuses it
    merge_methods: tuple[str, ...] = ("merge", "squash", "rebase")
    pulls: dict[int, Pull] = field(default_factory=dict)
    comments: dict[int, IssueComment] = field(default_factory=dict)
    statuses: dict[str, dict[str, StatusContext]] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    # issue or PR number -> its labels, and their timeline of (un)labelings
    labels: dict[int, list[str]] = field(default_factory=dict)
    label_events: dict[int, list[LabelEvent]] = field(default_factory=dict)
    # the repository's labels (`GET/POST /repos/{o}/{r}/labels`): name -> color, description
    label_set: dict[str, tuple[str, str]] = field(default_factory=dict)
    actions_runs: dict[int, ActionsRun] = field(default_factory=dict)
    # False: the token lacks `actions: read` here, the runs endpoint answers 403
    actions_readable: bool = True
    # what the repository search (`GET /search/repositories`) matches and leaves out
    topics: list[str] = field(default_factory=list)
    archived: bool = False
    fork: bool = False
    description: str = ""

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def next_number(self) -> int:
        """Issues and PRs share one sequence of numbers, as on GitHub."""
        return max([0, *self.pulls, *self.issues]) + 1


class MergeRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class State:
    """Everything the fake knows; every mutation and derived read holds `lock`."""

    def __init__(self, root: Path, base_url: str, now: Callable[[], float]) -> None:
        self.root = root
        self.base_url = base_url
        self.now = now
        self.lock = threading.RLock()
        self.repos: dict[str, Repository] = {}
        self._ids = itertools.count(1000)
        self._check_cache: dict[tuple[str, str, str], CheckRun] = {}
        self._merge_cache: dict[tuple[str, str, str], tuple[str | None, list[str]]] = {}
        self._unknown_reads: dict[tuple[str, int, str, str], int] = {}
        self._refs: dict[tuple[str, str], str | None] | None = None

    @contextmanager
    def refs_memo(self) -> Iterator[None]:
        """Within one request (under `lock`) a branch tip is read from git once."""
        with self.lock:
            self._refs = {}
            try:
                yield
            finally:
                self._refs = None

    def ref(self, repo: Repository, branch: str) -> str | None:
        if self._refs is None:
            return gitops.ref_sha(repo.path, branch)
        key = (repo.full_name, branch)
        if key not in self._refs:
            self._refs[key] = gitops.ref_sha(repo.path, branch)
        return self._refs[key]

    def next_id(self) -> int:
        return next(self._ids)

    def timestamp(self) -> str:
        import time
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.now()))

    # -- repositories -------------------------------------------------------------------
    def repo(self, full_name: str) -> Repository | None:
        return self.repos.get(full_name.lower())

    def add_repo(self, full_name: str, *, default_branch: str,
                 files: dict[str, str] | None) -> Repository:
        owner, name = full_name.split("/", 1)
        path = self.root / owner / f"{name}.git"
        gitops.init_bare(path, default_branch)
        gitops.seed(path, default_branch, files if files is not None else
                    {"README.md": f"# {name}\n"}, "Initial commit")
        repo = Repository(owner=owner, name=name, path=path, id=self.next_id(),
                          default_branch=default_branch)
        self.repos[full_name.lower()] = repo
        return repo

    # -- derived facts ------------------------------------------------------------------
    def head_sha(self, repo: Repository, pr: Pull) -> str:
        if pr.merged:
            return pr.last_head_sha
        sha = gitops.pull_head_sha(repo.path, pr.number) if pr.fork else \
            self.ref(repo, pr.head)
        if sha:
            pr.last_head_sha = sha
        return pr.last_head_sha

    def base_sha(self, repo: Repository, pr: Pull) -> str:
        return self.ref(repo, pr.base) or ""

    def conflicts(self, repo: Repository, pr: Pull) -> list[str] | None:
        """None when mergeable, else the conflicting paths."""
        base, head = self.base_sha(repo, pr), self.head_sha(repo, pr)
        key = (repo.full_name, base, head)
        if key not in self._merge_cache:
            self._merge_cache[key] = gitops.merge_tree(repo.path, base, head)
        tree, paths = self._merge_cache[key]
        return None if tree is not None else paths

    def mergeable(self, repo: Repository, pr: Pull) -> str:
        if pr.merged or pr.state != "open":
            return "UNKNOWN"
        base, head = self.base_sha(repo, pr), self.head_sha(repo, pr)
        if repo.mergeability_delay:
            key = (repo.full_name, pr.number, base, head)
            reads = self._unknown_reads.get(key, 0)
            if reads < repo.mergeability_delay:
                self._unknown_reads[key] = reads + 1
                return "UNKNOWN"
        return "MERGEABLE" if self.conflicts(repo, pr) is None else "CONFLICTING"

    def check_runs(self, repo: Repository, sha: str) -> list[CheckRun]:
        runs = []
        for rule in repo.check_rules:
            key = (repo.full_name, rule.name, sha)
            if repo.hold_checks and key not in self._check_cache:
                runs.append(CheckRun(0, rule.name, sha, "IN_PROGRESS", None, "",
                                     self._run_url(repo, 0)))
                continue
            if key not in self._check_cache:
                ok, summary = self._run_rule(repo, rule, sha)
                run_id = self.next_id()
                self._check_cache[key] = CheckRun(
                    run_id, rule.name, sha, "COMPLETED", "SUCCESS" if ok else "FAILURE",
                    summary, self._run_url(repo, run_id))
            runs.append(self._check_cache[key])
        return runs

    def _run_url(self, repo: Repository, run_id: int) -> str:
        return f"{self.base_url}/{repo.full_name}/runs/{run_id}"

    def _run_rule(self, repo: Repository, rule: CheckRule, sha: str) -> tuple[bool, str]:
        if rule.predicate is not None:
            outcome = rule.predicate(Tree(repo.path, sha))
            if isinstance(outcome, tuple):
                return bool(outcome[0]), str(outcome[1])
            return bool(outcome), ""
        assert rule.command is not None
        with tempfile.TemporaryDirectory(prefix="fake-gh-check-") as tmp:
            gitops.extract(repo.path, sha, Path(tmp))
            done = subprocess.run(list(rule.command), cwd=tmp, capture_output=True,
                                  timeout=120, check=False)
        output = (done.stdout + done.stderr).decode(errors="replace")
        return done.returncode == 0, output[-2000:]

    def status_contexts(self, repo: Repository, sha: str) -> list[StatusContext]:
        return list(repo.statuses.get(sha, {}).values())

    def rollup(self, repo: Repository, sha: str) -> str | None:
        runs = self.check_runs(repo, sha)
        contexts = self.status_contexts(repo, sha)
        if not runs and not contexts:
            return None
        if any(r.conclusion in FAILING_CONCLUSIONS for r in runs) or any(
                c.state in ("FAILURE", "ERROR") for c in contexts):
            return "FAILURE"
        if any(r.status != "COMPLETED" for r in runs) or any(
                c.state in ("PENDING", "EXPECTED") for c in contexts):
            return "PENDING"
        return "SUCCESS"

    def unmet_required_contexts(self, repo: Repository, sha: str) -> tuple[str, str] | None:
        """The first required context that is not SUCCESS on `sha`, and what it is
        (`expected` when absent, else `failing` or `pending`), as GitHub words it."""
        runs = {r.name: r for r in self.check_runs(repo, sha)}
        contexts = {c.context: c for c in self.status_contexts(repo, sha)}
        for name in repo.required_contexts:
            if name in contexts:
                state = contexts[name].state
                if state != "SUCCESS":
                    return name, "failing" if state in ("FAILURE", "ERROR") else "pending"
            elif name in runs:
                run = runs[name]
                if run.conclusion != "SUCCESS":
                    return name, "pending" if run.status != "COMPLETED" else "failing"
            else:
                return name, "expected"
        return None

    @staticmethod
    def permission(repo: Repository, login: str) -> str:
        """`login`'s permission on `repo`, lower case (`none` for a deleted account)."""
        if not login:
            return "none"
        return repo.collaborators.get(login, repo.default_permission)

    def is_writer(self, repo: Repository, login: str) -> bool:
        return self.permission(repo, login) in WRITE_PERMISSIONS

    def writers_opinions(self, repo: Repository, pr: Pull) -> list[Review]:
        """The latest opinions of reviewers with write access: the only ones GitHub's
        review decision counts (and `latestOpinionatedReviews(writersOnly: true)`)."""
        return [r for r in self.latest_opinions(pr) if self.is_writer(repo, r.author)]

    @staticmethod
    def latest_opinions(pr: Pull) -> list[Review]:
        latest: dict[str, Review] = {}
        for review in pr.reviews:
            if review.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
                latest[review.author] = review
        return [r for r in latest.values() if r.state != "DISMISSED"]

    def review_decision(self, repo: Repository, pr: Pull) -> str | None:
        if repo.required_approvals <= 0:
            return None  # GitHub answers null when the base branch requires no review
        opinions = self.writers_opinions(repo, pr)
        if any(r.state == "CHANGES_REQUESTED" for r in opinions):
            return "CHANGES_REQUESTED"
        approvals = sum(r.state == "APPROVED" for r in opinions)
        return "APPROVED" if approvals >= repo.required_approvals else "REVIEW_REQUIRED"

    # -- writes -------------------------------------------------------------------------
    def merge(self, repo: Repository, pr: Pull, sha: str | None) -> str:
        if pr.merged:
            raise MergeRefused(405, "Pull Request is not mergeable")
        if pr.state != "open":
            raise MergeRefused(422, "Pull Request is closed")
        if pr.draft:
            raise MergeRefused(405, "Pull Request is still a draft")
        head = self.head_sha(repo, pr)
        if sha and sha != head:
            raise MergeRefused(409, "Head branch was modified. Review and try the merge again.")
        if self.conflicts(repo, pr) is not None:
            raise MergeRefused(405, "Pull Request is not mergeable")
        if repo.require_checks and self.rollup(repo, head) not in (None, "SUCCESS"):
            raise MergeRefused(405, "Required status checks have not succeeded")
        missing = self.unmet_required_contexts(repo, head)
        if missing:
            raise MergeRefused(405, f"Required status check \"{missing[0]}\" is "
                                    f"{missing[1]}.")
        if self.review_decision(repo, pr) not in (None, "APPROVED"):
            raise MergeRefused(405, "At least 1 approving review is required")
        base = self.base_sha(repo, pr)
        merge_sha = gitops.merge_commit(
            repo.path, pr.base, base, head,
            f"Merge pull request #{pr.number} from {repo.owner}/{pr.head}\n\n{pr.title}")
        if self._refs is not None:
            self._refs.clear()  # the base branch moved
        pr.merged = True
        pr.state = "closed"
        pr.merged_at = pr.closed_at = self.timestamp()
        pr.merge_commit_sha = merge_sha
        pr.last_head_sha = head
        return merge_sha

    def close(self, pr: Pull) -> None:
        pr.state = "closed"
        pr.closed_at = self.timestamp()
