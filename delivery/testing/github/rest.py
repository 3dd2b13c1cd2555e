"""The REST endpoints of the fake GitHub (the subset `delivery` and PyGithub use), under
`/api/v3` as on GitHub Enterprise Server. Answers are JSON in GitHub's shapes."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote

from delivery.testing.github import gitops
from delivery.testing.github.state import (
    BOT_SUFFIX,
    ActionsRun,
    IssueComment,
    MergeRefused,
    Pull,
    Repository,
    Review,
    ReviewThread,
    State,
    StatusContext,
    ThreadComment,
)

Answer = tuple[int, dict[str, str], Any]


def pull_node_id(repo: Repository, pr: Pull) -> str:
    """The PR's global id, the same in REST (`node_id`) and GraphQL (`id`)."""
    return base64.b64encode(f"PullRequest:{repo.id}:{pr.number}".encode()).decode()
Handler = Callable[..., Answer]
_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = []
REPO = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        _ROUTES.append((method, re.compile(f"^{pattern}$"), handler))
        return handler
    return register


def not_found() -> Answer:
    return 404, {}, {"message": "Not Found",
                     "documentation_url": "https://docs.github.com/rest"}


def invalid(message: str, **error: Any) -> Answer:
    return 422, {}, {"message": "Validation Failed", "errors": [error | {"message": message}]}


class Rest:
    def __init__(self, state: State, api_url: str, login: str) -> None:
        self.state = state
        self.api_url = api_url
        self.login = login

    def handle(self, method: str, path: str, query: str, body: Any) -> Answer:
        params = {k: v[-1] for k, v in parse_qs(query).items()}
        for verb, pattern, handler in _ROUTES:
            match = pattern.match(path)
            if verb == method and match:
                groups = match.groupdict()
                with self.state.refs_memo():
                    if "owner" in groups:
                        repo = self.state.repo(f"{groups.pop('owner')}/{groups.pop('name')}")
                        if repo is None:
                            return not_found()
                        return handler(self, repo, params=params, body=body, **groups)
                    return handler(self, params=params, body=body, **groups)
        return not_found()

    # -- JSON shapes --------------------------------------------------------------------
    def user(self, login: str) -> dict[str, Any]:
        kind = "Bot" if login.endswith(BOT_SUFFIX) else "User"
        return {"login": login, "id": abs(hash(login)) % 10**6, "type": kind,
                "url": f"{self.api_url}/users/{login}",
                "html_url": f"{self.state.base_url}/{login}"}

    def repo_json(self, repo: Repository) -> dict[str, Any]:
        return {
            "id": repo.id, "node_id": f"R_{repo.id}", "name": repo.name,
            "full_name": repo.full_name, "owner": self.user(repo.owner), "private": False,
            "html_url": f"{self.state.base_url}/{repo.full_name}",
            "url": f"{self.api_url}/repos/{repo.full_name}",
            "clone_url": f"{self.state.base_url}/{repo.full_name}.git",
            "default_branch": repo.default_branch, "topics": list(repo.topics),
            "archived": repo.archived, "fork": repo.fork,
            "description": repo.description or None,
            "permissions": {"admin": repo.token_permission == "admin",
                            "push": repo.token_permission in ("admin", "maintain", "write"),
                            "pull": True},
        }

    def pr_json(self, repo: Repository, pr: Pull) -> dict[str, Any]:
        state = self.state
        head_sha = state.head_sha(repo, pr)
        mergeable = state.mergeable(repo, pr)
        url = f"{self.api_url}/repos/{repo.full_name}/pulls/{pr.number}"
        return {
            "url": url, "id": repo.id * 100000 + pr.number, "node_id": pull_node_id(repo, pr),
            "html_url": f"{state.base_url}/{repo.full_name}/pull/{pr.number}",
            "issue_url": f"{self.api_url}/repos/{repo.full_name}/issues/{pr.number}",
            "number": pr.number, "state": pr.state, "locked": False, "title": pr.title,
            "body": pr.body, "user": self.user(pr.author), "draft": pr.draft,
            "created_at": pr.created_at, "updated_at": pr.created_at,
            "closed_at": pr.closed_at, "merged_at": pr.merged_at,
            "merge_commit_sha": pr.merge_commit_sha, "merged": pr.merged,
            "mergeable": {"MERGEABLE": True, "CONFLICTING": False}.get(mergeable),
            "mergeable_state": {"MERGEABLE": "clean", "CONFLICTING": "dirty"}.get(
                mergeable, "unknown"),
            "head": {"label": f"{pr.head_owner or repo.owner}:{pr.head}", "ref": pr.head,
                     "sha": head_sha, "user": self.user(pr.head_owner or repo.owner),
                     "repo": self.fork_json(pr.fork) if pr.fork else self.repo_json(repo)},
            "base": {"label": f"{repo.owner}:{pr.base}", "ref": pr.base,
                     "sha": state.base_sha(repo, pr), "user": self.user(repo.owner),
                     "repo": self.repo_json(repo)},
        }

    def fork_json(self, full_name: str) -> dict[str, Any]:
        """The head repository of a PR from a fork (a stranger's: the token may only read)."""
        owner, name = full_name.split("/", 1)
        return {"id": 0, "node_id": f"R_fork_{full_name}", "name": name,
                "full_name": full_name, "owner": self.user(owner), "private": False,
                "fork": True, "html_url": f"{self.state.base_url}/{full_name}",
                "url": f"{self.api_url}/repos/{full_name}",
                "clone_url": f"{self.state.base_url}/{full_name}.git",
                "permissions": {"admin": False, "push": False, "pull": True}}

    def comment_json(self, repo: Repository, comment: IssueComment) -> dict[str, Any]:
        return {
            "id": comment.id, "node_id": f"IC_{comment.id}", "body": comment.body,
            "user": self.user(comment.author), "created_at": comment.created_at,
            "updated_at": comment.updated_at,
            "url": f"{self.api_url}/repos/{repo.full_name}/issues/comments/{comment.id}",
            "html_url": f"{self.state.base_url}/{repo.full_name}/pull/{comment.number}"
                        f"#issuecomment-{comment.id}",
            "issue_url": f"{self.api_url}/repos/{repo.full_name}/issues/{comment.number}",
        }

    def review_json(self, repo: Repository, pr: Pull, review: Review) -> dict[str, Any]:
        return {"id": review.id, "user": self.user(review.author), "body": review.body,
                "state": review.state, "commit_id": review.commit_sha,
                "submitted_at": review.submitted_at,
                "pull_request_url": f"{self.api_url}/repos/{repo.full_name}/pulls/{pr.number}"}

    def ref_json(self, repo: Repository, branch: str, sha: str) -> dict[str, Any]:
        return {"ref": f"refs/heads/{branch}", "node_id": f"REF_{branch}",
                "url": f"{self.api_url}/repos/{repo.full_name}/git/refs/heads/{branch}",
                "object": {"sha": sha, "type": "commit",
                           "url": f"{self.api_url}/repos/{repo.full_name}/git/commits/{sha}"}}


def _page(rest: Rest, path: str, params: dict[str, str],
          items: list[Any]) -> Answer:
    per_page = min(int(params.get("per_page", "30")), 100)
    page = max(int(params.get("page", "1")), 1)
    chunk = items[(page - 1) * per_page: page * per_page]
    headers = {}
    if page * per_page < len(items):
        query = "&".join(f"{k}={v}" for k, v in params.items() if k != "page")
        headers["Link"] = f'<{rest.api_url}{path}?{query}&page={page + 1}>; rel="next"'
    return 200, headers, chunk


# -- repository, user, rate limit ------------------------------------------------------
@route("GET", REPO)
def get_repo(rest: Rest, repo: Repository, **_: Any) -> Answer:
    return 200, {}, rest.repo_json(repo)


# GitHub answers the first 1,000 results of a search, no more
SEARCH_LIMIT = 1000


@route("GET", "/search/repositories")
def search_repositories(rest: Rest, params: dict[str, str], **_: Any) -> Answer:
    """GitHub's repository search over the qualifiers `org:`/`user:`, `topic:` (each must
    match), `archived:` and `fork:` (forks are left out unless `fork:true` or
    `fork:only`, as on GitHub); other words must each appear in the name, description or
    topics. Sorted by full name; paged as GitHub pages it."""
    owners: list[str] = []
    topics: list[str] = []
    words: list[str] = []
    archived: bool | None = None
    forks = "false"
    for term in params.get("q", "").split():
        key, colon, value = term.partition(":")
        if not colon:
            words.append(term.lower())
        elif key in ("org", "user"):
            owners.append(value.lower())
        elif key == "topic":
            topics.append(value.lower())
        elif key == "archived" and value in ("true", "false"):
            archived = value == "true"
        elif key == "fork" and value in ("true", "false", "only"):
            forks = value
        else:
            return invalid(f"the fake GitHub's search does not know the qualifier {term!r}",
                           resource="Search", field="q", code="invalid")
    if not owners and not topics and not words:
        return invalid("a search needs a query", resource="Search", field="q",
                       code="missing")

    def matches(repo: Repository) -> bool:
        text = f"{repo.name} {repo.description} {' '.join(repo.topics)}".lower()
        return ((not owners or repo.owner.lower() in owners)
                and all(topic in [t.lower() for t in repo.topics] for topic in topics)
                and (archived is None or repo.archived == archived)
                and {"false": not repo.fork, "only": repo.fork, "true": True}[forks]
                and all(word in text for word in words))

    with rest.state.lock:
        found = sorted((r for r in rest.state.repos.values() if matches(r)),
                       key=lambda r: r.full_name.lower())
        per_page = min(int(params.get("per_page", "30")), 100)
        page = max(int(params.get("page", "1")), 1)
        if (page - 1) * per_page >= SEARCH_LIMIT and found:
            return invalid("Only the first 1000 search results are available",
                           resource="Search", field="q", code="invalid")
        status, headers, items = _page(rest, "/search/repositories", params,
                                       [rest.repo_json(r) for r in found[:SEARCH_LIMIT]])
    return status, headers, {"total_count": len(found), "incomplete_results": False,
                             "items": items}


@route("GET", "/user")
def get_user(rest: Rest, **_: Any) -> Answer:
    return 200, {}, rest.user(rest.login)


@route("GET", REPO + r"/collaborators/(?P<user>[^/]+)/permission")
def permission(rest: Rest, repo: Repository, user: str, **_: Any) -> Answer:
    level = rest.state.permission(repo, user)
    return 200, {}, {"permission": level, "role_name": level, "user": rest.user(user)}


# -- pulls ---------------------------------------------------------------------------
@route("GET", REPO + "/pulls")
def list_pulls(rest: Rest, repo: Repository, params: dict[str, str], **_: Any) -> Answer:
    wanted = params.get("state", "open")
    head = params.get("head")
    pulls = [
        p for p in repo.pulls.values()
        if (wanted == "all" or p.state == wanted)
        and (head is None or f"{p.head_owner or repo.owner}:{p.head}".lower() == head.lower()
             or (":" not in head and p.head == head))
        and ("base" not in params or p.base == params["base"])
    ]
    if params.get("direction", "desc") == "desc":
        pulls.reverse()
    return _page(rest, f"/repos/{repo.full_name}/pulls", params,
                 [rest.pr_json(repo, p) for p in pulls])


@route("GET", REPO + r"/pulls/(?P<number>\d+)")
def get_pull(rest: Rest, repo: Repository, number: str, **_: Any) -> Answer:
    pr = repo.pulls.get(int(number))
    return (200, {}, rest.pr_json(repo, pr)) if pr else not_found()


@route("POST", REPO + "/pulls")
def create_pull(rest: Rest, repo: Repository, body: Any, **_: Any) -> Answer:
    if not isinstance(body, dict) or not body.get("head") or not body.get("base"):
        return invalid("head and base are required", resource="PullRequest", code="missing")
    head = str(body["head"]).split(":", 1)[-1]
    base = str(body["base"])
    head_sha = gitops.ref_sha(repo.path, head)
    base_sha = gitops.ref_sha(repo.path, base)
    if head_sha is None:
        return invalid(f"head {head!r} does not exist", resource="PullRequest", field="head",
                       code="invalid")
    if base_sha is None:
        return invalid(f"base {base!r} does not exist", resource="PullRequest", field="base",
                       code="invalid")
    for other in repo.pulls.values():
        if other.state == "open" and other.head == head and other.base == base \
                and not other.fork:  # a fork's PR of a branch of that name is another's
            return invalid(f"A pull request already exists for {repo.owner}:{head}.",
                           resource="PullRequest", code="custom")
    if gitops.is_ancestor(repo.path, head_sha, base_sha):
        return invalid(f"No commits between {base} and {head}", resource="PullRequest",
                       code="custom")
    number = repo.next_number()
    pr = Pull(number=number, title=str(body.get("title", head)), body=str(body.get("body") or ""),
              head=head, base=base, author=rest.login, created_at=rest.state.timestamp(),
              draft=bool(body.get("draft", False)), last_head_sha=head_sha)
    repo.pulls[number] = pr
    return 201, {}, rest.pr_json(repo, pr)


@route("PATCH", REPO + r"/pulls/(?P<number>\d+)")
def update_pull(rest: Rest, repo: Repository, number: str, body: Any, **_: Any) -> Answer:
    pr = repo.pulls.get(int(number))
    if pr is None:
        return not_found()
    if not isinstance(body, dict):
        return invalid("a JSON object is expected", resource="PullRequest", code="invalid")
    if "title" in body:
        pr.title = str(body["title"])
    if "body" in body:
        pr.body = str(body["body"] or "")
    if body.get("state") == "closed" and pr.state == "open":
        rest.state.close(pr)
    elif body.get("state") == "open" and pr.state == "closed" and not pr.merged:
        pr.state, pr.closed_at = "open", None
    return 200, {}, rest.pr_json(repo, pr)


# GitHub's answers (HTTP 405) to a merge method the repository's settings do not allow
MERGE_METHOD_REFUSED = {
    "merge": "Merge commits are not allowed on this repository.",
    "squash": "Squash merges are not allowed on this repository.",
    "rebase": "Rebase merges are not allowed on this repository.",
}


@route("PUT", REPO + r"/pulls/(?P<number>\d+)/merge")
def merge_pull(rest: Rest, repo: Repository, number: str, body: Any, **_: Any) -> Answer:
    pr = repo.pulls.get(int(number))
    if pr is None:
        return not_found()
    sha = body.get("sha") if isinstance(body, dict) else None
    method = str(body.get("merge_method") or "merge") if isinstance(body, dict) else "merge"
    if method not in repo.merge_methods:
        return 405, {}, {"message": MERGE_METHOD_REFUSED.get(method, "Invalid merge method.")}
    try:
        merge_sha = rest.state.merge(repo, pr, sha)
    except MergeRefused as refused:
        return refused.status, {}, {"message": refused.message}
    return 200, {}, {"sha": merge_sha, "merged": True,
                     "message": "Pull Request successfully merged"}


@route("GET", REPO + r"/pulls/(?P<number>\d+)/merge")
def is_merged(rest: Rest, repo: Repository, number: str, **_: Any) -> Answer:
    pr = repo.pulls.get(int(number))
    return (204, {}, None) if pr and pr.merged else not_found()


# -- reviews -------------------------------------------------------------------------
@route("GET", REPO + r"/pulls/(?P<number>\d+)/reviews")
def list_reviews(rest: Rest, repo: Repository, number: str, params: dict[str, str],
                 **_: Any) -> Answer:
    pr = repo.pulls.get(int(number))
    if pr is None:
        return not_found()
    return _page(rest, f"/repos/{repo.full_name}/pulls/{number}/reviews", params,
                 [rest.review_json(repo, pr, r) for r in pr.reviews])


@route("POST", REPO + r"/pulls/(?P<number>\d+)/reviews")
def create_review(rest: Rest, repo: Repository, number: str, body: Any, **_: Any) -> Answer:
    pr = repo.pulls.get(int(number))
    if pr is None:
        return not_found()
    body = body if isinstance(body, dict) else {}
    event = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED",
             "COMMENT": "COMMENTED"}.get(str(body.get("event", "")))
    if event is None:
        return invalid("event must be APPROVE, REQUEST_CHANGES or COMMENT",
                       resource="PullRequestReview", field="event", code="invalid")
    review = add_review(rest.state, repo, pr, rest.login, event, str(body.get("body") or ""))
    for comment in body.get("comments") or []:
        add_thread(rest.state, pr, rest.login, str(comment.get("path", "")),
                   int(comment.get("line", 1)), str(comment.get("body", "")))
    return 200, {}, rest.review_json(repo, pr, review)


def add_review(state: State, repo: Repository, pr: Pull, author: str, review_state: str,
               body: str) -> Review:
    review = Review(state.next_id(), author, review_state, body, state.head_sha(repo, pr),
                    state.timestamp())
    pr.reviews.append(review)
    return review


def add_thread(state: State, pr: Pull, author: str, path: str, line: int,
               body: str, resolved: bool = False) -> ReviewThread:
    thread = ReviewThread(state.next_id(), path, line,
                          [ThreadComment(state.next_id(), author, body)], resolved)
    pr.threads.append(thread)
    return thread


# -- issue comments ------------------------------------------------------------------
@route("GET", REPO + r"/issues/(?P<number>\d+)/comments")
def list_comments(rest: Rest, repo: Repository, number: str, params: dict[str, str],
                  **_: Any) -> Answer:
    if int(number) not in repo.pulls and int(number) not in repo.issues:
        return not_found()
    chosen = [c for c in repo.comments.values() if c.number == int(number)]
    return _page(rest, f"/repos/{repo.full_name}/issues/{number}/comments", params,
                 [rest.comment_json(repo, c) for c in chosen])


@route("POST", REPO + r"/issues/(?P<number>\d+)/comments")
def create_comment(rest: Rest, repo: Repository, number: str, body: Any, **_: Any) -> Answer:
    if int(number) not in repo.pulls and int(number) not in repo.issues:
        return not_found()
    if not isinstance(body, dict) or not body.get("body"):
        return invalid("body is required", resource="IssueComment", field="body",
                       code="missing_field")
    now = rest.state.timestamp()
    comment = IssueComment(rest.state.next_id(), int(number), rest.login, str(body["body"]),
                           now, now)
    repo.comments[comment.id] = comment
    return 201, {}, rest.comment_json(repo, comment)


@route("GET", REPO + r"/issues/comments/(?P<comment_id>\d+)")
def get_comment(rest: Rest, repo: Repository, comment_id: str, **_: Any) -> Answer:
    comment = repo.comments.get(int(comment_id))
    return (200, {}, rest.comment_json(repo, comment)) if comment else not_found()


@route("PATCH", REPO + r"/issues/comments/(?P<comment_id>\d+)")
def update_comment(rest: Rest, repo: Repository, comment_id: str, body: Any,
                   **_: Any) -> Answer:
    comment = repo.comments.get(int(comment_id))
    if comment is None:
        return not_found()
    if not isinstance(body, dict) or not body.get("body"):
        return invalid("body is required", resource="IssueComment", field="body",
                       code="missing_field")
    comment.body = str(body["body"])
    comment.updated_at = rest.state.timestamp()
    return 200, {}, rest.comment_json(repo, comment)


# -- git refs ------------------------------------------------------------------------
@route("GET", REPO + r"/git/(?:ref|refs)/heads/(?P<branch>.+)")
def get_ref(rest: Rest, repo: Repository, branch: str, **_: Any) -> Answer:
    sha = gitops.ref_sha(repo.path, branch)
    return (200, {}, rest.ref_json(repo, branch, sha)) if sha else not_found()


@route("POST", REPO + "/git/refs")
def create_ref(rest: Rest, repo: Repository, body: Any, **_: Any) -> Answer:
    ref = str(body.get("ref", "")) if isinstance(body, dict) else ""
    sha = str(body.get("sha", "")) if isinstance(body, dict) else ""
    if not ref.startswith("refs/heads/") or not sha:
        return invalid("ref must start with refs/heads/ and sha is required",
                       resource="Reference", code="invalid")
    branch = ref.removeprefix("refs/heads/")
    if gitops.ref_sha(repo.path, branch):
        return invalid("Reference already exists", resource="Reference", code="custom")
    try:
        gitops.git(repo.path, "update-ref", ref, sha, "0" * 40)
    except gitops.GitError:
        return invalid("Object does not exist", resource="Reference", code="custom")
    return 201, {}, rest.ref_json(repo, branch, sha)


@route("DELETE", REPO + r"/git/(?:ref|refs)/heads/(?P<branch>.+)")
def delete_ref(rest: Rest, repo: Repository, branch: str, **_: Any) -> Answer:
    sha = gitops.ref_sha(repo.path, branch)
    if sha is None:
        return invalid("Reference does not exist", resource="Reference", code="custom")
    for pr in repo.pulls.values():
        if pr.head == branch and not pr.fork:
            rest.state.head_sha(repo, pr)  # remember the head before the branch goes
    gitops.git(repo.path, "update-ref", "-d", f"refs/heads/{branch}", sha)
    return 204, {}, None


# -- checks and statuses (what a REST-only client reads per PR) -----------------------
def _commit(repo: Repository, ref: str) -> str | None:
    sha = gitops.ref_sha(repo.path, ref)
    if sha:
        return sha
    out = gitops.git(repo.path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                     check=False)
    return out or None


@route("GET", REPO + r"/commits/(?P<ref>[^/]+)/check-runs")
def check_runs(rest: Rest, repo: Repository, ref: str, **_: Any) -> Answer:
    sha = _commit(repo, ref)
    if sha is None:
        return not_found()
    runs = rest.state.check_runs(repo, sha)
    return 200, {}, {"total_count": len(runs), "check_runs": [
        {"id": r.id, "name": r.name, "head_sha": r.head_sha, "status": r.status.lower(),
         "conclusion": r.conclusion.lower() if r.conclusion else None,
         "details_url": r.details_url, "html_url": r.details_url,
         "output": {"title": r.name, "summary": r.summary}} for r in runs]}


@route("GET", REPO + r"/commits/(?P<ref>[^/]+)/status")
def combined_status(rest: Rest, repo: Repository, ref: str, **_: Any) -> Answer:
    sha = _commit(repo, ref)
    if sha is None:
        return not_found()
    contexts = rest.state.status_contexts(repo, sha)
    states = {c.state for c in contexts}
    overall = ("failure" if states & {"FAILURE", "ERROR"} else
               "pending" if not contexts or states & {"PENDING", "EXPECTED"} else "success")
    return 200, {}, {"state": overall, "sha": sha, "total_count": len(contexts), "statuses": [
        {"context": c.context, "state": c.state.lower(), "target_url": c.target_url,
         "description": c.description} for c in contexts]}


@route("POST", REPO + r"/statuses/(?P<sha>[0-9a-f]{40})")
def create_status(rest: Rest, repo: Repository, sha: str, body: Any, **_: Any) -> Answer:
    body = body if isinstance(body, dict) else {}
    state = str(body.get("state", "")).upper()
    if state not in ("SUCCESS", "FAILURE", "ERROR", "PENDING"):
        return invalid("state must be error, failure, pending or success",
                       resource="Status", field="state", code="invalid")
    context = StatusContext(str(body.get("context", "default")), state,
                            str(body.get("target_url") or ""), str(body.get("description") or ""))
    repo.statuses.setdefault(sha, {})[context.context] = context
    return 201, {}, {"context": context.context, "state": state.lower(),
                     "target_url": context.target_url, "description": context.description}


@route("GET", REPO + r"/actions/runs/(?P<run_id>[0-9]+)")
def get_actions_run(rest: Rest, repo: Repository, run_id: str, **_: Any) -> Answer:
    if not repo.actions_readable:
        return 403, {}, {"message": "Resource not accessible by integration",
                         "documentation_url": "https://docs.github.com/rest/actions/"
                                              "workflow-runs#get-a-workflow-run"}
    run = repo.actions_runs.get(int(run_id))
    if run is None:
        return not_found()
    return 200, {}, actions_run_json(rest, repo, run)


def actions_run_json(rest: Rest, repo: Repository, run: ActionsRun) -> dict[str, Any]:
    return {"id": run.id, "status": run.status, "conclusion": run.conclusion or None,
            "run_attempt": run.attempt,
            "url": f"{rest.api_url}/repos/{repo.full_name}/actions/runs/{run.id}",
            "html_url": f"{rest.state.base_url}/{repo.full_name}/actions/runs/{run.id}",
            "repository": rest.repo_json(repo)}


@route("GET", REPO + r"/labels/(?P<label>[^/]+)")
def get_label(rest: Rest, repo: Repository, label: str, **_: Any) -> Answer:
    name = unquote(label)
    found = next((known for known in repo.label_set if known.lower() == name.lower()), None)
    if found is None:
        return not_found()
    color, description = repo.label_set[found]
    return 200, {}, {"name": found, "color": color, "description": description}


@route("POST", REPO + "/labels")
def create_label(rest: Rest, repo: Repository, body: Any, **_: Any) -> Answer:
    if repo.token_permission not in ("admin", "maintain", "write"):
        return 403, {}, {"message": "Resource not accessible by integration"}
    name = str((body or {}).get("name") or "")
    if not name:
        return invalid("name is missing", resource="Label", code="missing_field")
    if any(known.lower() == name.lower() for known in repo.label_set):
        return invalid("already_exists", resource="Label", code="already_exists",
                       field="name")
    repo.label_set[name] = (str(body.get("color") or "ededed"),
                            str(body.get("description") or ""))
    return 201, {}, {"name": name, "color": repo.label_set[name][0],
                     "description": repo.label_set[name][1]}
