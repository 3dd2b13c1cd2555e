"""Faults the fake GitHub can inject, each matching requests by method and path prefix.

A fault answers in place of the real handler (5xx, rate limits, GraphQL errors), delays the
answer, applies the request and then drops the connection (the client cannot know whether
its write happened), or changes the world between two requests (a PR merged, closed or
opened by someone else)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

FaultKind = Literal["status", "secondary_rate_limit", "primary_rate_limit",
                    "graphql_errors", "slow", "drop_after_apply", "race"]


@dataclass
class Fault:
    kind: FaultKind
    method: str = "POST"
    path: str = "/api/graphql"
    times: int = 1
    status: int = 502
    retry_after: int | None = None
    reset_in: int = 60
    errors: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] | None = None
    seconds: float = 0.0
    repository: str = ""
    number: int = 0
    action: Literal["merge", "close", "open", "call"] = "merge"
    head: str = ""  # race "open": the branch whose PR another writer opens
    then: Callable[[], object] | None = None  # race "call": any change to the world
    during: bool = False  # race: while the query reads the PR's state, not after the answer

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and method == self.method and path.startswith(self.path)


def server_error(status: int = 502, *, method: str = "POST", path: str = "/api/graphql",
                 times: int = 1) -> Fault:
    return Fault("status", method, path, times, status=status)


def secondary_rate_limit(retry_after: int | None = None, *, method: str = "POST",
                         path: str = "/api/graphql", times: int = 1) -> Fault:
    return Fault("secondary_rate_limit", method, path, times, retry_after=retry_after)


def primary_rate_limit(reset_in: int = 60, *, method: str = "POST",
                       path: str = "/api/graphql", times: int = 1) -> Fault:
    return Fault("primary_rate_limit", method, path, times, reset_in=reset_in)


def graphql_errors(errors: list[dict[str, Any]], data: dict[str, Any] | None = None, *,
                   times: int = 1) -> Fault:
    return Fault("graphql_errors", "POST", "/api/graphql", times, errors=errors, data=data)


def slow(seconds: float, *, method: str = "POST", path: str = "/api/graphql",
         times: int = 1) -> Fault:
    return Fault("slow", method, path, times, seconds=seconds)


def drop_after_apply(*, method: str = "POST", path: str = "/api/v3/",
                     times: int = 1) -> Fault:
    return Fault("drop_after_apply", method, path, times)


def race(repository: str, number: int, action: Literal["merge", "close"] = "merge", *,
         during: bool = False, method: str = "POST", path: str = "/api/graphql",
         after: int = 1) -> Fault:
    """Merge or close `repository#number` after the `after`-th matching request has been
    answered (between two requests), or, with `during`, while a query reads its state."""
    return Fault("race", method, path, after, repository=repository, number=number,
                 action=action, during=during)


def between(change: Callable[[], object], *, method: str = "POST",
            path: str = "/api/graphql", after: int = 1) -> Fault:
    """Call `change()` (e.g. `lambda: github.push_files(...)`) once the `after`-th matching
    request has been answered, before the client can send the next one."""
    return Fault("race", method, path, after, action="call", then=change)


def opened_meanwhile(repository: str, head: str, *, method: str = "GET",
                     path: str = "/api/v3/", after: int = 1) -> Fault:
    """Another writer opens a PR for `head` (into the default branch) once the `after`-th
    matching request has been answered: e.g. between a client's look for the PR and its
    create, which GitHub then refuses with 422 "A pull request already exists"."""
    return Fault("race", method, path, after, repository=repository, action="open",
                 head=head)
