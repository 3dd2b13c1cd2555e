"""What the fake GitHub refuses before a request reaches its handler: writes the token may
not make (its permission on the repository) and, when switched on, GitHub's documented
secondary rate limits on content-creating requests and its primary limit on every API
request (`PrimaryLimits`: REST and GraphQL pools per token and hour).

GitHub (docs: "Rate limits for the REST API", "Best practices for using the REST API"):
no more than 80 content-generating requests a minute and 500 an hour, per token; a request
over the limit is answered 403 or 429 with `Retry-After` and a message naming the secondary
rate limit (for content creation, the text GitHub sends: "You have exceeded a secondary
rate limit and have been temporarily blocked from content creation…"). Content-creating
means POST, PATCH, PUT and DELETE on the REST API and a GraphQL mutation; git pushes are
not counted (GitHub documents no such limit for them). The windows slide on the fake's
clock, which a test fast-forwards (`ManualClock.advance`).

A token below `write` on a repository is refused a push (the receive-pack advertisement,
which `git push --dry-run` reads too, answers 403 as GitHub's does) and every REST write on
it (403 "Resource not accessible by integration"). So is an App token minted without the
permission a write needs, or with only `read` of it (`apps.IssuedToken.may_write`); a
GraphQL mutation it may not make is answered GitHub's FORBIDDEN error (HTTP 200).
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graphql import FieldNode, GraphQLError, OperationDefinitionNode, OperationType, parse

from delivery.testing.github.state import State

WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
PUSH_PERMISSIONS = frozenset({"admin", "maintain", "write"})
SECONDARY_MESSAGE = ("You have exceeded a secondary rate limit and have been temporarily "
                     "blocked from content creation. Please retry your request again later.")
_GIT_REPO = re.compile(r"/(?P<owner>[^/]+)/(?P<name>[^/]+?)\.git(?P<rest>/.*)?")
_REST_REPO = re.compile(r"/api/v3/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)(?:/|$)")


@dataclass(frozen=True)
class Refusal:
    status: int
    headers: dict[str, str]
    payload: dict[str, Any] | None  # None: a git answer (plain text)
    text: str = ""


@dataclass
class SecondaryLimits:
    """Sliding windows over the fake's clock, per token: `per_minute` content-creating
    requests in any 60 seconds, `per_hour` in any 3600. A request past them is answered
    `status` (GitHub sends 403 or 429). `refused` counts the requests turned away."""

    clock: Callable[[], float]
    per_minute: int = 80
    per_hour: int = 500
    status: int = 403
    admitted_by_token: dict[str, deque[float]] = field(default_factory=dict)
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def admit(self, token: str = "") -> int | None:
        """None when the request may go ahead (it is counted); else the seconds to wait."""
        with self._lock:
            now = self.clock()
            admitted = self.admitted_by_token.setdefault(token, deque())
            while admitted and admitted[0] <= now - 3600:
                admitted.popleft()
            last_minute = [t for t in admitted if t > now - 60]
            if len(last_minute) >= self.per_minute:
                self.refused += 1
                return max(int(last_minute[0] + 60 - now) + 1, 1)
            if len(admitted) >= self.per_hour:
                self.refused += 1
                return max(int(admitted[0] + 3600 - now) + 1, 1)
            admitted.append(now)
            return None


def content_creating(method: str, path: str, body: bytes) -> bool:
    """A REST write or a GraphQL mutation (what GitHub's secondary limits count)."""
    if path == "/api/graphql":
        return method == "POST" and _is_mutation(body)
    return path.startswith("/api/v3/") and method in WRITE_METHODS


def _is_mutation(body: bytes) -> bool:
    try:
        query = json.loads(body or b"{}").get("query")
        document = parse(query) if isinstance(query, str) else None
    except (ValueError, AttributeError, GraphQLError):
        return False
    return document is not None and any(
        getattr(d, "operation", None) is OperationType.MUTATION for d in document.definitions)


# the App permission each mutation the fake answers needs (GitHub's, for an integration)
_MUTATION_PERMISSIONS = {"addPullRequestReviewThreadReply": "pull_requests",
                         "resolveReviewThread": "pull_requests",
                         "markPullRequestReadyForReview": "pull_requests",
                         "revertPullRequest": "contents"}
_INTEGRATION = "Resource not accessible by integration"
_ISSUE_NUMBER = re.compile(r"/issues/(?P<n>\d+)(?:/|$)")


def permission_refusal(state: State, login: str, method: str, path: str, query: str,
                       body: bytes = b"",
                       may_write: Callable[[str], bool] | None = None) -> Refusal | None:
    """A push or REST write on a repository where the token is below `write` or lacks the
    App permission it needs; with `may_write` (an App token's permissions), a GraphQL
    mutation needing one it lacks too."""
    allowed = may_write or (lambda _: True)
    git = _GIT_REPO.fullmatch(path)
    if git is not None:
        pushing = (git.group("rest") or "").endswith("/git-receive-pack") or \
            "service=git-receive-pack" in query
        repo = state.repo(f"{git.group('owner')}/{git.group('name')}")
        if pushing and repo is not None and (repo.token_permission not in PUSH_PERMISSIONS
                                             or "contents" in repo.token_denied
                                             or not allowed("contents")):
            return Refusal(403, {}, None,
                           f"Permission to {repo.full_name}.git denied to {login}.\n")
        return None
    rest = _REST_REPO.match(path)
    if rest is not None and method in WRITE_METHODS:
        repo = state.repo(f"{rest.group('owner')}/{rest.group('name')}")
        needed = _category(path)
        on_pull = _ISSUE_NUMBER.search(path)
        # GitHub lets `pull_requests: write` comment on and label a PR as an issue
        writes = allowed(needed) or (needed == "issues" and on_pull is not None and repo is
                                     not None and int(on_pull["n"]) in repo.pulls
                                     and allowed("pull_requests"))
        if repo is not None and (repo.token_permission not in PUSH_PERMISSIONS
                                 or needed in repo.token_denied
                                 or (needed != "" and not writes)):
            return Refusal(403, {}, {
                "message": _INTEGRATION, "documentation_url": "https://docs.github.com/rest"})
    if path == "/api/graphql" and method == "POST" and may_write is not None:
        refused = [name for name in _mutation_fields(body)
                   if not may_write(_MUTATION_PERMISSIONS.get(name, "pull_requests"))]
        if refused:
            return Refusal(200, {}, {
                "data": {name: None for name in refused},
                "errors": [{"type": "FORBIDDEN", "path": [name], "message": _INTEGRATION}
                           for name in refused]})
    return None


def _mutation_fields(body: bytes) -> list[str]:
    """The top-level fields of the request's mutations (none for a query)."""
    try:
        query = json.loads(body or b"{}").get("query")
        document = parse(query) if isinstance(query, str) else None
    except (ValueError, AttributeError, GraphQLError):
        return []
    if document is None:
        return []
    return [selection.name.value for definition in document.definitions
            if isinstance(definition, OperationDefinitionNode)
            and definition.operation is OperationType.MUTATION
            for selection in definition.selection_set.selections
            if isinstance(selection, FieldNode)]


def _category(path: str) -> str:
    """The App permission a REST write on `path` needs (GitHub's own mapping, roughly)."""
    if path.endswith("/merge") or "/git/" in path or "/contents/" in path:
        return "contents"
    if "/statuses/" in path:
        return "statuses"
    if "/issues" in path or "/labels" in path:
        return "issues"
    if "/check-runs" in path or "/check-suites" in path:
        return "checks"
    if "/actions/" in path:
        return "actions"
    return "pull_requests" if "/pulls" in path else ""


def token_of(header: str | None) -> str:
    """The token in an `Authorization` header ("token X", "bearer X", "Basic …" for git)."""
    return (header or "").strip().rsplit(" ", 1)[-1]


def secondary_refusal(limits: SecondaryLimits | None, method: str, path: str,
                      body: bytes, token: str = "") -> Refusal | None:
    if limits is None or not content_creating(method, path, body):
        return None
    wait = limits.admit(token)
    if wait is None:
        return None
    return Refusal(limits.status, {"Retry-After": str(wait)}, {
        "message": SECONDARY_MESSAGE,
        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                             "#about-secondary-rate-limits"})


PRIMARY_MESSAGE = "API rate limit exceeded for user ID 1."
PRIMARY_DOCS = ("https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                "#about-primary-rate-limits")


@dataclass
class PrimaryLimits:
    """GitHub's primary limit, per token and pool (`core`: the REST API; `graphql`):
    `per_hour` (`graphql_per_hour`) requests in a window that opens with the pool's first
    request and resets an hour later. Every API answer carries `x-ratelimit-*` (limit,
    remaining, used, reset as epoch seconds, resource); a request past the limit is not
    counted and is answered as GitHub does — REST 403 with `x-ratelimit-remaining: 0`,
    GraphQL HTTP 200 with a `RATE_LIMITED` error — on the fake's clock. `refused` counts
    them."""

    clock: Callable[[], float]
    per_hour: int = 5000
    graphql_per_hour: int = 5000
    windows: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def spend(self, token: str, resource: str) -> tuple[dict[str, str], bool]:
        """The answer's `x-ratelimit-*` headers, and whether the request is over the limit."""
        limit = self.graphql_per_hour if resource == "graphql" else self.per_hour
        with self._lock:
            now = self.clock()
            reset, used = self.windows.get((token, resource), (0.0, 0))
            if now >= reset:
                reset, used = now + 3600, 0
            over = used >= limit
            if over:
                self.refused += 1
            else:
                used += 1
            self.windows[(token, resource)] = (reset, used)
        return {"x-ratelimit-limit": str(limit), "x-ratelimit-remaining": str(limit - used),
                "x-ratelimit-used": str(used), "x-ratelimit-reset": str(int(reset)),
                "x-ratelimit-resource": resource}, over


def primary_refusal(limits: PrimaryLimits | None, path: str, token: str
                    ) -> tuple[dict[str, str], Refusal | None]:
    """An API request's `x-ratelimit-*` headers (none with the limit off) and, past the
    limit, GitHub's answer: GraphQL's `RATE_LIMITED` error (HTTP 200), else REST's 403."""
    if limits is None or not path.startswith("/api/"):
        return {}, None
    graphql = path == "/api/graphql"
    headers, over = limits.spend(token, "graphql" if graphql else "core")
    if not over:
        return headers, None
    if graphql:
        return headers, Refusal(200, headers, {
            "errors": [{"type": "RATE_LIMITED", "message": PRIMARY_MESSAGE}]})
    return headers, Refusal(403, headers, {"message": PRIMARY_MESSAGE,
                                           "documentation_url": PRIMARY_DOCS})
