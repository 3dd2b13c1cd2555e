"""Review-thread writes on GitHub (SPEC §7.1 `respond`): the GraphQL texts and how their
answers are read. REST has no way to resolve a thread, and replying through REST needs the
comment's numeric id, so both go through GraphQL: `addPullRequestReviewThreadReply` and
`resolveReviewThread`, with the thread's node id (what the probe reports in
`<f>.threads.ids`). Values travel as variables, never spliced into the text; the texts are
validated against GitHub's published schema in the tests.

Replying is find-or-create: the thread's comments are read (newest first, page by page)
for the reply's marker before anything is posted, and again before a retry whose answer
was lost, so a resumed or retried stage never posts twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from delivery.errors import ForgeError
from delivery.forges.base import ThreadReply

COMMENTS_PAGE = 100
MAX_COMMENT_PAGES = 20  # 2,000 comments in one thread: further back is not searched

THREAD_COMMENTS_QUERY = """
query ThreadComments($thread: ID!, $before: String) {
  node(id: $thread) {
    __typename
    ... on PullRequestReviewThread {
      id
      isResolved
      pullRequest { number repository { nameWithOwner } }
      comments(last: 100, before: $before) {
        pageInfo { hasPreviousPage startCursor }
        nodes { id body viewerDidAuthor }
      }
    }
  }
}
"""

REPLY_MUTATION = """
mutation ReplyInThread($thread: ID!, $body: String!) {
  addPullRequestReviewThreadReply(input: {pullRequestReviewThreadId: $thread, body: $body}) {
    comment { id }
  }
}
"""

RESOLVE_MUTATION = """
mutation ResolveThread($thread: ID!) {
  resolveReviewThread(input: {threadId: $thread}) {
    thread { id isResolved }
  }
}
"""


@dataclass(frozen=True)
class ThreadPage:
    """One page of a thread's comments, as `THREAD_COMMENTS_QUERY` answered it."""

    repository: str  # owner/name of the thread's PR
    number: int
    resolved: bool
    # (comment id, body) of the comments the token's own account wrote, oldest first: a
    # person's comment copying a reply's marker must not pass for the bot's reply
    comments: tuple[tuple[str, str], ...]
    before: str | None  # the cursor of the page before this one, None at the first


def thread_page(data: Mapping[str, Any]) -> ThreadPage | None:
    """The page in a `THREAD_COMMENTS_QUERY` answer; None when the id is not a thread."""
    node = (data.get("data") or {}).get("node")
    if not isinstance(node, dict) or node.get("__typename") != "PullRequestReviewThread":
        return None
    pr = node.get("pullRequest") or {}
    connection = node.get("comments") or {}
    info = connection.get("pageInfo") or {}
    comments = tuple((str(c.get("id") or ""), str(c.get("body") or ""))
                     for c in connection.get("nodes") or []
                     if isinstance(c, dict) and c.get("viewerDidAuthor") is True)
    before = info.get("startCursor") if info.get("hasPreviousPage") else None
    return ThreadPage(repository=str((pr.get("repository") or {}).get("nameWithOwner") or ""),
                      number=int(pr.get("number") or 0), resolved=bool(node.get("isResolved")),
                      comments=comments, before=str(before) if before else None)


def reply_id(data: Mapping[str, Any]) -> str:
    payload = (data.get("data") or {}).get("addPullRequestReviewThreadReply") or {}
    return str((payload.get("comment") or {}).get("id") or "")


def find_reply(page_of: Callable[[str | None], ThreadPage], thread_id: str,
               marker: str) -> ThreadReply | None:
    """The reply carrying `marker` in a thread, searched back page by page (bounded)."""
    before: str | None = None
    for _ in range(MAX_COMMENT_PAGES):
        page = page_of(before)
        for comment_id, text in reversed(page.comments):
            if marker in text:
                return ThreadReply(thread_id, comment_id, created=False)
        if page.before is None:
            return None
        before = page.before
    return None


def checked_page(data: Mapping[str, Any], repository: str, number: int, thread_id: str,
                 operation: str) -> ThreadPage:
    """A thread's page, refused unless the thread is one of PR `number`'s in `repository`
    (never another PR's)."""
    page = thread_page(data)
    if page is None or page.number != number or \
            page.repository.lower() != repository.lower():
        raise ForgeError("github", repository, operation,
                         f"{thread_id} is not a review thread of PR #{number}",
                         "answer only the threads the probe listed in <folder>.threads.ids")
    return page
