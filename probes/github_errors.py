"""GitHub's answers, classified once for every request path (SPEC §7.1): the probe's and
the forge's GraphQL, the forge's REST (raw, or PyGithub's `GithubException`, whose status,
headers and data are an answer too) and the Actions runs a claim asks about.

One error tree. A `Transient` answer is worth another attempt (whether it gets one is the
retry policy's business, `probes.retry`): a rate limit, primary or secondary, REST or
GraphQL `RATE_LIMITED`, with the wait GitHub asked for; a 5xx; a dropped connection or a
timeout; a GraphQL error without a `type` saying "Something went wrong … timeout" (GitHub
gave up on the query, the same query usually passes). A `Refused` answer is final: the
token refused (401), not found (404, GraphQL `NOT_FOUND`), forbidden (403 that is no rate
limit, GraphQL `FORBIDDEN`), invalid (422, keeping the `errors[].code`s) and any other
rejection (a 4xx, a GraphQL error naming a problem with the query).

The token never appears in an error: the reasons are built from GitHub's answer only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

SECONDARY_DEFAULT = 60.0  # GitHub: wait at least a minute without Retry-After
# GraphQL errors that name one object a query could not see: the rest of `data` stands
PER_OBJECT_TYPES = ("NOT_FOUND", "FORBIDDEN")


class GitHubError(Exception):
    """GitHub did not answer what was asked; `reason` says why in GitHub's words, `status`
    is the HTTP status (0 when there was no answer)."""

    def __init__(self, reason: str, *, status: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class Transient(GitHubError):
    """An answer worth another attempt; `wait` is what GitHub asked for (None: back off
    exponentially)."""

    def __init__(self, reason: str, wait: float | None = None, *, status: int = 0) -> None:
        super().__init__(reason, status=status)
        self.wait = wait


class RateLimited(Transient):
    """A primary or secondary rate limit (REST 403/429, GraphQL `RATE_LIMITED`): GitHub
    asks for fewer requests, so a writer also spaces its writes more."""


class ServerError(Transient):
    """A 5xx, or an answer that is not the JSON GitHub sends."""


class ConnectionFailed(Transient):
    """No answer: the connection failed, dropped or timed out. A write may have happened."""


class QueryTimedOut(Transient):
    """GraphQL's "Something went wrong while executing your query … timeout" (no `type`)."""


class Refused(GitHubError):
    """A final answer: another attempt would get the same."""


class TokenRefused(Refused):
    """HTTP 401: the token is wrong, expired or revoked."""


class NotFound(Refused):
    """HTTP 404 or GraphQL `NOT_FOUND` (GitHub also says 404 for what the token may not see)."""


class Forbidden(Refused):
    """HTTP 403 that is no rate limit, or GraphQL `FORBIDDEN`: the token lacks a permission."""


class Invalid(Refused):
    """HTTP 422: GitHub refused the request's content; `codes` are its `errors[].code`s
    (`already_exists`, `custom`, `missing_field`, …)."""

    def __init__(self, reason: str, codes: tuple[str, ...] = (), *, status: int = 422) -> None:
        super().__init__(reason, status=status)
        self.codes = codes


class Rejected(Refused):
    """Any other refusal: a 4xx, a GraphQL error about the query itself."""


def classify_answer(status: int, headers: Mapping[str, str], body: Any, *,
                    now: float | None = None, secondary_default: float = SECONDARY_DEFAULT,
                    partial: bool = False) -> GitHubError | None:
    """The error an answer means, or None when it stands. `body` is the parsed JSON (or
    the text when it was none). A 2xx whose body carries GraphQL `errors` is classified by
    them; with `partial`, errors that name single objects leave the answer standing (the
    caller reads the missing aliases from `data` beside them)."""
    message = answer_message(status, body)
    if status >= 500:
        return ServerError(f"HTTP {status}", status=status)
    if status in (403, 429):
        wait = rate_limit_wait(headers, message, now=time.time() if now is None else now,
                               secondary_default=secondary_default)
        if wait is None and status == 429:  # Too Many Requests is a rate limit, named or not
            wait = secondary_default
        if wait is not None:
            return RateLimited(f"rate limited (HTTP {status}: {message})", wait,
                               status=status)
    if status == 401:
        return TokenRefused(f"the token was refused (HTTP 401: {message})", status=401)
    if status == 403:
        return Forbidden(f"HTTP 403: {message}", status=403)
    if status == 404:
        return NotFound(f"not found (HTTP 404: {message})", status=404)
    if status == 422:
        return Invalid(f"HTTP 422: {message}", _codes(body))
    if not 200 <= status < 300:
        return Rejected(f"HTTP {status}: {message}", status=status)
    if isinstance(body, dict) and isinstance(body.get("errors"), list) and body["errors"]:
        return _graphql_error(body, headers, now=time.time() if now is None else now,
                              secondary_default=secondary_default, partial=partial)
    return None


def _graphql_error(body: Mapping[str, Any], headers: Mapping[str, str], *, now: float,
                   secondary_default: float, partial: bool) -> GitHubError | None:
    errors = [e for e in body["errors"] if isinstance(e, dict)]
    text = graphql_error_text(body) or "GraphQL error"
    types = [str(e.get("type") or "") for e in errors]
    if "RATE_LIMITED" in types:
        wait = rate_limit_wait(headers, "rate limit", now=now,
                               secondary_default=secondary_default)
        return RateLimited(f"rate limited (GraphQL RATE_LIMITED: {text})", wait,
                           status=200)
    if any(not kind and _timed_out(str(e.get("message") or ""))
           for kind, e in zip(types, errors, strict=True)):
        return QueryTimedOut(f"GraphQL error: {text}", status=200)
    if partial and isinstance(body.get("data"), dict) and all(
            kind in PER_OBJECT_TYPES or e.get("path")
            for kind, e in zip(types, errors, strict=True)):
        return None  # each error names what it spoiled; the rest of `data` stands
    first = types[0] if types else ""
    if first == "NOT_FOUND":
        return NotFound(text, status=200)
    if first == "FORBIDDEN":
        return Forbidden(text, status=200)
    return Rejected(text, status=200)


def _timed_out(message: str) -> bool:
    lowered = message.lower()
    return "something went wrong" in lowered or "timeout" in lowered


def _codes(body: Any) -> tuple[str, ...]:
    if not isinstance(body, dict):
        return ()
    return tuple(str(e["code"]) for e in body.get("errors") or []
                 if isinstance(e, dict) and e.get("code"))


def answer_message(status: int, body: Any) -> str:
    """GitHub's words in an answer: `message`, then each `errors[].message` (a 422 says
    what failed there: "A pull request already exists for …")."""
    if isinstance(body, dict):
        parts = [str(body.get("message") or "")]
        parts += [str(e["message"]) for e in body.get("errors") or []
                  if isinstance(e, dict) and e.get("message")]
        joined = ": ".join(p for p in parts if p)
        if joined:
            return joined
    if isinstance(body, str) and body.strip():
        return body.strip().splitlines()[0][:200]
    return f"HTTP {status}"


def graphql_error_text(body: Mapping[str, Any]) -> str:
    """GitHub's GraphQL errors (answered with HTTP 200), joined; empty when there are none."""
    errors = body.get("errors") or []
    return "; ".join(str(e.get("message") or e) for e in errors if isinstance(e, dict))


def rate_limit_wait(headers: Mapping[str, str], message: str, *, now: float,
                    secondary_default: float = SECONDARY_DEFAULT) -> float | None:
    """How long a 403/429 answer asks to wait, or None when it is no rate limit:
    `Retry-After`, else the primary limit's reset (`x-ratelimit-remaining: 0`), else a
    secondary limit's message (GitHub: wait at least a minute)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    retry_after = str(lowered.get("retry-after", "")).strip()
    if retry_after.isdigit():
        return float(retry_after)
    if str(lowered.get("x-ratelimit-remaining", "")).strip() == "0":
        reset = str(lowered.get("x-ratelimit-reset", "")).strip()
        if reset.isdigit():
            return max(float(reset) - now, 0.0) + 1.0
        return secondary_default
    if "rate limit" in message.lower():
        return secondary_default
    return None
