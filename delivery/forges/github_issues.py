"""The change set's tracking issue on GitHub (SPEC §7.1: the dashboard of a set past 10
folders when the ticket is no GitHub issue): one issue the token opened, found by the
marker in its body, its body set to the set's table.

Find-or-create, never two: the issue the run recorded (`known`) is read first; else the
repository's issues are read newest first (a run killed between opening the issue and
recording it finds it among the newest) for one the token wrote holding the marker —
anyone may copy the marker into their own issue, and a person's words are never
overwritten. Opening is retried only after looking for the issue again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from github import GithubException
from github.Issue import Issue
from github.Repository import Repository

T = TypeVar("T")
SEARCHED = 300  # the newest issues read for the marker (3 pages of 100)


class _Calls(Protocol):
    """What of the GitHub forge this needs: its handles, its retries, who the token is."""

    def _repo(self, repository: str) -> Repository: ...

    def _retry(self, operation: str, repository: str, call: Callable[[], T], *,
               fix: str = "") -> T: ...

    def _set(self, operation: str, repository: str, call: Callable[[], T]) -> T: ...

    def _write(self, operation: str, repository: str, call: Callable[[], T],
               *, find_effect: Callable[[], Any]) -> Any: ...

    def viewer_login(self, repository: str) -> str: ...


def upsert_tracking_issue(forge: _Calls, repository: str, marker: str, title: str,
                          body: str, *, known: int = 0) -> int:
    """The number of the token's issue holding `marker`, whose body is now `body`."""
    if marker not in body:
        raise ValueError("the issue's body must contain its marker")
    repo = forge._repo(repository)
    login = forge.viewer_login(repository)

    def ours(issue: Issue) -> bool:
        return issue.pull_request is None and marker in (issue.body or "") \
            and issue.user is not None and issue.user.login == login

    def find() -> Issue | None:
        if known:
            try:
                issue = repo.get_issue(known)
                if ours(issue):
                    return issue
            except GithubException as error:
                if error.status not in (404, 410):  # gone: looked for below
                    raise
        for seen, issue in enumerate(repo.get_issues(state="all", sort="created",
                                                     direction="desc")):
            if seen >= SEARCHED:
                break
            if ours(issue):
                return issue
        return None

    existing = forge._retry("find the change set's tracking issue", repository, find)
    if existing is not None:
        if existing.body != body:
            forge._set(f"edit the tracking issue #{existing.number}", repository,
                       lambda: existing.edit(body=body))
        return int(existing.number)
    created = forge._write("open the change set's tracking issue", repository,
                           lambda: repo.create_issue(title=title, body=body),
                           find_effect=find)
    return int(created.number)
