"""The one GitHub client (SPEC §7.1): every GraphQL and raw REST request to GitHub goes
through `GitHubClient` — the probe's query, the forge's GraphQL reads and writes (review
threads, reverts, the stop label, preflight, who the token is), commit statuses and the
Actions runs a claim asks about — and every answer is classified by
`probes.github_errors.classify_answer` and retried by `probes.retry`'s one policy: a read
within the `RetryBudget`, a write never blindly (`write` looks for its effect first).

Why httpx and not PyGithub's requester: a caller needs the raw answer — the partial `data`
next to GraphQL `errors` (one repository it cannot see must not hide the others), the
`Retry-After` and `x-ratelimit-reset` headers — and one owner of retries, while PyGithub's
requester retries on its own (urllib3) and raises on any GraphQL error, dropping the
partial data. PyGithub still serves where its REST object model helps (PRs, comments,
merges, branches, permissions in `delivery.forges.github`); its `GithubException` carries
status, headers and data, which `classify_answer` reads by the same rules.

The token travels in the `Authorization` header only, to the configured API URLs only, and
is never logged, put in an error or kept in a repr. The transport is injectable (httpx's
`transport=`), and so are sleep and clock: tests answer for GitHub and cost no time.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from probes.github_errors import ConnectionFailed, ServerError, classify_answer
from probes.retry import RetryBudget, call_with_retries, write_with_retries

__all__ = ["DEFAULT_API_URL", "DEFAULT_GRAPHQL_URL", "GitHubClient",
           "graphql_url_from_environment"]

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_GRAPHQL_URL = "https://api.github.com/graphql"
_MUTATION = re.compile(r"\A(?:\s|#[^\n]*\n)*mutation\b")
T = TypeVar("T")
E = TypeVar("E")


def graphql_url_from_environment(environ: Mapping[str, str]) -> str:
    """`GITHUB_GRAPHQL_URL`, else derived from `GITHUB_API_URL` (GitHub Enterprise Server
    serves REST at `…/api/v3` and GraphQL at `…/api/graphql`), else the public API."""
    if environ.get("GITHUB_GRAPHQL_URL"):
        return environ["GITHUB_GRAPHQL_URL"]
    api = environ.get("GITHUB_API_URL", "").rstrip("/")
    if not api:
        return DEFAULT_GRAPHQL_URL
    return api.removesuffix("/v3") + "/graphql"


class GitHubClient:
    """GraphQL and REST requests to one GitHub (github.com or Enterprise Server)."""

    def __init__(self, token: str | Callable[[], str], *, api_url: str = DEFAULT_API_URL,
                 graphql_url: str | None = None,
                 transport: httpx.BaseTransport | None = None,
                 budget: RetryBudget | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time, timeout: float = 30.0,
                 user_agent: str = "delivery") -> None:
        if not token:
            raise ValueError("a GitHub token is required (GITHUB_TOKEN)")
        # a callable is asked at each request: an App's installation token is renewed
        self._token = token
        self.api_url = api_url.rstrip("/")
        self.graphql_url = graphql_url or graphql_url_from_environment(
            {"GITHUB_API_URL": self.api_url})
        self.budget = budget or RetryBudget()
        self._transport = transport
        self._sleep = sleep
        self._clock = clock
        self._timeout = timeout
        self._user_agent = user_agent
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()
        self.requests_sent = 0

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.api_url!r}, graphql_url={self.graphql_url!r})"

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections; a later request opens new ones."""
        with self._lock:
            session, self._http = self._http, None
        if session is not None:
            session.close()

    # -- retried by the one policy ----------------------------------------------------------
    def graphql(self, query: str, variables: Mapping[str, Any] | None = None, *,
                partial: bool = False, idempotent: bool = False) -> dict[str, Any]:
        """A GraphQL query, retried as a read; its whole answer. With `partial`, errors
        that name single objects come back beside the rest of `data`. A mutation is a
        write: sent once unless `idempotent` (use `write` to retry it safely)."""
        def send() -> dict[str, Any]:
            return self.graphql_once(query, variables, partial=partial)

        if _MUTATION.match(query) and not idempotent:
            return send()
        return call_with_retries(send, self.budget, self._sleep, "a GraphQL query")

    def rest(self, method: str, path: str, *, json: Any = None,
             idempotent: bool = False) -> Any:
        """A REST request to `path` (under the API URL): a GET retried as a read, a write
        sent once unless `idempotent` (use `write` to retry it safely). The parsed JSON
        answer (None when empty)."""
        def send() -> Any:
            return self.rest_once(method, path, json=json)

        if method.upper() not in ("GET", "HEAD") and not idempotent:
            return send()
        return call_with_retries(send, self.budget, self._sleep, f"{method.upper()} {path}")

    def write(self, send: Callable[[], T], *, find_effect: Callable[[], E | None]) -> T | E:
        """`send()` (one `graphql_once`/`rest_once` write) retried only after
        `find_effect()` found no effect of the attempt whose answer was lost."""
        return write_with_retries(send, find_effect, self.budget, self._sleep, "a write")

    # -- one exchange, classified ---------------------------------------------------------
    def graphql_once(self, query: str, variables: Mapping[str, Any] | None = None, *,
                     partial: bool = False) -> dict[str, Any]:
        body = self._exchange("POST", self.graphql_url,
                              {"query": query, "variables": dict(variables or {})},
                              accept="application/json", partial=partial)
        if not isinstance(body, dict):
            raise ServerError("GraphQL answered no JSON object", status=200)
        return body

    def rest_once(self, method: str, path: str, *, json: Any = None) -> Any:
        if not path.startswith("/"):
            # the token goes to the configured API only, never to a URL from elsewhere
            raise ValueError(f"a REST path starts with '/', not {path[:40]!r}")
        return self._exchange(method.upper(), self.api_url + path, json,
                              accept="application/vnd.github+json", partial=False)

    def _exchange(self, method: str, url: str, payload: Any, *, accept: str,
                  partial: bool) -> Any:
        with self._lock:  # folder stages send from several threads
            self.requests_sent += 1
        token = self._token() if callable(self._token) else self._token
        headers = {"Authorization": f"bearer {token}", "Accept": accept,
                   "X-GitHub-Api-Version": "2022-11-28"}
        try:
            response = self._session().request(
                method, url, json=payload, headers=headers,
                follow_redirects=method == "GET")  # a renamed repository answers 301
        except httpx.HTTPError as error:
            # the exception's text may hold the URL; its kind says enough
            raise ConnectionFailed(f"connection failed ({type(error).__name__})") from None
        body = _parsed(response)
        refusal = classify_answer(response.status_code, response.headers, body,
                                  now=self._clock(),
                                  secondary_default=self.budget.secondary_default,
                                  partial=partial)
        if refusal is not None:
            raise refusal
        if isinstance(body, str):
            raise ServerError("the answer was not JSON", status=response.status_code)
        return body

    def _session(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                self._http = httpx.Client(timeout=self._timeout, transport=self._transport,
                                          headers={"User-Agent": self._user_agent})
            return self._http


def _parsed(response: httpx.Response) -> Any:
    """The answer's JSON; its text when it is none (a proxy's HTML error page)."""
    if not response.content:
        return None
    try:
        return response.json()
    except (ValueError, RecursionError):
        return response.text
