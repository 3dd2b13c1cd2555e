"""The fake GitHub's issue endpoints (REST): list a repository's issues (PRs among them,
as GitHub lists them, marked by `pull_request`), read one, open one, edit its body, title
or state. What the change set's tracking issue needs (SPEC §7.1)."""

from __future__ import annotations

from typing import Any

from delivery.testing.github.rest import REPO, Answer, Rest, _page, invalid, not_found, route
from delivery.testing.github.state import Issue, Repository


def issue_json(rest: Rest, repo: Repository, issue: Issue) -> dict[str, Any]:
    return {"id": 10**6 + issue.number, "node_id": f"I_{repo.id}_{issue.number}",
            "number": issue.number, "title": issue.title, "body": issue.body,
            "state": issue.state, "user": rest.user(issue.author),
            "created_at": issue.created_at, "updated_at": issue.created_at,
            "url": f"{rest.api_url}/repos/{repo.full_name}/issues/{issue.number}",
            "html_url": f"{rest.state.base_url}/{repo.full_name}/issues/{issue.number}",
            "labels": [{"name": name} for name in repo.labels.get(issue.number, [])]}


def _pull_as_issue(rest: Rest, repo: Repository, number: int) -> dict[str, Any]:
    pr = repo.pulls[number]
    shown = Issue(number, pr.title, pr.author, pr.created_at, pr.body,
                  "open" if pr.state == "open" and not pr.merged else "closed")
    return issue_json(rest, repo, shown) | {"pull_request": {
        "url": f"{rest.api_url}/repos/{repo.full_name}/pulls/{number}"}}


@route("GET", REPO + "/issues")
def list_issues(rest: Rest, repo: Repository, params: dict[str, str], **_: Any) -> Answer:
    wanted = params.get("state", "open")
    numbers = sorted({*repo.issues, *repo.pulls},
                     reverse=params.get("direction", "desc") == "desc")
    shown = [issue_json(rest, repo, repo.issues[n]) if n in repo.issues
             else _pull_as_issue(rest, repo, n) for n in numbers]
    shown = [item for item in shown if wanted == "all" or item["state"] == wanted]
    return _page(rest, f"/repos/{repo.full_name}/issues", params, shown)


@route("GET", REPO + r"/issues/(?P<number>\d+)")
def get_issue(rest: Rest, repo: Repository, number: str, **_: Any) -> Answer:
    if int(number) in repo.issues:
        return 200, {}, issue_json(rest, repo, repo.issues[int(number)])
    if int(number) in repo.pulls:
        return 200, {}, _pull_as_issue(rest, repo, int(number))
    return not_found()


@route("POST", REPO + "/issues")
def create_issue(rest: Rest, repo: Repository, body: Any, **_: Any) -> Answer:
    if not isinstance(body, dict) or not body.get("title"):
        return invalid("title is required", resource="Issue", field="title",
                       code="missing_field")
    number = repo.next_number()
    issue = Issue(number, str(body["title"]), rest.login, rest.state.timestamp(),
                  str(body.get("body") or ""))
    repo.issues[number] = issue
    return 201, {}, issue_json(rest, repo, issue)


@route("PATCH", REPO + r"/issues/(?P<number>\d+)")
def update_issue(rest: Rest, repo: Repository, number: str, body: Any, **_: Any) -> Answer:
    issue = repo.issues.get(int(number))
    if issue is None:
        return not_found()
    if not isinstance(body, dict):
        return invalid("a JSON object is required", resource="Issue", code="invalid")
    issue.title = str(body.get("title", issue.title))
    issue.body = str(body.get("body", issue.body) or "")
    if body.get("state") in ("open", "closed"):
        issue.state = str(body["state"])
    return 200, {}, issue_json(rest, repo, issue)
