"""The fake GitHub server: real HTTP on 127.0.0.1 serving REST (`/api/v3`), GraphQL
(`/api/graphql`) and git smart HTTP (`/<owner>/<name>.git`, through `git http-backend` as a
CGI) over real bare repositories — the layout of GitHub Enterprise Server, so clients are
pointed at it with `base_url` / `GITHUB_API_URL` / `GITHUB_GRAPHQL_URL` / `GITHUB_SERVER_URL`.

Every request is recorded (method, path, status, whether it carried a token) so tests can
count them; faults from `faults` are injected by method and path prefix.
"""

from __future__ import annotations

import base64
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from delivery.testing.github import apps, graphql_api, limits, rest
from delivery.testing.github import issues_rest as _issues  # noqa: F401 - its routes
from delivery.testing.github.faults import Fault
from delivery.testing.github.http import FakeServer, RecordedRequest
from delivery.testing.github.state import (
    ActionsRun,
    CheckRule,
    Issue,
    IssueComment,
    LabelEvent,
    Pull,
    Repository,
    Review,
    ReviewThread,
    State,
)


class FakeGitHub:
    """A GitHub for tests. Use as a context manager (or `start()`/`stop()`)."""

    def __init__(self, root: Path | None = None, *, token: str = "fake-token-0123456789",
                 login: str = "delivery-bot", clock: Callable[[], float] = time.time,
                 latency: float = 0.0) -> None:
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="fake-github-")) if root is None else root
        self.token = token
        # more tokens accepted as the same identity (the Actions world's default
        # GITHUB_TOKEN beside the App's): who caused a change is the world's to track
        self.other_tokens: set[str] = set()
        self.login = login
        self.clock = clock
        self.latency = latency
        self.requests: list[RecordedRequest] = []
        self.faults: list[Fault] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.state = State(self.root / "repos", "http://127.0.0.1", clock)
        self._rest: rest.Rest | None = None
        # GitHub's secondary limits on content-creating requests: off unless switched on
        self.secondary_limits: limits.SecondaryLimits | None = None
        # GitHub's primary limit on every API request (REST and GraphQL pools): off too
        self.primary_limits: limits.PrimaryLimits | None = None
        # GitHub Apps, their installations and the tokens they mint (`register_app`)
        self.apps = apps.Apps(clock)

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        httpd = FakeServer(self)
        self._httpd = httpd
        self.state.base_url = self.server_url
        self._rest = rest.Rest(self.state, self.api_url, self.login)
        # A short poll interval: `stop()` waits for the loop to notice, once per test.
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.02,),
                                        name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the fake GitHub is not started"
        return int(self._httpd.server_address[1])

    @property
    def server_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.server_url}/api/v3"

    @property
    def graphql_url(self) -> str:
        return f"{self.server_url}/api/graphql"

    def env(self) -> dict[str, str]:
        """The variables Actions sets, pointing at this server."""
        return {"GITHUB_API_URL": self.api_url, "GITHUB_GRAPHQL_URL": self.graphql_url,
                "GITHUB_SERVER_URL": self.server_url, "GITHUB_TOKEN": self.token}

    def register_app(self, app_id: int = 4242, *,
                     token_lifetime: float = 3600.0) -> apps.FakeApp:
        """A GitHub App (its key in `app.private_key_pem`); `app.install(owner)` installs
        it. Its installation tokens expire `token_lifetime` seconds after they are minted.
        Its JWTs are checked on the fake's clock, which PyGithub's signing reads as real
        time: leave the fake on real time (its default) for App clients."""
        return self.apps.register(app_id, token_lifetime)

    def app_env(self, app: apps.FakeApp) -> dict[str, str]:
        """`env()` for a client authenticating as `app`: its id and key, no GITHUB_TOKEN."""
        urls = {k: v for k, v in self.env().items() if k != "GITHUB_TOKEN"}
        return urls | app.env()

    def git_auth_header(self) -> str:
        """The header git sends (`http.extraHeader`), as GitHub accepts it."""
        pair = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        return f"Authorization: Basic {pair}"

    # -- the world, changed as a person would -------------------------------------------
    def create_repo(self, full_name: str, *, files: dict[str, str] | None = None,
                    default_branch: str = "main", check_rules: tuple[CheckRule, ...] = (),
                    required_approvals: int = 0, require_checks: bool = False,
                    collaborators: dict[str, str] | None = None,
                    default_permission: str = "write", topics: tuple[str, ...] = (),
                    archived: bool = False, fork: bool = False,
                    description: str = "") -> Repository:
        """`collaborators`: people's permissions by login; anyone else has
        `default_permission` (`read`: a public repository, where strangers may review and
        comment; the fake's default lets every person a test names steer). `topics`,
        `archived`, `fork` and `description` are what the repository search matches."""
        _check_permission(default_permission, "none")
        with self.state.lock:
            repo = self.state.add_repo(full_name, default_branch=default_branch, files=files)
            repo.check_rules = list(check_rules)
            repo.required_approvals = required_approvals
            repo.require_checks = require_checks
            repo.collaborators = dict(collaborators or {})
            repo.default_permission = default_permission
            repo.topics, repo.archived = list(topics), archived
            repo.fork, repo.description = fork, description
            return repo

    def set_permission(self, full_name: str, login: str, permission: str) -> None:
        """`login`'s permission on the repository (`read`: a stranger; `name[bot]`: an
        App's bot account, which has none unless given one)."""
        _check_permission(permission, "none")
        with self.state.lock:
            self.repository(full_name).collaborators[login] = permission

    def repository(self, full_name: str) -> Repository:
        repo = self.state.repo(full_name)
        if repo is None:
            raise KeyError(f"no repository {full_name} on the fake GitHub")
        return repo

    def pull(self, full_name: str, number: int) -> Pull:
        return self.repository(full_name).pulls[number]

    def push_files(self, full_name: str, branch: str, files: dict[str, str | None],
                   message: str = "change", *, start: str | None = None) -> str:
        """Commit on `branch` (created from `start`, default the default branch) as a push
        would; returns the new head SHA."""
        from delivery.testing.github import gitops
        with self.state.lock:
            repo = self.repository(full_name)
            if start is None and gitops.ref_sha(repo.path, branch) is None:
                start = repo.default_branch
            return gitops.commit_files(repo.path, branch, files, message, start=start)

    def open_pull(self, full_name: str, head: str, *, base: str | None = None,
                  title: str = "", body: str = "", author: str = "octocat",
                  draft: bool = False) -> int:
        repo = self.repository(full_name)
        answer = self._handle_rest("POST", f"/repos/{full_name}/pulls", "",
                                   {"head": head, "base": base or repo.default_branch,
                                    "title": title or head, "body": body, "draft": draft})
        if answer[0] != 201:
            raise ValueError(f"cannot open a PR for {head}: {answer[2]}")
        number = int(answer[2]["number"])
        self.pull(full_name, number).author = author
        return number

    def open_fork_pull(self, full_name: str, head: str, *, fork_owner: str,
                       files: dict[str, str | None], title: str = "", body: str = "",
                       base: str | None = None) -> int:
        """`fork_owner` (anyone, on a public repository) opens a PR from branch `head` of
        their fork `fork_owner/<name>` into `full_name`: its commit (`files` on the base)
        is kept in the base repository as `refs/pull/<n>/head`, as GitHub keeps it; no
        branch of `full_name` is created or touched. The PR's number."""
        from delivery.testing.github import gitops
        with self.state.lock:
            repo = self.repository(full_name)
            base = base or repo.default_branch
            number = repo.next_number()
            scratch = f"fork-pull-{number}"  # committed on a scratch branch, then moved
            sha = gitops.commit_files(repo.path, scratch, files, title or head, start=base)
            gitops.git(repo.path, "update-ref", f"refs/pull/{number}/head", sha)
            gitops.git(repo.path, "update-ref", "-d", f"refs/heads/{scratch}", sha)
            repo.pulls[number] = Pull(
                number=number, title=title or head, body=body, head=head, base=base,
                author=fork_owner, created_at=self.state.timestamp(), last_head_sha=sha,
                fork=f"{fork_owner}/{repo.name}")
            return number

    def create_issue(self, full_name: str, title: str, *, author: str = "octocat") -> int:
        """An issue (a ticket); its number comes from the sequence PRs share."""
        with self.state.lock:
            repo = self.repository(full_name)
            number = repo.next_number()
            repo.issues[number] = Issue(number, title, author, self.state.timestamp())
            return number

    def add_label(self, full_name: str, number: int, label: str, *,
                  actor: str = "octocat") -> None:
        """`actor` labels issue or PR `number` (a `LabeledEvent` on its timeline)."""
        with self.state.lock:
            repo = self.repository(full_name)
            if number not in repo.pulls and number not in repo.issues:
                raise KeyError(f"{full_name} has no issue or PR #{number}")
            names = repo.labels.setdefault(number, [])
            if label not in names:
                names.append(label)
                repo.label_events.setdefault(number, []).append(
                    LabelEvent("LabeledEvent", label, actor, self.state.timestamp()))

    def remove_label(self, full_name: str, number: int, label: str, *,
                     actor: str = "octocat") -> None:
        with self.state.lock:
            repo = self.repository(full_name)
            names = repo.labels.get(number, [])
            if label in names:
                names.remove(label)
                repo.label_events.setdefault(number, []).append(
                    LabelEvent("UnlabeledEvent", label, actor, self.state.timestamp()))

    def set_draft(self, full_name: str, number: int, draft: bool = True) -> None:
        """Convert a PR to a draft, or mark it ready for review (`draft=False`)."""
        with self.state.lock:
            self.pull(full_name, number).draft = draft

    def add_review(self, full_name: str, number: int, author: str, state: str,
                   body: str = "") -> None:
        """`state`: APPROVED, CHANGES_REQUESTED, COMMENTED or DISMISSED."""
        with self.state.lock:
            repo = self.repository(full_name)
            rest.add_review(self.state, repo, repo.pulls[number], author, state, body)

    def add_thread(self, full_name: str, number: int, *, author: str = "reviewer",
                   path: str = "README.md", line: int = 1, body: str = "please fix",
                   resolved: bool = False) -> ReviewThread:
        with self.state.lock:
            return rest.add_thread(self.state, self.pull(full_name, number), author, path,
                                   line, body, resolved)

    def add_comment(self, full_name: str, number: int, *, author: str,
                    body: str) -> IssueComment:
        """A comment on PR or issue `number` written by someone other than the token."""
        with self.state.lock:
            repo = self.repository(full_name)
            stamp = self.state.timestamp()
            comment = IssueComment(self.state.next_id(), number, author, body, stamp, stamp)
            repo.comments[comment.id] = comment
            return comment

    @staticmethod
    def thread_node_id(thread: ReviewThread) -> str:
        """The thread's GraphQL node id: what the probe reports in `<f>.threads.ids`."""
        return graphql_api.node_id("PullRequestReviewThread", thread.id)

    @staticmethod
    def review_node_id(review: Review) -> str:
        return graphql_api.node_id("PullRequestReview", review.id)

    def resolve_thread(self, full_name: str, number: int, thread_id: int) -> None:
        with self.state.lock:
            for thread in self.pull(full_name, number).threads:
                if thread.id == thread_id:
                    thread.resolved = True

    def set_status(self, full_name: str, sha: str, context: str, state: str,
                   target_url: str = "", description: str = "") -> None:
        self._handle_rest("POST", f"/repos/{full_name}/statuses/{sha}", "",
                          {"context": context, "state": state.lower(),
                           "target_url": target_url, "description": description})

    def protect(self, full_name: str, *, required_contexts: tuple[str, ...] = (),
                required_approvals: int | None = None) -> None:
        """Branch protection on the default branch: these status contexts (or check
        names) must succeed on a PR's head, and this many approvals be given, before any
        merge — the run's or a person's — is accepted."""
        with self.state.lock:
            repo = self.repository(full_name)
            repo.required_contexts = list(required_contexts)
            if required_approvals is not None:
                repo.required_approvals = required_approvals

    def hide_branch_protection(self, full_name: str) -> None:
        """The token cannot read the repository's branch protection: GraphQL answers
        `branchProtectionRule` and `refUpdateRule` null (it still applies to merges)."""
        with self.state.lock:
            self.repository(full_name).protection_readable = False

    def status_of(self, full_name: str, sha: str, context: str) -> tuple[str, str] | None:
        """(state, description) of `context` on commit `sha`, None when it has none."""
        with self.state.lock:
            found = self.repository(full_name).statuses.get(sha, {}).get(context)
            return (found.state, found.description) if found else None

    def record_actions_run(self, full_name: str, run_id: int, status: str,
                           conclusion: str = "", attempt: int = 1) -> None:
        """An Actions workflow run of `full_name` as GitHub reports it (the simulated
        Actions world records each job's run: in progress, then completed)."""
        with self.state.lock:
            self.repository(full_name).actions_runs[run_id] = ActionsRun(
                run_id, status, conclusion, attempt)

    def hold_checks(self, full_name: str, hold: bool = True) -> None:
        """While held, checks of commits not yet checked stay in progress."""
        with self.state.lock:
            self.repository(full_name).hold_checks = hold

    def set_mergeability_delay(self, full_name: str, reads: int) -> None:
        """Mergeability reads answering UNKNOWN after each change of head or base, as
        GitHub does while it computes the test merge."""
        with self.state.lock:
            self.repository(full_name).mergeability_delay = reads

    def merge(self, full_name: str, number: int) -> str:
        with self.state.lock:
            repo = self.repository(full_name)
            return self.state.merge(repo, repo.pulls[number], None)

    def close(self, full_name: str, number: int) -> None:
        with self.state.lock:
            self.state.close(self.pull(full_name, number))

    def reopen(self, full_name: str, number: int) -> None:
        """A person reopens a PR they closed (a merged one stays merged), as GitHub does."""
        with self.state.lock:
            pr = self.pull(full_name, number)
            if pr.state == "closed" and not pr.merged:
                pr.state, pr.closed_at = "open", None

    def set_token_permission(self, full_name: str, permission: str) -> None:
        """What the token may do on the repository: `admin`, `maintain`, `write`,
        `triage` or `read` (below `write`: pushes and REST writes answer 403)."""
        _check_permission(permission)
        with self.state.lock:
            self.repository(full_name).token_permission = permission

    def deny_token(self, full_name: str, *permissions: str) -> None:
        """The App's token lacks these repository permissions (`pull_requests`,
        `contents`, `issues`, `statuses`): their writes answer 403."""
        with self.state.lock:
            self.repository(full_name).token_denied = set(permissions)

    def allow_merge_methods(self, full_name: str, *methods: str) -> None:
        """The repository's settings allow only these of merge, squash and rebase."""
        with self.state.lock:
            self.repository(full_name).merge_methods = tuple(methods)

    def enforce_secondary_limits(self, *, per_minute: int = 80, per_hour: int = 500,
                                 status: int = 403) -> limits.SecondaryLimits:
        """Switch on GitHub's secondary limits (on the fake's clock, per token):
        content-creating requests past them answer `status` (403 or 429, as GitHub may)
        with `Retry-After` and GitHub's message."""
        self.secondary_limits = limits.SecondaryLimits(self.clock, per_minute, per_hour,
                                                       status)
        return self.secondary_limits

    def enforce_primary_limits(self, *, per_hour: int = 5000,
                               graphql_per_hour: int = 5000) -> limits.PrimaryLimits:
        """Switch on GitHub's primary limit (on the fake's clock, per token and pool):
        every API answer says what is left (`x-ratelimit-*`); past it REST answers 403
        and GraphQL a `RATE_LIMITED` error, both with `x-ratelimit-reset`. `None` on
        `primary_limits` switches it off."""
        self.primary_limits = limits.PrimaryLimits(self.clock, per_hour, graphql_per_hour)
        return self.primary_limits

    def write_requests(self) -> list[RecordedRequest]:
        """Every request that could have changed something: REST writes, GraphQL
        mutations and git pushes (`git-receive-pack` POSTs)."""
        return [r for r in list(self.requests)
                if limits.content_creating(r.method, r.path, r.body)
                or (r.method == "POST" and r.path.endswith("/git-receive-pack"))]

    # -- faults and the request record ----------------------------------------------------
    def inject(self, *faults: Fault) -> None:
        with self.state.lock:
            self.faults.extend(faults)

    def count(self, method: str | None = None, path: str = "") -> int:
        return sum(1 for r in list(self.requests)
                   if (method is None or r.method == method) and r.path.startswith(path))

    def clear_requests(self) -> None:
        self.requests.clear()

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self.state.lock:
            for fault in self.faults:
                if fault.kind not in ("race",) and fault.matches(method, path):
                    fault.times -= 1
                    return fault.drawn(method, path)
        return None

    def _races(self, method: str, path: str) -> list[Fault]:
        with self.state.lock:
            return [f for f in self.faults if f.kind == "race" and f.matches(method, path)]

    def _apply_race(self, fault: Fault) -> None:
        if fault.action == "open":
            self.open_pull(fault.repository, fault.head, author="someone-else")
            return
        if fault.action == "call":
            if fault.then is not None:
                fault.then()
            return
        with self.state.lock:
            repo = self.state.repo(fault.repository)
            pr = repo.pulls.get(fault.number) if repo else None
            if repo is None or pr is None or pr.state != "open":
                return
            if fault.action == "merge":
                self.state.merge(repo, pr, None)
            else:
                self.state.close(pr)

    def _handle_rest(self, method: str, path: str, query: str,
                     body: Any) -> rest.Answer:
        assert self._rest is not None
        return self._rest.handle(method, path, query, body)

    def _handle_graphql(self, body: Any, races: list[Fault],
                        visible: Callable[[str], bool] | None = None) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return {"errors": [{"message": "A query attribute must be specified and must be"
                                           " a string."}]}
        during = [f for f in races if f.during]

        def on_state_read(repo: Repository, pr: Pull) -> None:
            for fault in during:
                if (fault.times > 0 and fault.repository.lower() == repo.full_name.lower()
                        and fault.number == pr.number):
                    fault.times = 0
                    self._apply_race(fault)

        resolvers = graphql_api.Resolvers(self.state, on_state_read, self.login, visible)
        with self.state.lock:
            return graphql_api.execute(resolvers, body["query"], body.get("variables"))

    def _authorized(self, header: str | None, git: bool) -> bool:
        if not header:
            return False
        scheme, _, value = header.partition(" ")
        accepted = {self.token, *self.other_tokens}
        if scheme.lower() in ("token", "bearer"):
            return value.strip() in accepted
        if git and scheme.lower() == "basic":
            try:
                _, _, password = base64.b64decode(value.strip()).decode().partition(":")
            except ValueError:
                return False
            return password in accepted
        return False


def _check_permission(permission: str, *also: str) -> None:
    if permission not in ("admin", "maintain", "write", "triage", "read", *also):
        raise ValueError(f"no such permission: {permission}")


@contextmanager
def fake_github(root: Path | None = None, **options: Any) -> Iterator[FakeGitHub]:
    """A started fake GitHub, stopped on exit."""
    server = FakeGitHub(root, **options)
    with server:
        yield server
