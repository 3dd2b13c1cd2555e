"""The GitHub PR probe: every folder's pull request in ONE GraphQL request (SPEC §7).

`GitHubPullRequestSource.pull_requests` sends one query for up to 50 folders (more are
split into rounds of 50), then follow-ups only when needed: the next pages of review
threads for PRs that have more than one page, and one more observation of a PR whose state
changed while it was read (reported MERGED or CLOSED instead of failing the probe).

A folder whose repository or PR cannot be read gets a `ProbeFailure`; the others keep
their evidence. The requests go through the one GitHub client (`probes.github_client`):
rate limits, 5xx answers, dropped connections and GraphQL timeouts are retried within a
budget of attempts and waiting time — blindly, since a query only reads — and the answer
comes back whole, partial `data` beside the errors that name single PRs. The token travels
in the `Authorization` header and is never logged, put in an error or kept in a repr.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from probes import github_query as gq
from probes.evidence import ProbeFailure, PrObservation, PrQuery, ThreadNote
from probes.github_client import (
    DEFAULT_API_URL,
    DEFAULT_GRAPHQL_URL,
    GitHubClient,
    graphql_url_from_environment,
)
from probes.github_errors import GitHubError, TokenRefused, Transient
from probes.labels import STOP_LABEL, TicketLabels, stop_mark, stop_setter
from probes.retry import RetryBudget
from probes.steering import (
    MAX_LOOKUPS_PER_QUERY,
    Stewards,
    actor_login,
    is_bot,
    permissions_answer,
    permissions_query,
)

__all__ = ["DEFAULT_API_URL", "DEFAULT_GRAPHQL_URL", "GitHubPullRequestSource",
           "GitHubUnavailable", "RetryBudget", "graphql_url_from_environment"]

MAX_THREAD_PAGES = 100  # 10,000 review threads per PR
MAX_CONTEXT_PAGES = 10  # checks: 1,100 status contexts per PR, then `checks_truncated`


class GitHubUnavailable(Exception):
    """A probe round could not be answered (after retries, or refused outright)."""


class GitHubPullRequestSource:
    """`probes.evidence.PullRequestSource` for GitHub, over GraphQL."""

    def __init__(self, token: str, *, graphql_url: str = DEFAULT_GRAPHQL_URL,
                 budget: RetryBudget | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time, timeout: float = 30.0,
                 check_pages: int = MAX_CONTEXT_PAGES,
                 stewards: Stewards | None = None,
                 client: GitHubClient | None = None) -> None:
        """`client`: a client to share (the forge's, which closes it); else one of its own,
        whose connections are closed after each probe."""
        self._own_client = client is None
        self._client = client or GitHubClient(
            token, graphql_url=graphql_url, budget=budget, sleep=sleep, clock=clock,
            timeout=timeout, user_agent="delivery-probe")
        self.graphql_url = self._client.graphql_url
        self.budget = self._client.budget
        self.check_pages = check_pages  # further pages of checks read per PR at most
        # who may steer the run (SPEC §14): trusted bots, and users' permissions once read
        self.stewards = stewards or Stewards()

    @property
    def requests_sent(self) -> int:
        return self._client.requests_sent

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], **options: Any
                         ) -> GitHubPullRequestSource:
        return cls(environ.get("GITHUB_TOKEN", ""),
                   graphql_url=graphql_url_from_environment(environ), **options)

    def __repr__(self) -> str:
        return f"GitHubPullRequestSource(graphql_url={self.graphql_url!r})"

    # -- the probe ------------------------------------------------------------------------
    def pull_requests(self, queries: Sequence[PrQuery]) -> dict[str, PrObservation]:
        return self.observe(queries)[0]

    def observe(self, queries: Sequence[PrQuery], ticket: tuple[str, int] | None = None
                ) -> tuple[dict[str, PrObservation], TicketLabels | None]:
        """The folders' PRs, and the labels of the `ticket` issue (`owner/name`, number)
        read in the same request (the first round's); None for the ticket when it was not
        asked for or could not be read (a ticket that is gone reads as unlabelled)."""
        result: dict[str, PrObservation] = {}
        valid: list[PrQuery] = []
        for query in queries:
            problem = _query_problem(query)
            if problem:
                result[query.folder] = ProbeFailure(query.folder, problem)
            else:
                valid.append(query)
        read: list[TicketLabels | None] = [None]
        with self._session() as client:
            for start in range(0, max(len(valid), 1), gq.MAX_FOLDERS_PER_QUERY):
                chunk = valid[start:start + gq.MAX_FOLDERS_PER_QUERY]
                if not chunk and ticket is None:
                    break
                try:
                    result.update(self._round(client, chunk, ticket if start == 0 else None,
                                              read))
                except GitHubUnavailable as error:
                    result.update({q.folder: ProbeFailure(q.folder, str(error)) for q in chunk})
        return result, read[0]

    def _round(self, client: GitHubClient, queries: Sequence[PrQuery],
               ticket: tuple[str, int] | None = None,
               read: list[TicketLabels | None] | None = None) -> dict[str, PrObservation]:
        text, variables = gq.probe_query(queries, ticket)
        body = self._post(client, text, variables)
        data = body.get("data") or {}
        errors = _errors_by_alias(body.get("errors"))
        if ticket is not None and read is not None:
            read[0] = self._ticket(client, ticket, data.get("ticket"), body.get("errors"))
        nodes: dict[str, dict[str, Any]] = {}
        result: dict[str, PrObservation] = {}
        shadowed: dict[str, int] = {}  # folder -> its own PR, behind a fork's of its branch
        for i, query in enumerate(queries):
            alias = f"f{i}"
            seen = _pick_pr(data.get(alias), query)
            if isinstance(seen, dict):
                nodes[query.folder] = seen
            elif isinstance(seen, int):
                shadowed[query.folder] = seen
            elif seen is None and alias not in errors and data.get(alias) is not None:
                result[query.folder] = None  # no PR for this head branch
            else:
                result[query.folder] = ProbeFailure(
                    query.folder, _failure_reason(query, errors.get(alias), seen))
        by_folder = {q.folder: q for q in queries}
        if shadowed:
            result.update(self._read_shadowed(client, nodes, by_folder, shadowed))
        # A PR whose state changed while it was read is observed once more.
        self._reobserve(client, nodes, by_folder,
                        [f for f, n in nodes.items() if gq.inconsistent(n)])
        threads = {f: self._first_threads(n) for f, n in nodes.items()}
        self._page_threads(client, nodes, threads, by_folder)
        truncated = self._page_contexts(client, nodes, by_folder)
        unreadable = self._learn_stewards(client, nodes, threads, by_folder)
        for folder, node in nodes.items():
            if folder in unreadable:
                result[folder] = ProbeFailure(folder, unreadable[folder])
                continue
            result[folder] = gq.snapshot(node, threads=threads[folder][1],
                                         checks_truncated=folder in truncated,
                                         repository=by_folder[folder].repository,
                                         steer=self.stewards.why_ignored)
        return result

    def _ticket(self, client: GitHubClient, ticket: tuple[str, int], answer: Any,
                errors: Any) -> TicketLabels | None:
        """The ticket's labels from its alias; one that is gone is unlabelled, one that
        could not be read is None (a flaky read is no person's decision either way)."""
        problems = [e for e in errors or [] if isinstance(e, dict)
                    and (e.get("path") or [""])[0] == "ticket"]
        if any(e.get("type") != "NOT_FOUND" for e in problems):
            return None
        issue = (answer or {}).get("issue") if isinstance(answer, dict) else None
        if not isinstance(issue, dict):
            return TicketLabels(ticket[1], "")
        repository = ticket[0]
        by = stop_setter(issue)[0]
        if by and self.stewards.unknown(repository, [by]) and \
                self._look_up(client, {(repository, by): ["ticket"]}):
            return None  # who set it could not be looked up
        return TicketLabels(int(issue.get("number") or ticket[1]), str(issue.get("url") or ""),
                            stop_mark(issue, repository, self.stewards.why_ignored))

    # -- who steers (SPEC §14) ------------------------------------------------------------
    def why_ignored(self, repository: str, login: str) -> str | None:
        """None when `login` may steer runs on `repository`, else why not; a user not
        seen before costs one GraphQL request (then remembered)."""
        if self.stewards.unknown(repository, [login]):
            with self._session() as client:
                problems = self._look_up(client, {(repository, login): [""]})
            if problems:
                raise GitHubUnavailable(problems[""])
        return self.stewards.why_ignored(repository, login)

    def _learn_stewards(self, client: GitHubClient, nodes: Mapping[str, Mapping[str, Any]],
                        threads: Mapping[str, tuple[int, list[ThreadNote], str | None]],
                        by_folder: Mapping[str, PrQuery]) -> dict[str, str]:
        """Learn who may steer: the reviewers GitHub sorted (`writersOnly`), then, in one
        request, the thread authors not known yet. The folders whose authors could not
        be looked up, and why (nothing unverified steers, and nobody is ignored
        silently because a read failed)."""
        wanted: dict[tuple[str, str], list[str]] = {}
        for folder, node in nodes.items():
            repository = by_folder[folder].repository
            self._learn_reviewers(repository, node)
            # the stop label's setter too: whether the label stops the run (SPEC §14)
            setter = stop_setter(node)[0] if STOP_LABEL in _label_names(node) else ""
            for login in self.stewards.unknown(repository,
                                               [t.author for t in threads[folder][1]]
                                               + [setter]):
                wanted.setdefault((repository, login), []).append(folder)
        return self._look_up(client, wanted) if wanted else {}

    def _learn_reviewers(self, repository: str, node: Mapping[str, Any]) -> None:
        writers = [actor_login(r.get("author")) for r in
                   ((node.get("writerOpinions") or {}).get("nodes") or []) if r]
        for login in writers:
            self.stewards.learn(repository, login, True)
        if len(writers) >= gq.REVIEWS_PAGE:
            return  # a reviewer missing from a full page may be a writer on the next
        known = {w.lower() for w in writers}
        for r in ((node.get("latestOpinionatedReviews") or {}).get("nodes") or []):
            login = actor_login((r or {}).get("author"))
            if login and not is_bot(login) and login.lower() not in known:
                self.stewards.learn(repository, login, False)

    def _look_up(self, client: GitHubClient, wanted: Mapping[tuple[str, str], list[str]]
                 ) -> dict[str, str]:
        """Read the permission of each (repository, login) of `wanted`; the folders
        (its values) of those that could not be read, and why."""
        failed: dict[str, str] = {}
        lookups = list(wanted)
        for start in range(0, len(lookups), MAX_LOOKUPS_PER_QUERY):
            chunk = lookups[start:start + MAX_LOOKUPS_PER_QUERY]
            text, variables = permissions_query(chunk)
            problem = "GitHub answered nothing for it"
            try:
                data = self._post(client, text, variables).get("data") or {}
            except GitHubUnavailable as error:
                data, problem = {}, str(error)
            for (repository, login), writer in permissions_answer(chunk, data).items():
                if writer is not None:
                    self.stewards.learn(repository, login, writer)
                    continue
                for folder in wanted[(repository, login)]:
                    failed.setdefault(folder, (
                        f"{repository}: could not read whether @{login} may write to it "
                        f"({problem}): the token needs push access, which lets it read "
                        "the repository's collaborators"))
        return failed

    def _page_contexts(self, client: GitHubClient, nodes: dict[str, dict[str, Any]],
                       by_folder: Mapping[str, PrQuery]) -> set[str]:
        """Read the further pages of status contexts of open PRs that have more than one
        (their failing check names are evidence), appending them to each node; the
        folders whose checks could not all be read."""
        truncated: set[str] = set()
        cursors: dict[str, str] = {}
        for folder, node in nodes.items():
            cursor = gq.next_cursor(gq.head_contexts(node)[1])
            if cursor and node.get("state") == "OPEN":
                cursors[folder] = cursor
        for _ in range(self.check_pages):
            if not cursors:
                return truncated
            paging = list(cursors)
            targets = [(by_folder[f].repository, int(nodes[f]["number"]), cursors[f])
                       for f in paging]
            text, variables = gq.contexts_query(targets)
            try:
                data = self._post(client, text, variables).get("data") or {}
            except GitHubUnavailable:
                data = {}
            cursors = {}
            for i, folder in enumerate(paging):
                oid, more = gq.head_contexts((data.get(f"c{i}") or {}).get("pr") or {})
                head, seen = gq.head_contexts(nodes[folder])
                if more is None or seen is None or oid != head:  # unreadable, or moved
                    truncated.add(folder)
                    continue
                seen["nodes"] = [*(seen.get("nodes") or []), *(more.get("nodes") or [])]
                cursor = gq.next_cursor(more)
                if cursor:
                    cursors[folder] = cursor
        truncated.update(cursors)  # the page bound was reached
        return truncated

    @staticmethod
    def _first_threads(node: Mapping[str, Any]) -> tuple[int, list[ThreadNote], str | None]:
        connection = node.get("reviewThreads") or {}
        unresolved, notes = gq.thread_notes(connection.get("nodes") or [])
        info = connection.get("pageInfo") or {}
        return unresolved, notes, info.get("endCursor") if info.get("hasNextPage") else None

    def _read_shadowed(self, client: GitHubClient, nodes: dict[str, dict[str, Any]],
                       by_folder: Mapping[str, PrQuery], shadowed: Mapping[str, int]
                       ) -> dict[str, PrObservation]:
        """Read by number the folders' own PRs that a fork's PR of the same head branch
        name hid (one request); those that could not be read fail."""
        found: dict[str, dict[str, Any]] = {f: {"number": n} for f, n in shadowed.items()}
        self._reobserve(client, found, by_folder, list(shadowed))
        failed: dict[str, PrObservation] = {}
        for folder, node in found.items():
            if "state" in node:
                nodes[folder] = node
            else:
                failed[folder] = ProbeFailure(folder, _failure_reason(
                    PrQuery(folder, by_folder[folder].repository, number=shadowed[folder]),
                    None, "missing"))
        return failed

    def _reobserve(self, client: GitHubClient, nodes: dict[str, dict[str, Any]],
                   by_folder: Mapping[str, PrQuery], folders: list[str]) -> None:
        if not folders:
            return
        targets = [(by_folder[f].repository, int(nodes[f]["number"])) for f in folders]
        text, variables = gq.reobserve_query(targets)
        try:
            data = self._post(client, text, variables).get("data") or {}
        except GitHubUnavailable:
            data = {}
        for i, folder in enumerate(folders):
            again = (data.get(f"r{i}") or {}).get("pr")
            if isinstance(again, dict):
                nodes[folder] = again
            # else: keep what was read; `snapshot` trusts the merged/closed flags

    def _page_threads(self, client: GitHubClient, nodes: dict[str, dict[str, Any]],
                      threads: dict[str, tuple[int, list[ThreadNote], str | None]],
                      by_folder: Mapping[str, PrQuery]) -> None:
        reobserved: set[str] = set()
        for _ in range(MAX_THREAD_PAGES):  # bounded even if a server kept saying "more"
            paging = [f for f, t in threads.items() if t[2] is not None]
            if not paging:
                return
            targets = [(by_folder[f].repository, int(nodes[f]["number"]), str(threads[f][2]))
                       for f in paging]
            text, variables = gq.threads_query(targets)
            try:
                data = self._post(client, text, variables).get("data") or {}
            except GitHubUnavailable:
                data = {}
            changed: list[str] = []
            for i, folder in enumerate(paging):
                pr = (data.get(f"t{i}") or {}).get("pr")
                count, notes, _ = threads[folder]
                if not isinstance(pr, dict):  # could not read further: count what was seen
                    threads[folder] = (count, notes, None)
                    continue
                connection = pr.get("reviewThreads") or {}
                more, more_notes = gq.thread_notes(connection.get("nodes") or [])
                info = connection.get("pageInfo") or {}
                threads[folder] = (count + more, notes + more_notes,
                                   info.get("endCursor") if info.get("hasNextPage") else None)
                if pr.get("state") != nodes[folder].get("state") and folder not in reobserved:
                    changed.append(folder)
            if changed:
                reobserved.update(changed)
                self._reobserve(client, nodes, by_folder, changed)

    # -- one GraphQL request, through the one client ------------------------------------
    @contextmanager
    def _session(self) -> Iterator[GitHubClient]:
        try:
            yield self._client
        finally:
            if self._own_client:
                self._client.close()

    def _post(self, client: GitHubClient, text: str, variables: dict[str, Any]
              ) -> dict[str, Any]:
        budget = self.budget
        try:
            return client.graphql(text, variables, partial=True)
        except Transient as error:
            raise GitHubUnavailable(
                f"GitHub GraphQL at {self.graphql_url}: {error.reason}; gave up within the"
                f" retry budget ({budget.attempts} attempts, {budget.wait_seconds:.0f} s)"
            ) from None
        except TokenRefused as error:
            raise GitHubUnavailable(f"GitHub {error.reason}: check GITHUB_TOKEN") from None
        except GitHubError as error:
            raise GitHubUnavailable(f"GitHub rejected the query: {error.reason}") from None


def _query_problem(query: PrQuery) -> str:
    try:
        gq.split_repository(query.repository)
    except ValueError as error:
        return str(error)
    if query.number is None and not query.head_branch:
        return f"{query.repository}: name the PR by number or head branch"
    return ""


def _errors_by_alias(errors: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for error in errors or []:
        if isinstance(error, dict) and error.get("path"):
            alias = str(error["path"][0])
            found.setdefault(alias, str(error.get("message", "")))
    return found


def _pick_pr(repository: Any, query: PrQuery) -> dict[str, Any] | int | str | None:
    """The PR node of one alias; None when the head branch has no PR of the repository's
    own; its number when that PR is neither node read (a fork's PR of the same branch
    name came first: it is read again by number); "missing" when the repository or the
    numbered PR could not be read, or a reason (`own_pull_request`)."""
    if not isinstance(repository, dict):
        return "missing"
    if query.number is not None:
        pr = repository.get("pr")
        return pr if isinstance(pr, dict) else "missing"
    own = gq.own_pull_request(repository)
    if not isinstance(own, tuple):
        return own
    number, key = own
    nodes = (repository.get(key) or {}).get("nodes") or []
    if nodes and isinstance(nodes[0], dict) and nodes[0].get("number") == number:
        return dict(nodes[0])
    return number


def _failure_reason(query: PrQuery, error: str | None, seen: object) -> str:
    which = f"{query.repository}#{query.number}" if query.number is not None else (
        f"{query.repository}@{query.head_branch}")
    return f"{which}: {error}" if error else f"{which}: could not be read"


def _label_names(node: Mapping[str, Any]) -> list[str]:
    return [str((label or {}).get("name") or "")
            for label in (node.get("labels") or {}).get("nodes") or []]
