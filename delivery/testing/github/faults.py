"""Faults the fake GitHub can inject, each matching requests by method and path prefix.

A fault answers in place of the real handler (5xx, rate limits, GraphQL errors), delays the
answer, applies the request and then drops the connection (the client cannot know whether
its write happened), or changes the world between two requests (a PR merged, closed or
opened by someone else)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
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

    def drawn(self, method: str, path: str) -> Fault:
        """The fault that answers a request this fault matched (itself; a mix draws one)."""
        return self


# A GraphQL answer GitHub gives with HTTP 200 when a query timed out on its side.
TRANSIENT_GRAPHQL_ERROR = [{"message": "Something went wrong while executing your query. "
                                       "This may be the result of a timeout, or it could be "
                                       "a GitHub bug."}]
MIX_KINDS = ("502", "secondary_rate_limit_retry_after", "secondary_rate_limit",
             "graphql_errors", "drop_after_apply")
WRITES = ("POST", "PATCH", "PUT", "DELETE")


@dataclass
class FaultMix(Fault):
    """Answers a random share (`rate`) of the API requests under `path` with a fault drawn
    from `kinds` (seeded: the same requests get the same faults). A kind that cannot answer
    a request is drawn again among those that can: GraphQL errors answer only GraphQL
    queries, dropped connections only REST writes (the write is applied first). `injected`
    counts what was answered."""

    rate: float = 0.2
    kinds: Sequence[str] = MIX_KINDS
    rng: random.Random = field(default_factory=random.Random)
    injected: Counter[str] = field(default_factory=Counter)

    def matches(self, method: str, path: str) -> bool:
        return (self.times > 0 and path.startswith(self.path) and bool(self._fitting(method, path))
                and self.rng.random() < self.rate)

    def _fitting(self, method: str, path: str) -> list[str]:
        graphql = path == "/api/graphql"
        return [kind for kind in self.kinds
                if (kind != "graphql_errors" or graphql)
                and (kind != "drop_after_apply" or (method in WRITES and not graphql))]

    def drawn(self, method: str, path: str) -> Fault:
        kind = self.rng.choice(self._fitting(method, path))
        self.injected[kind] += 1
        if kind == "502":
            return server_error(502, method=method, path=path)
        if kind == "secondary_rate_limit_retry_after":
            return secondary_rate_limit(self.rng.randint(1, 30), method=method, path=path)
        if kind == "secondary_rate_limit":
            return secondary_rate_limit(None, method=method, path=path)
        if kind == "graphql_errors":
            return graphql_errors(TRANSIENT_GRAPHQL_ERROR)
        return drop_after_apply(method=method, path=path)


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


def random_mix(seed: int, rate: float = 0.2, *, kinds: Sequence[str] = MIX_KINDS,
               path: str = "/api/", times: int = 1_000_000) -> FaultMix:
    """`rate` of the API requests (REST and GraphQL, not git) answered by a random fault of
    `kinds` — any of 502, secondary rate limits with and without `Retry-After`, GraphQL
    200-with-errors and dropped connections after a write was applied."""
    unknown = sorted(set(kinds) - set(MIX_KINDS))
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {', '.join(MIX_KINDS)}")
    return FaultMix("status", "*", path, times, rate=rate, kinds=tuple(kinds),
                    rng=random.Random(seed))
