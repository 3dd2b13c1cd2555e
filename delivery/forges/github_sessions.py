"""The GitHub forge's connections, one set per token (`TokenSource.key`): with
`GITHUB_TOKEN` one for every repository, with a GitHub App one per owner (an installation
token reaches its owner's repositories only). Each is PyGithub's REST object model and the
one GitHub client (GraphQL, raw REST) with the probe on it; each request asks the source
for the current token, so a renewed one is used from the next request on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from github import Auth, Github

from delivery.forges.github_auth import TokenSource
from probes.evidence import PrObservation, PrQuery
from probes.github import GitHubPullRequestSource
from probes.github_client import GitHubClient
from probes.labels import TicketLabels
from probes.retry import RetryBudget
from probes.steering import Stewards


class _CurrentToken(Auth.Auth):
    """PyGithub's `Authorization` header, the token read at each request."""

    def __init__(self, current: Callable[[], str]) -> None:
        self._current = current

    @property
    def token_type(self) -> str:
        return "token"

    @property
    def token(self) -> str:
        return self._current()

    @property
    def _masked_token(self) -> str:
        return "token (removed)"


@dataclass
class Session:
    github: Github  # REST writes (PyGithub)
    client: GitHubClient  # GraphQL and raw REST
    probe: GitHubPullRequestSource  # on `client`


class Sessions:
    """A `Session` per token key, made when first needed; thread-safe."""

    def __init__(self, source: TokenSource, *, api_url: str, graphql_url: str,
                 budget: RetryBudget, sleep: Callable[[float], None],
                 clock: Callable[[], float] = time.time, timeout: int = 30) -> None:
        self.source = source
        self._api_url = api_url
        self._graphql_url = graphql_url
        self._budget = budget
        self._sleep = sleep
        self._clock = clock
        self._timeout = timeout
        # who may steer (SPEC §14): one record for every session's probe
        self.stewards = Stewards()
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def of(self, repository: str) -> Session:
        """The session for `repository` (for a list "a/b, c/d": its first)."""
        first = repository.split(",")[0].strip()
        key = self.source.key(first)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = self._open(first)
            return session

    def groups(self, repositories: Iterable[str]) -> dict[str, list[int]]:
        """The positions of `repositories` by token key, in order of first appearance."""
        found: dict[str, list[int]] = {}
        for i, repository in enumerate(repositories):
            found.setdefault(self.source.key(repository), []).append(i)
        return found

    def observe(self, queries: Sequence[PrQuery], ticket: tuple[str, int] | None
                ) -> tuple[dict[str, PrObservation], TicketLabels | None]:
        """One probe per token (an App's installation token reads its owner's only); the
        ticket issue's labels are read in the round of the token that reaches it."""
        found: dict[str, PrObservation] = {}
        read: TicketLabels | None = None
        repositories = [q.repository for q in queries] + ([ticket[0]] if ticket else [])
        for positions in self.groups(repositories).values():
            group = [queries[i] for i in positions if i < len(queries)]
            mine = ticket if len(queries) in positions else None
            probe = self.of(group[0].repository if group else repositories[-1]).probe
            prs, seen = probe.observe(group, mine)
            found.update(prs)
            read = seen if mine is not None else read
        return found, read

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.github.close()
            session.client.close()
        close = getattr(self.source, "close", None)
        if callable(close):
            close()

    def _open(self, repository: str) -> Session:
        source = self.source

        def current() -> str:
            return source.token(repository)

        github = Github(
            base_url=self._api_url, auth=_CurrentToken(current), timeout=self._timeout,
            per_page=100,
            retry=None,  # no blind retries of writes; the forge's look for the effect first
            seconds_between_requests=None, seconds_between_writes=None,
            lazy=True)  # objects are fetched when a field is read, inside the retries
        client = GitHubClient(current, api_url=self._api_url, graphql_url=self._graphql_url,
                              budget=self._budget, sleep=self._sleep, clock=self._clock,
                              timeout=self._timeout)
        probe = GitHubPullRequestSource("", client=client, stewards=self.stewards)
        return Session(github, client, probe)
