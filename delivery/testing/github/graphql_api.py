"""`POST /graphql` of the fake GitHub: queries are executed with graphql-core against
GitHub's published schema (bundled as `schema.graphql.gz`), so a query GitHub would reject
— an unknown field, a wrong argument type, a connection without `first`/`last` or over 100
— is rejected here too. Resolvers read the in-memory state (`state.State`); `node(id:)`
answers review threads, and the mutations a delivery sends change it: the two thread ones
(`addPullRequestReviewThreadReply`, `resolveReviewThread`), `revertPullRequest` and
`markPullRequestReadyForReview`."""

from __future__ import annotations

import base64
import functools
import gzip
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from graphql import (
    DocumentNode,
    ExecutionResult,
    GraphQLError,
    GraphQLSchema,
    build_schema,
    execute_sync,
    parse,
    validate,
)

from delivery.testing.github import gitops
from delivery.testing.github.state import (
    BOT_SUFFIX,
    CheckRun,
    Issue,
    Pull,
    Repository,
    Review,
    ReviewThread,
    State,
    StatusContext,
    ThreadComment,
)

MAX_PAGE = 100


@functools.cache
def schema() -> GraphQLSchema:
    """GitHub's schema, built once per process (the SDL is 1.2 MB; building takes ~1 s).

    The published SDL breaks two rules graphql-core enforces on schemas (two fields of
    `EnterpriseOwnerInfo` are defined twice; some implementations deprecate a field their
    interface does not), so the schema is taken as GitHub publishes it: built with
    `assume_valid_sdl` and marked as validated. Queries are still fully validated."""
    data = resources.files(__package__).joinpath("schema.graphql.gz").read_bytes()
    built = build_schema(gzip.decompress(data).decode(), assume_valid_sdl=True)
    built._validation_errors = []  # what graphql-core records once a schema was validated
    return built


def validate_query(query: str) -> list[str]:
    """The messages of every validation error of `query` against GitHub's schema."""
    return [error.message for error in _document(query)[1]]


@functools.lru_cache(maxsize=512)
def _document(query: str) -> tuple[DocumentNode | None, tuple[GraphQLError, ...]]:
    """`query` parsed and validated against GitHub's schema: (its document, None when it
    does not parse or is not valid; the errors). Kept per query text: a client sends the
    same few queries again and again, and validating one against this schema cost more
    than answering it. (Execution leaves a document as it is.)"""
    try:
        document = parse(query)
    except GraphQLError as error:
        return None, (error,)
    errors = tuple(validate(schema(), document))
    return (None if errors else document), errors


class NotFound(Exception):
    """Answered as GitHub does: the field is null and the error has `type: NOT_FOUND`."""


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _index(cursor: str) -> int:
    try:
        return int(base64.b64decode(cursor).decode().rsplit(":", 1)[1])
    except (ValueError, IndexError) as error:
        raise GraphQLError(f"`{cursor}` does not appear to be a valid cursor.") from error


def connection(info: Any, items: Sequence[Any], node: Callable[[Any], Any], *,
               first: int | None = None, after: str | None = None, last: int | None = None,
               before: str | None = None, **_: Any) -> dict[str, Any]:
    name = info.field_name
    if first is None and last is None:
        raise GraphQLError(
            f"You must provide a `first` or `last` value to properly paginate the `{name}`"
            " connection.")
    for arg, value in (("first", first), ("last", last)):
        if value is not None and value > MAX_PAGE:
            raise GraphQLError(
                f"Requesting {value} records on the `{name}` connection exceeds the"
                f" `{arg}` limit of {MAX_PAGE} records.")
    start = _index(after) + 1 if after else 0
    end = _index(before) if before else len(items)
    window = list(range(start, max(start, min(end, len(items)))))
    if first is not None:
        window = window[:first]
    if last is not None:
        window = window[-last:] if last else []
    nodes = [node(items[i]) for i in window]
    return {
        "totalCount": len(items),
        "nodes": nodes,
        "edges": [{"cursor": _cursor(i), "node": n} for i, n in zip(window, nodes, strict=True)],
        "pageInfo": {
            "hasNextPage": bool(window) and window[-1] < len(items) - 1,
            "hasPreviousPage": bool(window) and window[0] > 0,
            "startCursor": _cursor(window[0]) if window else None,
            "endCursor": _cursor(window[-1]) if window else None,
        },
    }


def node_id(kind: str, *parts: object) -> str:
    return base64.b64encode(f"{kind}:{':'.join(map(str, parts))}".encode()).decode()


_node_id = node_id  # the resolvers' spelling


def _actor(login: str) -> dict[str, Any]:
    return {"__typename": "User", "login": login, "url": f"https://github.invalid/{login}"}


def _author(login: str) -> dict[str, Any] | None:
    """The author of a review, comment or labeling as GitHub's GraphQL answers it: an
    App's `name[bot]` account is a `Bot` whose login has no suffix; a deleted account is
    null."""
    if not login:
        return None
    if login.endswith(BOT_SUFFIX):
        name = login.removesuffix(BOT_SUFFIX)
        return {"__typename": "Bot", "login": name, "url": f"https://github.invalid/apps/{name}"}
    return _actor(login)


class Resolvers:
    """Builds the resolver tree for one request. `on_pr_state_read(repo, pr)` is called
    when a PR's `state` is read, so a test can make it merge or close mid-query."""

    def __init__(self, state: State,
                 on_pr_state_read: Callable[[Repository, Pull], None] | None = None,
                 login: str = "fake-user",
                 visible: Callable[[str], bool] | None = None) -> None:
        self.state = state
        self.on_pr_state_read = on_pr_state_read
        self.login = login  # the token's user: the author of the replies it posts
        # an App's installation token sees its installation's repositories only
        self.visible = visible

    def root(self) -> dict[str, Any]:
        return {
            "repository": self._repository,
            "node": self._node,
            "addPullRequestReviewThreadReply": self._add_reply,
            "resolveReviewThread": self._resolve_thread,
            "revertPullRequest": self._revert_pull_request,
            "markPullRequestReadyForReview": self._mark_ready,
            "viewer": _actor(self.login),
            "rateLimit": lambda info, **_: {
                "cost": 1, "limit": 5000, "remaining": 4999, "used": 1, "nodeCount": 0,
                "resetAt": "2030-01-01T00:00:00Z"},
        }

    def _find_thread(self, node_id: str) -> tuple[Repository, Pull, ReviewThread]:
        for repo in self.state.repos.values():
            for pr in repo.pulls.values():
                for thread in pr.threads:
                    if _node_id("PullRequestReviewThread", thread.id) == node_id:
                        return repo, pr, thread
        raise NotFound(f"Could not resolve to a node with the global id of '{node_id}'")

    def _node(self, info: Any, id: str) -> dict[str, Any]:
        repo, pr, thread = self._find_thread(id)
        return self.thread_obj(thread, repo, pr)

    def _add_reply(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        _, _, thread = self._find_thread(str(input["pullRequestReviewThreadId"]))
        comment = ThreadComment(self.state.next_id(), self.login, str(input["body"]))
        thread.comments.append(comment)
        return {"clientMutationId": input.get("clientMutationId"),
                "comment": self.comment_obj(comment, thread)}

    def _resolve_thread(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        repo, pr, thread = self._find_thread(str(input["threadId"]))
        thread.resolved = True
        return {"clientMutationId": input.get("clientMutationId"),
                "thread": self.thread_obj(thread, repo, pr)}

    def _revert_pull_request(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        """As GitHub: a branch `revert-<number>-<head>` from the base holding the revert
        of the merge, and a PR of it (a second call makes a second one, as GitHub does)."""
        wanted = str(input["pullRequestId"])
        for repo in self.state.repos.values():
            for pr in repo.pulls.values():
                if _node_id("PullRequest", repo.id, pr.number) != wanted:
                    continue
                if not pr.merged or not pr.merge_commit_sha:
                    raise GraphQLError("Pull request must be merged to be reverted")
                branch = f"revert-{pr.number}-{pr.head}"
                n = 2
                while gitops.ref_sha(repo.path, branch):
                    branch, n = f"revert-{pr.number}-{pr.head}-{n}", n + 1
                gitops.revert_commit(repo.path, branch, pr.base, pr.merge_commit_sha,
                                     f"Revert \"{pr.title}\"\n\nThis reverts #{pr.number}.")
                number = repo.next_number()
                revert = Pull(number=number, title=str(input.get("title") or
                                                       f"Revert \"{pr.title}\""),
                              body=str(input.get("body") or ""), head=branch, base=pr.base,
                              author=self.login, created_at=self.state.timestamp(),
                              draft=bool(input.get("draft", False)),
                              last_head_sha=gitops.ref_sha(repo.path, branch) or "")
                repo.pulls[number] = revert
                return {"clientMutationId": input.get("clientMutationId"),
                        "pullRequest": self.pr_obj(repo, pr),
                        "revertPullRequest": self.pr_obj(repo, revert)}
        raise NotFound(f"Could not resolve to a node with the global id of '{wanted}'")

    def _mark_ready(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        """As GitHub: the draft becomes ready for review (a ready PR stays ready)."""
        wanted = str(input["pullRequestId"])
        for repo in self.state.repos.values():
            for pr in repo.pulls.values():
                if _node_id("PullRequest", repo.id, pr.number) == wanted:
                    pr.draft = False
                    return {"clientMutationId": input.get("clientMutationId"),
                            "pullRequest": self.pr_obj(repo, pr)}
        raise NotFound(f"Could not resolve to a node with the global id of '{wanted}'")

    def _repository(self, info: Any, owner: str, name: str, **_: Any) -> dict[str, Any]:
        repo = self.state.repo(f"{owner}/{name}")
        if repo is None or (self.visible is not None and not self.visible(repo.full_name)):
            raise NotFound(f"Could not resolve to a Repository with the name '{owner}/{name}'.")
        return self.repo_obj(repo)

    def repo_obj(self, repo: Repository) -> dict[str, Any]:
        def pull_request(info: Any, number: int) -> dict[str, Any]:
            pr = repo.pulls.get(number)
            if pr is None:
                raise NotFound(f"Could not resolve to a PullRequest with the number of {number}.")
            return self.pr_obj(repo, pr)

        def pull_requests(info: Any, headRefName: str | None = None,
                          baseRefName: str | None = None, states: list[str] | None = None,
                          orderBy: dict[str, str] | None = None,
                          labels: list[str] | None = None, **page: Any) -> dict[str, Any]:
            pulls = [
                p for p in repo.pulls.values()
                if (headRefName is None or p.head == headRefName)
                and (baseRefName is None or p.base == baseRefName)
                and (not states or _pr_state(p) in states)
                and (not labels or set(labels) & set(repo.labels.get(p.number, [])))
            ]
            if orderBy and orderBy.get("direction") == "DESC":
                pulls.reverse()
            return connection(info, pulls, lambda p: self.pr_obj(repo, p), **page)

        def issue(info: Any, number: int) -> dict[str, Any]:
            found = repo.issues.get(number)
            if found is None:
                raise NotFound(f"Could not resolve to an issue or pull request with the "
                               f"number of {number}.")
            return self.issue_obj(repo, found)

        def collaborators(info: Any, login: str | None = None, query: str | None = None,
                          affiliation: str | None = None, **page: Any) -> dict[str, Any]:
            """People with access: those listed, and (with `login`) anyone the default
            gives write access; bots are never collaborators. As GitHub: only a token
            that may push reads them."""
            if repo.token_permission not in ("admin", "maintain", "write"):
                raise GraphQLError("Must have push access to view repository collaborators.")
            people = dict(repo.collaborators)
            if login is not None and login not in people and \
                    self.state.is_writer(repo, login):
                people[login] = repo.default_permission
            chosen = [(name, level) for name, level in people.items()
                      if not name.endswith(BOT_SUFFIX) and level != "none"
                      and (login is None or name.lower() == login.lower())
                      and (query is None or query.lower() in name.lower())]
            answer = connection(info, chosen, lambda item: _actor(item[0]), **page)
            levels = dict(chosen)
            answer["edges"] = [{**edge, "permission": levels[edge["node"]["login"]].upper()}
                               for edge in answer["edges"]]
            return answer

        return {
            "__typename": "Repository",
            "id": _node_id("Repository", repo.id),
            "databaseId": repo.id,
            "name": repo.name,
            "nameWithOwner": repo.full_name,
            "owner": _actor(repo.owner),
            "url": f"{self.state.base_url}/{repo.full_name}",
            "defaultBranchRef": _ref_obj(repo, repo.default_branch),
            "viewerPermission": repo.token_permission.upper(),
            "isArchived": False,
            "mergeCommitAllowed": "merge" in repo.merge_methods,
            "squashMergeAllowed": "squash" in repo.merge_methods,
            "rebaseMergeAllowed": "rebase" in repo.merge_methods,
            "pullRequest": pull_request,
            "pullRequests": pull_requests,
            "issue": issue,
            "collaborators": collaborators,
        }

    def pr_obj(self, repo: Repository, pr: Pull) -> dict[str, Any]:
        state = self.state

        def pr_state(info: Any) -> str:
            value = _pr_state(pr)
            if self.on_pr_state_read is not None:  # a change now is seen by later fields
                self.on_pr_state_read(repo, pr)
            return value

        def merge_state_status(info: Any) -> str:
            if pr.draft and pr.state == "open":
                return "DRAFT"
            mergeable = state.mergeable(repo, pr)
            if mergeable != "MERGEABLE":
                return "DIRTY" if mergeable == "CONFLICTING" else "UNKNOWN"
            if state.review_decision(repo, pr) not in (None, "APPROVED"):
                return "BLOCKED"
            if state.unmet_required_contexts(repo, state.head_sha(repo, pr)):
                return "BLOCKED"
            rollup = state.rollup(repo, state.head_sha(repo, pr))
            if rollup == "FAILURE":
                return "BLOCKED" if repo.require_checks else "UNSTABLE"
            return "CLEAN" if rollup in (None, "SUCCESS") else "BLOCKED"

        def commits(info: Any, **page: Any) -> dict[str, Any]:
            return connection(info, [state.head_sha(repo, pr)],
                              lambda sha: {"__typename": "PullRequestCommit",
                                           "commit": self.commit_obj(repo, sha)}, **page)

        def reviews(info: Any, states: list[str] | None = None, author: str | None = None,
                    **page: Any) -> dict[str, Any]:
            chosen = [r for r in pr.reviews if (not states or r.state in states)
                      and (author is None or r.author == author)]
            return connection(info, chosen, self.review_obj, **page)

        return {
            "__typename": "PullRequest",
            "id": _node_id("PullRequest", repo.id, pr.number),
            "number": pr.number,
            "title": pr.title,
            "body": pr.body,
            "url": f"{state.base_url}/{repo.full_name}/pull/{pr.number}",
            "permalink": f"{state.base_url}/{repo.full_name}/pull/{pr.number}",
            "author": _actor(pr.author),
            "createdAt": pr.created_at,
            "mergedAt": pr.merged_at,
            "closedAt": pr.closed_at,
            "isDraft": pr.draft,
            "state": pr_state,
            "merged": lambda info: pr.merged,
            "closed": lambda info: pr.state == "closed",
            "headRefName": pr.head,
            "isCrossRepository": bool(pr.fork),
            "headRepositoryOwner": _actor(pr.head_owner or repo.owner),
            "headRepository": {"__typename": "Repository",
                               "nameWithOwner": pr.fork or repo.full_name},
            "baseRefName": pr.base,
            "baseRef": lambda info: _ref_obj(repo, pr.base),
            "headRefOid": lambda info: state.head_sha(repo, pr),
            "baseRefOid": lambda info: state.base_sha(repo, pr),
            "mergeable": lambda info: state.mergeable(repo, pr),
            "mergeStateStatus": merge_state_status,
            "reviewDecision": lambda info: state.review_decision(repo, pr),
            "commits": commits,
            "reviews": reviews,
            "latestReviews": lambda info, **page: connection(
                info, list({r.author: r for r in pr.reviews}.values()), self.review_obj,
                **page),
            "latestOpinionatedReviews": lambda info, writersOnly=False, **page: connection(
                info, state.writers_opinions(repo, pr) if writersOnly
                else state.latest_opinions(pr), self.review_obj, **page),
            "reviewThreads": lambda info, **page: connection(
                info, pr.threads, lambda t: self.thread_obj(t, repo, pr), **page),
            "repository": lambda info: self.repo_obj(repo),
            **self.labelable(repo, pr.number),
        }

    def issue_obj(self, repo: Repository, issue: Issue) -> dict[str, Any]:
        return {"__typename": "Issue", "id": _node_id("Issue", repo.id, issue.number),
                "number": issue.number, "title": issue.title, "author": _actor(issue.author),
                "createdAt": issue.created_at,
                "url": f"{self.state.base_url}/{repo.full_name}/issues/{issue.number}",
                **self.labelable(repo, issue.number)}

    def labelable(self, repo: Repository, number: int) -> dict[str, Any]:
        """`labels` and the (un)labeling part of `timelineItems` of an issue or PR."""
        def labels(info: Any, orderBy: Any = None, **page: Any) -> dict[str, Any]:
            return connection(info, list(repo.labels.get(number, [])), lambda name: {
                "__typename": "Label", "id": _node_id("Label", repo.id, name),
                "name": name}, **page)

        def timeline(info: Any, itemTypes: list[str] | None = None, since: Any = None,
                     skip: Any = None, **page: Any) -> dict[str, Any]:
            wanted = {"LabeledEvent": "LABELED_EVENT", "UnlabeledEvent": "UNLABELED_EVENT"}
            chosen = [e for e in repo.label_events.get(number, [])
                      if not itemTypes or wanted[e.kind] in itemTypes]
            return connection(info, chosen, lambda e: {
                "__typename": e.kind, "id": _node_id(e.kind, repo.id, number, e.created_at),
                "actor": _author(e.actor), "createdAt": e.created_at,
                "label": {"__typename": "Label", "name": e.label}}, **page)

        return {"labels": labels, "timelineItems": timeline}

    def commit_obj(self, repo: Repository, sha: str) -> dict[str, Any]:
        state = self.state

        def rollup(info: Any) -> dict[str, Any] | None:
            overall = state.rollup(repo, sha)
            if overall is None:
                return None
            contexts: list[CheckRun | StatusContext] = [
                *state.check_runs(repo, sha), *state.status_contexts(repo, sha)]
            return {
                "__typename": "StatusCheckRollup",
                "id": _node_id("StatusCheckRollup", repo.id, sha),
                "state": overall,
                "contexts": lambda info, **page: connection(
                    info, contexts, _context_obj, **page),
            }

        return {
            "__typename": "Commit",
            "id": _node_id("Commit", repo.id, sha),
            "oid": sha,
            "abbreviatedOid": sha[:7],
            "statusCheckRollup": rollup,
        }

    def review_obj(self, review: Review) -> dict[str, Any]:
        return {
            "__typename": "PullRequestReview",
            "id": _node_id("PullRequestReview", review.id),
            "databaseId": review.id,
            "author": _author(review.author),
            "state": review.state,
            "body": review.body,
            "submittedAt": review.submitted_at,
            "url": f"{self.state.base_url}/review/{review.id}",
        }

    def thread_obj(self, thread: ReviewThread, repo: Repository, pr: Pull) -> dict[str, Any]:
        return {
            "__typename": "PullRequestReviewThread",
            "id": _node_id("PullRequestReviewThread", thread.id),
            "isResolved": thread.resolved,
            "isOutdated": thread.outdated,
            "isCollapsed": thread.resolved,
            "path": thread.path,
            "line": thread.line,
            "comments": lambda info, **page: connection(
                info, thread.comments, lambda c: self.comment_obj(c, thread), **page),
            "pullRequest": lambda info: self.pr_obj(repo, pr),
            "repository": lambda info: self.repo_obj(repo),
        }

    def comment_obj(self, comment: ThreadComment, thread: ReviewThread) -> dict[str, Any]:
        return {"__typename": "PullRequestReviewComment",
                "id": _node_id("PullRequestReviewComment", comment.id),
                "databaseId": comment.id, "author": _author(comment.author),
                "viewerDidAuthor": comment.author == self.login,
                "body": comment.body, "path": thread.path}


def _ref_obj(repo: Repository, branch: str) -> dict[str, Any]:
    """A branch as GitHub's `Ref`, with the protection the fake keeps for the default
    branch: `branchProtectionRule` (GitHub shows it to admins), `refUpdateRule` (its view
    for anyone), both null where the token cannot read them; rulesets answered empty."""
    protected = branch == repo.default_branch and repo.protection_readable and bool(
        repo.required_contexts or repo.required_approvals)
    rule = {"__typename": "BranchProtectionRule", "pattern": repo.default_branch,
            "requiresStatusChecks": bool(repo.required_contexts),
            "requiredStatusCheckContexts": list(repo.required_contexts),
            "requiresApprovingReviews": repo.required_approvals > 0,
            "requiredApprovingReviewCount": repo.required_approvals}
    update = {"__typename": "RefUpdateRule", "pattern": repo.default_branch,
              "requiredApprovingReviewCount": repo.required_approvals,
              "requiredStatusCheckContexts": list(repo.required_contexts),
              "requiresCodeOwnerReviews": False, "requiresConversationResolution": False,
              "requiresLinearHistory": False, "requiresSignatures": False,
              "allowsDeletions": False, "allowsForcePushes": False, "blocksCreations": False,
              "viewerAllowedToDismissReviews": True, "viewerCanPush": True}
    return {"__typename": "Ref", "id": _node_id("Ref", repo.id, branch), "name": branch,
            "prefix": "refs/heads/", "branchProtectionRule": rule if protected else None,
            "refUpdateRule": update if protected else None,
            "rules": lambda info, **_: {"nodes": [], "totalCount": 0}}


def _pr_state(pr: Pull) -> str:
    if pr.merged:
        return "MERGED"
    return "CLOSED" if pr.state == "closed" else "OPEN"


def _context_obj(item: CheckRun | StatusContext) -> dict[str, Any]:
    if isinstance(item, CheckRun):
        return {
            "__typename": "CheckRun",
            "id": _node_id("CheckRun", item.id),
            "databaseId": item.id,
            "name": item.name,
            "status": item.status,
            "conclusion": item.conclusion,
            "detailsUrl": item.details_url,
            "title": item.name,
            "summary": item.summary,
            "text": item.summary,
        }
    return {
        "__typename": "StatusContext",
        "id": _node_id("StatusContext", item.context),
        "context": item.context,
        "state": item.state,
        "targetUrl": item.target_url,
        "description": item.description,
    }


def execute(resolvers: Resolvers, query: str,
            variables: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON body GitHub would answer (always HTTP 200)."""
    with resolvers.state.refs_memo():
        document, invalid = _document(query)
        result = (ExecutionResult(None, list(invalid)) if document is None else
                  execute_sync(schema(), document, root_value=resolvers.root(),
                               variable_values=variables))
    body: dict[str, Any] = {}
    if result.data is not None:
        body["data"] = result.data
    if result.errors:
        errors = []
        for error in result.errors:
            formatted: dict[str, Any] = dict(error.formatted)
            if isinstance(error.original_error, NotFound):
                formatted["type"] = "NOT_FOUND"
            errors.append(formatted)
        body["errors"] = errors
    return body
