"""The GitHub forge (SPEC §7.1): writes through the REST API with PyGithub's object model
(PRs, comments, merges, branches), GraphQL and raw REST through the one GitHub client
(`probes.github_client`: the probe's query, review threads, reverts, the stop label,
preflight, commit statuses), git over HTTPS with the token as a header. The token is a
`GITHUB_TOKEN` or a GitHub App's installation token per owner, asked for at each request
(`github_auth`, `github_sessions`).

Every answer, PyGithub's `GithubException` included, is classified by the same rules
(`probes.github_errors.classify_answer`) and retried by the same policy (`probes.retry`).
Writes are never retried blindly. PyGithub's own retries are off (`retry=None`: it would
repeat a POST after a 502 that may have created the PR); every retry here is made
idempotent by looking for the effect first — a PR for the head branch, a comment with the
marker, a merged PR — and a PATCH that sets a value is simply repeated. Reads and the
look-ups are retried on 5xx, dropped connections and rate limits (honouring `Retry-After`
and `x-ratelimit-reset`) within a budget; sleep and clock are injectable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import requests
from github import GithubException
from github.PullRequest import PullRequest
from github.Repository import Repository

from delivery.errors import ForgeError
from delivery.forges import github_threads as gt
from delivery.forges.base import GitRemote, MergeResult, PullRequestRef, ThreadReply
from delivery.forges.github_auth import StaticToken, TokenSource, git_remote_for, token_source
from delivery.forges.github_issues import upsert_tracking_issue
from delivery.forges.github_pulls import READY_MUTATION as READY_MUTATION
from delivery.forges.github_pulls import REVERT_MUTATION as REVERT_MUTATION
from delivery.forges.github_pulls import loaded as _loaded
from delivery.forges.github_pulls import merge_verdict as _merge_verdict
from delivery.forges.github_pulls import pull_ref as _ref
from delivery.forges.github_pulls import split as _split
from delivery.forges.github_sessions import Sessions
from delivery.forges.pacing import Pacer
from delivery.forges.stop_label import Stop, StopTarget, first_stop, stop_query
from delivery.token_permissions import missing
from probes.evidence import PrObservation, PrQuery
from probes.github import GitHubUnavailable, ProbeRateLimited
from probes.github_client import DEFAULT_API_URL, graphql_url_from_environment
from probes.github_errors import (
    ConnectionFailed,
    GitHubError,
    NotFound,
    RateLimited,
    Rejected,
    TokenRefused,
    Transient,
    answer_message,
    classify_answer,
    graphql_error_text,
)
from probes.labels import TicketLabels
from probes.retry import RetryBudget, call_with_retries, write_with_retries

DEFAULT_SERVER_URL = "https://github.com"
T = TypeVar("T")


class GitHubForge:
    """`delivery.forges.base.Forge` for GitHub (github.com or GitHub Enterprise Server)."""

    name = "github"

    def __init__(self, token: str | TokenSource, *, api_url: str = DEFAULT_API_URL,
                 graphql_url: str | None = None, server_url: str = DEFAULT_SERVER_URL,
                 budget: RetryBudget | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time, timeout: int = 30,
                 pacer: Pacer | None = None) -> None:
        self._auth = StaticToken(token) if isinstance(token, str) else token
        if isinstance(self._auth, StaticToken) and not self._auth.value:
            raise ForgeError("github", "-", "authenticate", "no token was given",
                             "set GITHUB_TOKEN to a token that can write to the repositories "
                             "(in an Action: a GitHub App installation token, not the "
                             "default one), or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY")
        self.token_source = self._auth  # GITHUB_TOKEN's, or the App's (preflight asks it)
        self.api_url = api_url.rstrip("/")
        self.server_url = server_url.rstrip("/")
        self.budget = budget or RetryBudget()
        self._sleep = sleep
        self._clock = clock
        # one token's content-creating requests, serial and spaced (forges.pacing)
        self.pacer = pacer or Pacer(clock=clock, sleep=sleep)
        self.graphql_url = graphql_url or graphql_url_from_environment(
            {"GITHUB_API_URL": self.api_url})
        # PyGithub, and one client for GraphQL and raw REST shared with the probe, per token
        self._sessions = Sessions(self._auth, api_url=self.api_url,
                                  graphql_url=self.graphql_url, budget=self.budget,
                                  sleep=sleep, clock=clock, timeout=timeout)
        # Folder stages call the forge from several threads (SPEC §8.1). PyGithub's one
        # persistent connection object holds each request's method and URL between
        # `request()` and `getresponse()` (PyGithub/PyGithub#2052), so two threads could
        # send each other's request: its requests go one at a time. (GitHub asks for
        # serial requests anyway; git's fetches and pushes still overlap.)
        self._rest_lock = threading.RLock()
        self._login: str | None = None
        self.closed = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], *,
                         on_token: Callable[[str], None] | None = None,
                         **options: Any) -> GitHubForge:
        """As inside Actions: `GITHUB_TOKEN` or a GitHub App's credentials (`github_auth`;
        `on_token` is told each token minted), `GITHUB_API_URL`, `GITHUB_GRAPHQL_URL`,
        `GITHUB_SERVER_URL` (public GitHub when unset)."""
        if options.get("pacer") is None:
            options["pacer"] = Pacer.from_environment(
                environ, clock=options.get("clock", time.time),
                sleep=options.get("sleep", time.sleep))
        api_url = environ.get("GITHUB_API_URL") or DEFAULT_API_URL
        auth = token_source(environ, api_url=api_url, on_token=on_token,
                            clock=options.get("clock", time.time),
                            sleep=options.get("sleep", time.sleep))
        return cls(auth, api_url=api_url,
                   graphql_url=graphql_url_from_environment(environ),
                   server_url=environ.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL,
                   **options)

    def __repr__(self) -> str:
        return f"GitHubForge(api_url={self.api_url!r})"

    def close(self) -> None:
        """Ends the REST connections (PyGithub's) and the client's (GraphQL and raw REST)."""
        self._sessions.close()
        self.closed = True

    # -- reads ----------------------------------------------------------------------------
    def pull_requests(self, queries: Sequence[PrQuery]) -> Mapping[str, PrObservation]:
        return self.observe(queries, None)[0]

    def observe(self, queries: Sequence[PrQuery], ticket: tuple[str, int] | None
                ) -> tuple[Mapping[str, PrObservation], TicketLabels | None]:
        """The probe with the ticket issue's labels (`stop_label.LabelledProbe`); a rate
        limit past the retry budget pauses the run (RateLimitPause), as a write's does."""
        try:
            return self._sessions.observe(queries, ticket)
        except ProbeRateLimited as error:
            raise self.pacer.pause_for(error.wait, f"{error.reason} while reading the PRs"
                                       ) from None

    def git_remote(self, repository: str) -> GitRemote:
        owner, name = _split(repository)
        return git_remote_for(self._auth, f"{self.server_url}/{owner}/{name}.git", repository)

    def default_branch(self, repository: str) -> str:
        return self._retry("read the repository", repository,
                           lambda: str(self._repo(repository).default_branch))

    def permission(self, repository: str, user: str) -> str:
        """`admin`, `maintain`, `write`, `triage`, `read` or `none` (SPEC §14: who may
        trigger a run is checked through the API)."""
        return self._retry("read a collaborator's permission", repository,
                           lambda: str(self._repo(repository)
                                       .get_collaborator_permission(user)))

    def pull_request_body(self, repository: str, number: int) -> str:
        """The PR's body as it is now (a run's id is in its marked block)."""
        return self._retry("read a pull request", repository,
                           lambda: str(self._repo(repository).get_pull(number).body or ""))

    def open_pull_requests(self, repository: str, branch: str) -> list[int]:
        """The numbers of the open PRs whose head is `branch` of `repository` (a commit
        status event names branches, not PRs)."""
        owner, _ = _split(repository)
        return self._retry("list pull requests", repository, lambda: [
            int(pr.number) for pr in self._repo(repository).get_pulls(
                state="open", head=f"{owner}:{branch}")])

    def pull_request_head(self, repository: str, number: int) -> tuple[str, str, str]:
        """(body, head branch, head repository `owner/name`) of the PR as it is now: what
        `--for-pr` checks before it lets the PR steer a run (SPEC §13)."""
        def read() -> tuple[str, str, str]:
            pr = self._repo(repository).get_pull(number)
            head_repo = pr.head.repo.full_name if pr.head.repo is not None else ""
            return str(pr.body or ""), str(pr.head.ref or ""), str(head_repo or "")

        return self._retry("read a pull request", repository, read)

    # -- writes ---------------------------------------------------------------------------
    def find_pull_request(self, repository: str, *, head: str) -> PullRequestRef | None:
        found = self._retry(f"look for the PR of {head}", repository,
                            self._finder(repository, head))
        return None if found is None else _ref(repository, found, created=False)

    def _finder(self, repository: str, head: str) -> Callable[[], PullRequest | None]:
        repo = self._repo(repository)
        owner, _ = _split(repository)

        def find() -> PullRequest | None:
            pulls = list(repo.get_pulls(state="all", head=f"{owner}:{head}",
                                        direction="desc"))
            open_ = [p for p in pulls if p.state == "open"]
            return open_[0] if open_ else (pulls[0] if pulls else None)

        return find

    def find_or_create_pull_request(self, repository: str, *, head: str, base: str,
                                    title: str, body: str,
                                    draft: bool = False) -> PullRequestRef:
        repo = self._repo(repository)
        find = self._finder(repository, head)
        existing = self._retry(f"look for the PR of {head}", repository, find)
        if existing is not None:
            return _ref(repository, existing, created=False)
        operation = f"open a PR for {head}"
        invalid: list[GithubException] = []

        def create() -> PullRequest | None:
            try:
                return repo.create_pull(base=base, head=head, title=title, body=body,
                                        draft=draft)
            except GithubException as error:
                if error.status != 422:
                    raise
                invalid.append(error)
                return None

        created = self._write(operation, repository, create, find_effect=find)
        if created is None:
            # 422: one reason is a PR another writer opened since our look, which GitHub
            # says only in English prose ("A pull request already exists"): look again
            found = self._retry(operation, repository, find)
            if found is not None:
                return _ref(repository, found, created=False)
            raise ForgeError("github", repository, operation,
                             f"HTTP 422: {answer_message(422, invalid[-1].data)}")
        return _ref(repository, created, created=True)

    def update_pull_request_body(self, repository: str, number: int, body: str) -> None:
        repo = self._repo(repository)
        pr = self._read_pr(repo, repository, number)
        if (pr.body or "") == body:
            return
        # Setting a value is idempotent: repeating the PATCH is safe.
        self._set(f"update the body of PR #{number}", repository,
                  lambda: pr.edit(body=body))

    def merge_pull_request(self, repository: str, number: int, *,
                           expected_head_sha: str, method: str = "merge") -> MergeResult:
        """`method` (merge, squash, rebase): the merge node's; merge, as GitHub's own
        default and every forge's (`Forge`), when it names none."""
        repo = self._repo(repository)
        pr = self._read_pr(repo, repository, number)
        verdict = _merge_verdict(repository, pr, expected_head_sha)
        if verdict is not None:
            return verdict

        def merged_meanwhile() -> PullRequest | None:
            again = repo.get_pull(number)
            return again if again.merged else None

        try:
            status = self._write(
                f"merge PR #{number}", repository,
                lambda: pr.merge(sha=expected_head_sha, merge_method=method),
                find_effect=merged_meanwhile)
        except ForgeError as error:
            again = self._read_pr(repo, repository, number)
            if again.merged:
                return MergeResult(repository, number, "already_merged",
                                   merge_sha=again.merge_commit_sha or "")
            return MergeResult(repository, number, "refused", reason=error.problem)
        if isinstance(status, PullRequest):  # the lost answer's merge was found
            return MergeResult(repository, number, "merged",
                               merge_sha=status.merge_commit_sha or "")
        if not status.merged:
            return MergeResult(repository, number, "refused", reason=status.message)
        return MergeResult(repository, number, "merged", merge_sha=status.sha or "")

    def mark_ready_for_review(self, repository: str, number: int) -> None:
        """GraphQL `markPullRequestReadyForReview` (REST has no way): setting a state, so
        a lost answer is simply repeated; a PR that is no draft is left alone."""
        pr = self._read_pr(self._repo(repository), repository, number)
        if not pr.draft:
            return
        operation = f"mark PR #{number} ready for review"
        self._set(operation, repository,
                  lambda: self._graphql(operation, repository, READY_MUTATION,
                                        {"pr": pr.node_id}))

    def close_pull_request(self, repository: str, number: int, *, comment: str = "",
                           marker: str = "") -> None:
        """The comment first (find-or-create by `marker`: a close run again posts none),
        so the PR says why it was closed; then the PATCH, which sets a state."""
        repo = self._repo(repository)
        pr = self._read_pr(repo, repository, number)
        if pr.state != "open":  # closed or merged: left as it is
            return
        if comment:
            self.upsert_comment(repository, number, marker or comment, comment)
        self._set(f"close PR #{number}", repository, lambda: pr.edit(state="closed"))

    def upsert_comment(self, repository: str, number: int, marker: str, body: str) -> int:
        """The PR comment holding `marker` gets `body` (which must contain the marker);
        created once, edited afterwards. Returns the comment's id."""
        if marker not in body:
            raise ValueError("the comment body must contain its marker")
        repo = self._repo(repository)

        login = self.viewer_login(repository)

        def find() -> Any:
            # Only the token's own comments: anyone can copy the marker into theirs, and a
            # person's words are never overwritten.
            for comment in repo.get_issue(number).get_comments():
                if marker in (comment.body or "") and comment.user is not None \
                        and comment.user.login == login:
                    return comment
            return None

        existing = self._retry(f"read the comments of PR #{number}", repository, find)
        if existing is not None:
            if existing.body != body:
                self._set(f"edit a comment of PR #{number}", repository,
                          lambda: existing.edit(body))
            return int(existing.id)
        issue = repo.get_issue(number)
        created = self._write(f"comment on PR #{number}", repository,
                              lambda: issue.create_comment(body), find_effect=find)
        return int(created.id)

    def upsert_tracking_issue(self, repository: str, marker: str, title: str, body: str,
                              *, known: int = 0) -> int:
        """The token's issue holding `marker` (the change set's dashboard), found (issue
        `known` first) or opened, with `body`; its number (`github_issues`)."""
        return upsert_tracking_issue(self, repository, marker, title, body, known=known)

    def viewer_login(self, repository: str) -> str:
        """The login the token acts as (`name[bot]` for an App), asked once: GraphQL's
        `viewer` answers installation tokens too, where REST's `GET /user` does not."""
        if self._login is None:
            # a read: a GraphQL error without a type (a timeout) is retried, not fatal
            data = self.graphql_read("read who the token is", repository,
                                     "query { viewer { login } }", {})
            login = ((data.get("data") or {}).get("viewer") or {}).get("login")
            if not isinstance(login, str) or not login:
                raise ForgeError("github", repository, "read who the token is",
                                 "GraphQL's viewer has no login",
                                 "check that GITHUB_TOKEN is a valid token")
            self._login = login
        return self._login

    def set_commit_status(self, repository: str, sha: str, *, context: str, state: str,
                          description: str, target_url: str = "") -> None:
        """The commit status `context` of `sha` becomes `state` (the change set's, SPEC
        §7.1). Setting a value is idempotent (the latest status of a context wins), so a
        lost answer is simply repeated."""
        owner, name = _split(repository)
        payload: dict[str, Any] = {"state": state, "context": context,
                                   "description": description}
        if target_url:
            payload["target_url"] = target_url
        self._set(f"set the {context} status of {sha[:12]}", repository,
                  lambda: self._sessions.of(repository).client.rest_once(
                      "POST", f"/repos/{owner}/{name}/statuses/{sha}", json=payload))

    def revert_pull_request(self, repository: str, number: int, *, title: str,
                            body: str) -> PullRequestRef:
        """A PR reverting merged PR `number` (GraphQL `revertPullRequest`, as GitHub's
        Revert button), found by its head branch `revert-<number>-<head>` before one is
        opened: a stage run again never opens a second."""
        repo = self._repo(repository)
        owner, _ = _split(repository)
        pr = self._read_pr(repo, repository, number)
        head = f"revert-{number}-{pr.head.ref}"
        operation = f"open a PR reverting #{number}"

        def find() -> PullRequest | None:
            pulls = list(repo.get_pulls(state="all", head=f"{owner}:{head}",
                                        direction="desc"))
            return pulls[-1] if pulls else None  # the first revert opened

        existing = self._retry(f"look for the revert of #{number}", repository, find)
        if existing is not None:
            return _ref(repository, existing, created=False)
        answer = self._write(operation, repository,
                             lambda: self._graphql(operation, repository, REVERT_MUTATION,
                                                   {"pr": pr.node_id, "title": title,
                                                    "body": body}),
                             find_effect=find)
        if isinstance(answer, PullRequest):  # the lost answer's revert was found
            return _ref(repository, answer, created=False)
        node = ((answer.get("data") or {}).get("revertPullRequest") or {}).get(
            "revertPullRequest") or {}
        return PullRequestRef(repository=repository, number=int(node.get("number") or 0),
                              url=str(node.get("url") or ""),
                              head_ref=str(node.get("headRefName") or head), created=True,
                              body=body)

    # -- review threads (SPEC §7.1 `respond`), through GraphQL ---------------------------
    def reply_to_review_thread(self, repository: str, number: int, thread_id: str, *,
                               body: str, marker: str) -> ThreadReply:
        if marker not in body:
            raise ValueError("the reply must contain its marker")
        operation = f"reply in review thread {thread_id} of PR #{number}"

        def find() -> ThreadReply | None:
            return self._find_reply(repository, number, thread_id, marker)

        existing = self._retry(operation, repository, find)
        if existing is not None:
            return existing
        answer = self._write(operation, repository,
                             lambda: self._graphql(operation, repository, gt.REPLY_MUTATION,
                                                   {"thread": thread_id, "body": body}),
                             find_effect=find)
        if isinstance(answer, ThreadReply):  # the lost answer's reply was found
            return answer
        return ThreadReply(thread_id, gt.reply_id(answer), created=True)

    def resolve_review_thread(self, repository: str, number: int, thread_id: str) -> None:
        operation = f"resolve review thread {thread_id} of PR #{number}"
        # the thread is checked first: it must be one of this PR's (never another's)
        page = self._thread_page(repository, number, thread_id, None)
        if page.resolved:
            return
        # resolving is idempotent: repeating the mutation is safe
        self._set(operation, repository,
                  lambda: self._graphql(operation, repository, gt.RESOLVE_MUTATION,
                                        {"thread": thread_id}))

    def _find_reply(self, repository: str, number: int, thread_id: str,
                    marker: str) -> ThreadReply | None:
        return gt.find_reply(lambda before: self._thread_page(repository, number, thread_id,
                                                              before), thread_id, marker)

    def _thread_page(self, repository: str, number: int, thread_id: str,
                     before: str | None) -> gt.ThreadPage:
        operation = f"read review thread {thread_id} of PR #{number}"
        data = self._retry(operation, repository,
                           lambda: self._graphql(operation, repository,
                                                 gt.THREAD_COMMENTS_QUERY,
                                                 {"thread": thread_id, "before": before}))
        return gt.checked_page(data, "/".join(_split(repository)), number, thread_id,
                               operation)

    # -- the stop switch (SPEC §7.1): one query over the set's PRs and the ticket --------
    def stop_label(self, targets: Sequence[StopTarget]) -> Stop | None:
        """Where `delivery:stop` is set, and who set it; None when nowhere. A target that
        is gone (a deleted ticket) reads as unlabelled: the rest of the answer stands."""
        if not targets:
            return None
        merged: dict[str, Any] = {}  # a query per token, answers under `s<i>` of all
        for positions in self._sessions.groups(t.repository for t in targets).values():
            data = self._stop_labels([targets[i] for i in positions])
            merged.update({f"s{at}": data.get(f"s{j}") for j, at in enumerate(positions)})
        return first_stop(targets, merged, self._steers)

    def _stop_labels(self, targets: Sequence[StopTarget]) -> dict[str, Any]:
        text, variables = stop_query(targets)
        repository = targets[0].repository
        client = self._sessions.of(repository).client

        def read() -> dict[str, Any]:
            data = client.graphql_once(text, variables, partial=True)
            # a gone target reads as unlabelled; one that cannot be read must not
            if any(not (isinstance(e, dict) and e.get("type") == "NOT_FOUND")
                   for e in data.get("errors") or []):
                raise Rejected(graphql_error_text(data))
            return data

        data = self._retry("read the stop label", repository, read,
                           fix="check that the token may read the repositories' PRs "
                               "and issues")
        return dict(data.get("data") or {})

    # -- who steers (SPEC §14): the workflow's trusted bots, users with write permission --
    def trust_bots(self, logins: Iterable[str]) -> None:
        """The bot accounts (`name[bot]`) whose reviews, threads and labels count."""
        self._sessions.stewards.trust(logins)

    def _steers(self, repository: str, login: str) -> str | None:
        try:
            return self._sessions.of(repository).probe.why_ignored(repository, login)
        except ProbeRateLimited as error:
            raise self.pacer.pause_for(error.wait, f"{error.reason} while reading who set "
                                       "the stop label") from None
        except GitHubUnavailable as error:
            raise ForgeError("github", repository, "read who set the stop label", str(error),
                             "give the token push access to the repository") from None

    def graphql_read(self, operation: str, repository: str, query: str,
                     variables: Mapping[str, Any]) -> dict[str, Any]:
        """One read-only GraphQL request, retried as a read; its whole answer, `errors`
        beside the partial `data` (preflight reads many repositories at once: one it
        cannot see must not hide the others). An error that names no missing or forbidden
        object ("Something went wrong … a timeout") is retried like a 502."""
        return self._retry(operation, repository,
                           lambda: self._sessions.of(repository).client.graphql_once(
                               query, variables, partial=True),
                           fix="check that the token may read the repositories")

    def _graphql(self, operation: str, repository: str, query: str,
                 variables: Mapping[str, Any]) -> dict[str, Any]:
        """One GraphQL request (retried by the caller's `_retry`, `_set` or `_write`);
        any error GitHub answers with HTTP 200 fails it (`_attempts` names the fix)."""
        return self._sessions.of(repository).client.graphql_once(query, variables)

    def delete_branch(self, repository: str, branch: str) -> bool:
        """True when the branch was deleted, False when it was already gone."""
        repo = self._repo(repository)

        def delete() -> bool:
            try:
                repo.get_git_ref(f"heads/{branch}").delete()
            except GithubException as error:
                if error.status in (404, 422):
                    return False
                raise
            return True

        return self._set(f"delete the branch {branch}", repository, delete)

    # -- the retry machinery --------------------------------------------------------------
    def _repo(self, repository: str) -> Repository:
        """A lazy handle: no request until one of its fields or methods is used."""
        owner, name = _split(repository)
        return self._sessions.of(repository).github.get_repo(f"{owner}/{name}")

    def _read_pr(self, repo: Repository, repository: str, number: int) -> PullRequest:
        pr: PullRequest = self._retry(f"read PR #{number}", repository,
                                      lambda: _loaded(repo.get_pull(number)))
        return pr

    def _retry(self, operation: str, repository: str, call: Callable[[], T], *,
               fix: str = "") -> T:
        """A read: retried as it is, not paced."""
        return self._attempts(operation, repository,
                              lambda: call_with_retries(lambda: self._classify(call),
                                                        self.budget, self._sleep,
                                                        f"{operation} ({repository})"), fix)

    def _set(self, operation: str, repository: str, call: Callable[[], T]) -> T:
        """An idempotent write (it sets a value): paced, and retried as it is."""
        return self._attempts(operation, repository,
                              lambda: call_with_retries(lambda: self._paced(repository, call),
                                                        self.budget, self._sleep,
                                                        f"{operation} ({repository})"))

    def _write(self, operation: str, repository: str, call: Callable[[], T],
               *, find_effect: Callable[[], Any]) -> Any:
        """A write that must not happen twice: before each retry, `find_effect()` looks
        for what an earlier attempt (whose answer was lost) may have done."""
        return self._attempts(operation, repository, lambda: write_with_retries(
            lambda: self._paced(repository, call), lambda: self._classify(find_effect),
            self.budget, self._sleep, f"{operation} ({repository})"))

    def _attempts(self, operation: str, repository: str, retried: Callable[[], T],
                  fix: str = "") -> T:
        """`retried()`, its GitHub errors said as the forge's: what failed, and the fix."""
        try:
            return retried()
        except RateLimited as error:  # a wait past the patience, or the retries spent:
            # the run pauses until then; the stage run again finds what was written
            raise self.pacer.pause_for(error.wait, f"{error.reason} while trying to "
                                       f"{operation} in {repository}") from None
        except Transient as error:
            raise ForgeError("github", repository, operation,
                             f"{error.reason}; gave up after {self.budget.attempts} attempts",
                             "try again later (a resumed run repeats this step safely)"
                             ) from None
        except TokenRefused as error:
            raise ForgeError("github", repository, operation, error.reason,
                             f"check {self._auth.name}") from None
        except NotFound as error:
            raise ForgeError("github", repository, operation, error.reason, fix or
                             "check the repository name and that the token can see it"
                             ) from None
        except GitHubError as error:
            if error.status == 403:  # a write the App's permissions do not cover: say which
                problem, needs = missing(operation, repository)
                raise ForgeError("github", repository, operation,
                                 f"{problem} ({error.reason})", fix or needs) from None
            raise ForgeError("github", repository, operation, error.reason, fix or (
                "check that the token may write to the repository's PRs"
                if error.status == 200 else "")) from None

    def _paced(self, repository: str, call: Callable[[], T]) -> T:
        """A write within the token's budget: waited for up to the retry budget's time,
        else the run pauses (RateLimitPause) before anything is sent."""
        key = self._auth.key(repository)
        with self.pacer.write(key, patience=self.budget.wait_seconds):
            try:
                return self._classify(call)
            finally:  # the primary limit as PyGithub last read it (REST's headers)
                requester = self._sessions.of(repository).github.requester
                if requester.rate_limiting[0] >= 0:
                    self.pacer.note_answer(key, {
                        "x-ratelimit-remaining": str(requester.rate_limiting[0]),
                        "x-ratelimit-reset": str(int(requester.rate_limiting_resettime))})

    def _classify(self, call: Callable[[], T]) -> T:
        """`call()`, PyGithub's errors classified as the client's answers are."""
        try:
            try:
                with self._rest_lock:
                    return call()
            except GithubException as error:
                raise classify_answer(
                    error.status, error.headers or {}, error.data, now=self._clock(),
                    secondary_default=self.budget.secondary_default,
                ) or Rejected(f"HTTP {error.status}", status=error.status) from None
            except requests.RequestException as error:
                raise ConnectionFailed(
                    f"connection failed ({type(error).__name__})") from None
        except RateLimited:
            self.pacer.slow_down()  # GitHub asked for fewer requests: space writes more
            raise
