"""The GraphQL text the GitHub probe sends, and how an answer becomes evidence.

One probe round is one query: each folder is an alias (`f0`, `f1`, …) over
`repository(owner:, name:)`, reading the PR by number or, by head branch, the open PR and
the most recent one (for a branch whose PR was merged or closed). Values travel as
variables, never spliced into the text. Follow-up queries page through review threads and
status contexts (checks) — only for PRs that have more than one page of them — and observe
a PR once more when it changed state while being read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from probes.evidence import (
    FailingCheck,
    PrQuery,
    PullRequestSnapshot,
    ReviewNote,
    ThreadNote,
)
from probes.labels import LABEL_SELECTION, StopMark, stop_mark
from probes.pr_state import Checks, Mergeable, PrEvidence, Review
from probes.steering import NO_PERMISSION, actor_login, is_bot

MAX_FOLDERS_PER_QUERY = 50
PAGE = 100  # GitHub's largest page
REVIEWS_PAGE = 30
THREAD_NOTES = 20  # unresolved threads quoted in `pr.raw` (all are counted)
IGNORED_NOTES = 20  # ignored authors named in `pr.raw`, then how many more

CONTEXT_FIELDS = """
fragment ProbeContexts on StatusCheckRollupContextConnection {
  totalCount
  pageInfo { hasNextPage endCursor }
  nodes {
    __typename
    ... on CheckRun { name status conclusion detailsUrl title summary }
    ... on StatusContext { context state targetUrl description }
  }
}
"""

THREAD_FIELDS = """
fragment ProbeThread on PullRequestReviewThread {
  id
  isResolved
  path
  line
  comments(first: 1) { nodes { body author { __typename login } } }
}
"""

PR_FIELDS = """
fragment ProbePullRequest on PullRequest {
  number
  url
  state
  merged
  closed
  isDraft
  isCrossRepository
  headRefName
  headRefOid
  baseRefName
  mergeable
  mergeStateStatus
  reviewDecision
  commits(last: 1) {
    nodes {
      commit {
        oid
        statusCheckRollup {
          state
          contexts(first: 100) { ...ProbeContexts }
        }
      }
    }
  }
  latestOpinionatedReviews(first: 30) { nodes { id state body author { __typename login } } }
  writerOpinions: latestOpinionatedReviews(first: 30, writersOnly: true) {
    nodes { id state body author { __typename login } }
  }
  reviewThreads(first: 100) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes { ...ProbeThread }
  }
""" + f"  {LABEL_SELECTION}\n}}\n"

ENDED_PR_FIELDS = """
fragment ProbeEndedPullRequest on PullRequest {
  number
  url
  state
  merged
  closed
  isCrossRepository
  headRefName
  headRefOid
  baseRefName
}
"""


def _variables_decl(decls: Sequence[str]) -> str:
    return f"({', '.join(decls)})" if decls else ""


def probe_query(queries: Sequence[PrQuery], ticket: tuple[str, int] | None = None
                ) -> tuple[str, dict[str, Any]]:
    """The text and variables of one probe round over `queries` (at most 50), and the
    labels of the `ticket` issue (`owner/name`, number; alias `ticket`) when given."""
    if len(queries) > MAX_FOLDERS_PER_QUERY:
        raise ValueError(f"at most {MAX_FOLDERS_PER_QUERY} folders per query")
    decls: list[str] = []
    fields: list[str] = []
    variables: dict[str, Any] = {}
    ended = False
    for i, query in enumerate(queries):
        owner, name = split_repository(query.repository)
        decls += [f"$o{i}: String!", f"$n{i}: String!"]
        variables[f"o{i}"], variables[f"n{i}"] = owner, name
        if query.number is not None:
            decls.append(f"$p{i}: Int!")
            variables[f"p{i}"] = query.number
            inner = f"pr: pullRequest(number: $p{i}) {{ ...ProbePullRequest }}"
        else:
            decls.append(f"$h{i}: String!")
            variables[f"h{i}"] = query.head_branch
            ended = True
            inner = (
                f"open: pullRequests(headRefName: $h{i}, states: [OPEN], first: 1) "
                "{ nodes { ...ProbePullRequest } } "
                f"recent: pullRequests(headRefName: $h{i}, first: 1, "
                "orderBy: {field: CREATED_AT, direction: DESC}) "
                "{ nodes { ...ProbeEndedPullRequest } } "
                # which of them is the run's: anyone may open a PR from a fork's branch
                # of the same name (SPEC §14), and GraphQL cannot filter by head owner
                f"heads: pullRequests(headRefName: $h{i}, first: {PAGE}, "
                "orderBy: {field: CREATED_AT, direction: DESC}) "
                "{ pageInfo { hasNextPage } nodes { number state isCrossRepository } }"
            )
        fields.append(f"  f{i}: repository(owner: $o{i}, name: $n{i}) {{ {inner} }}")
    if ticket is not None:
        owner, name = split_repository(ticket[0])
        decls += ["$to: String!", "$tn: String!", "$ti: Int!"]
        variables.update({"to": owner, "tn": name, "ti": ticket[1]})
        fields.append("  ticket: repository(owner: $to, name: $tn) "
                      f"{{ issue(number: $ti) {{ number url {LABEL_SELECTION} }} }}")
    fragments = (PR_FIELDS + CONTEXT_FIELDS + THREAD_FIELDS) if queries else ""
    text = (f"query Probe{_variables_decl(decls)} {{\n" + "\n".join(fields) + "\n}\n"
            + fragments + (ENDED_PR_FIELDS if ended else ""))
    return text, variables


def reobserve_query(targets: Sequence[tuple[str, int]]) -> tuple[str, dict[str, Any]]:
    """Observe PRs (`owner/name`, number) once more, in full (aliases `r0`, `r1`, …)."""
    decls: list[str] = []
    fields: list[str] = []
    variables: dict[str, Any] = {}
    for i, (repository, number) in enumerate(targets):
        owner, name = split_repository(repository)
        decls += [f"$o{i}: String!", f"$n{i}: String!", f"$p{i}: Int!"]
        variables.update({f"o{i}": owner, f"n{i}": name, f"p{i}": number})
        fields.append(f"  r{i}: repository(owner: $o{i}, name: $n{i}) "
                      f"{{ pr: pullRequest(number: $p{i}) {{ ...ProbePullRequest }} }}")
    text = (f"query Reobserve{_variables_decl(decls)} {{\n" + "\n".join(fields) + "\n}\n"
            + PR_FIELDS + CONTEXT_FIELDS + THREAD_FIELDS)
    return text, variables


def threads_query(targets: Sequence[tuple[str, int, str]]) -> tuple[str, dict[str, Any]]:
    """The next page of review threads of PRs (`owner/name`, number, cursor), aliases
    `t0`, `t1`, …; each also reads the PR's state to notice a merge or close meanwhile."""
    return _paged_query(
        "Threads", "t", targets,
        lambda i: (f"{{ state reviewThreads(first: {PAGE}, after: $c{i}) "
                   "{ pageInfo { hasNextPage endCursor } nodes { ...ProbeThread } } }"),
        THREAD_FIELDS)


def contexts_query(targets: Sequence[tuple[str, int, str]]) -> tuple[str, dict[str, Any]]:
    """The next page of status contexts (checks) of PRs' head commits (`owner/name`,
    number, cursor), aliases `c0`, `c1`, …; the commit's `oid` tells whether the head moved
    between pages."""
    return _paged_query(
        "Contexts", "c", targets,
        lambda i: ("{ commits(last: 1) { nodes { commit { oid statusCheckRollup { "
                   f"contexts(first: {PAGE}, after: $c{i}) {{ ...ProbeContexts }} }} }} }} }} }}"),
        CONTEXT_FIELDS)


def _paged_query(operation: str, alias: str, targets: Sequence[tuple[str, int, str]],
                 selection: Callable[[int], str], fragments: str) -> tuple[str, dict[str, Any]]:
    """One query reading a next page for each PR (`owner/name`, number, cursor): alias
    `<alias><i>` selects `selection(i)` on the PR, whose cursor variable is `$c<i>`."""
    decls: list[str] = []
    fields: list[str] = []
    variables: dict[str, Any] = {}
    for i, (repository, number, cursor) in enumerate(targets):
        owner, name = split_repository(repository)
        decls += [f"$o{i}: String!", f"$n{i}: String!", f"$p{i}: Int!", f"$c{i}: String!"]
        variables.update({f"o{i}": owner, f"n{i}": name, f"p{i}": number, f"c{i}": cursor})
        fields.append(f"  {alias}{i}: repository(owner: $o{i}, name: $n{i}) "
                      f"{{ pr: pullRequest(number: $p{i}) {selection(i)} }}")
    text = (f"query {operation}{_variables_decl(decls)} {{\n" + "\n".join(fields) + "\n}\n"
            + fragments)
    return text, variables


def head_contexts(node: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The head commit's oid and its status contexts connection (None without checks)."""
    commits = (node.get("commits") or {}).get("nodes") or []
    commit = ((commits[-1] or {}).get("commit") or {}) if commits else {}
    rollup = commit.get("statusCheckRollup") or {}
    contexts = rollup.get("contexts")
    return str(commit.get("oid") or ""), contexts if isinstance(contexts, dict) else None


def next_cursor(connection: Mapping[str, Any] | None) -> str | None:
    info = (connection or {}).get("pageInfo") or {}
    cursor = info.get("endCursor")
    return str(cursor) if info.get("hasNextPage") and cursor else None


def own_pull_request(repository: Mapping[str, Any]) -> tuple[int, str] | str | None:
    """The PR of the head branch whose head is in the repository itself — its open one,
    else its most recent — from a head-branch alias's `heads`: (number, the alias that
    reads it in full: `open` or `recent`); None when it has none; a reason when that
    cannot be told (more PRs from forks than a page holds)."""
    heads = repository.get("heads") or {}
    nodes = [n for n in heads.get("nodes") or [] if isinstance(n, Mapping)]
    own = [n for n in nodes if n.get("isCrossRepository") is False]
    chosen = next((n for n in own if n.get("state") == "OPEN"), None)
    if chosen is not None:
        return int(chosen.get("number") or 0), "open"
    if own:
        return int(own[0].get("number") or 0), "recent"
    if (heads.get("pageInfo") or {}).get("hasNextPage"):
        return (f"more than {PAGE} pull requests from forks use this head branch's name, "
                "and none of them is the repository's own: close them, or probe the PR "
                "by number")
    return None


def split_repository(repository: str) -> tuple[str, str]:
    owner, slash, name = repository.strip().partition("/")
    if not slash or not owner or not name or "/" in name:
        raise ValueError(f"a GitHub repository is owner/name, got {repository!r}")
    return owner, name.removesuffix(".git")


# -- answers → evidence ------------------------------------------------------------------
# why an author (in an `owner/name` repository) does not steer the run; None: they do
Steer = Callable[[str, str], str | None]
FAILING_CONCLUSIONS = frozenset(
    {"FAILURE", "TIMED_OUT", "CANCELLED", "ACTION_REQUIRED", "STARTUP_FAILURE", "STALE"})
# The commit status a run writes on every PR head of its change set (SPEC §7.1). GitHub
# counts it in the head's roll-up, but a PR's readiness must not wait on it: the run only
# writes `success` once every PR is ready, so counting it would wait forever.
CHANGE_SET_CONTEXT = "delivery/change-set"


def inconsistent(node: Mapping[str, Any]) -> bool:
    """`state` and the `merged`/`closed` flags disagree: the PR changed while being read."""
    state = node.get("state")
    merged, closed = bool(node.get("merged")), bool(node.get("closed"))
    return (state == "OPEN" and (merged or closed)) or (state == "MERGED" and not merged) or (
        state == "CLOSED" and not closed)


def _checks(rollup: Mapping[str, Any] | None
            ) -> tuple[Checks, list[FailingCheck], list[str], dict[str, str] | None]:
    """The head's checks without the run's own change-set status, which is returned apart
    (its state and description, None when the head has none)."""
    if not rollup:
        return "NONE", [], [], None
    failing: list[FailingCheck] = []
    pending: list[str] = []
    own: dict[str, str] | None = None
    others = 0
    for ctx in (rollup.get("contexts") or {}).get("nodes") or []:
        if not ctx:
            continue
        if ctx.get("__typename") == "StatusContext" and ctx.get("context") == CHANGE_SET_CONTEXT:
            own = {"state": str(ctx.get("state") or ""),
                   "description": str(ctx.get("description") or "")}
            continue
        others += 1
        if ctx.get("__typename") == "CheckRun":
            if ctx.get("conclusion") in FAILING_CONCLUSIONS:
                failing.append(FailingCheck(
                    name=str(ctx.get("name") or ""), conclusion=str(ctx["conclusion"]),
                    details_url=str(ctx.get("detailsUrl") or ""),
                    summary=str(ctx.get("summary") or ctx.get("title") or "")))
            elif ctx.get("status") != "COMPLETED":
                pending.append(str(ctx.get("name") or ""))
        elif ctx.get("state") in ("FAILURE", "ERROR"):
            failing.append(FailingCheck(
                name=str(ctx.get("context") or ""), conclusion=str(ctx["state"]),
                details_url=str(ctx.get("targetUrl") or ""),
                summary=str(ctx.get("description") or "")))
        elif ctx.get("state") in ("PENDING", "EXPECTED"):
            pending.append(str(ctx.get("context") or ""))
    state = rollup.get("state")
    if own is not None:  # the roll-up's state counts our status: decide from the others
        state = ("NONE" if not others else "FAILURE" if failing else
                 "PENDING" if pending else "SUCCESS")
    checks: Checks = ("NONE" if state == "NONE" else "SUCCESS" if state == "SUCCESS" else
                      "FAILURE" if state in ("FAILURE", "ERROR") else "PENDING")
    return checks, failing, pending, own


def _review(node: Mapping[str, Any], reviews: Sequence[ReviewNote],
            ignored: Sequence[ReviewNote]) -> Review:
    """The review decision as the people who steer left it: GitHub's `reviewDecision`,
    except one reached only through reviews that are ignored (an untrusted bot's, which
    GitHub may count when the bot can write) — the PR then still waits for a review."""
    decision = node.get("reviewDecision")
    kept = {r.state for r in reviews}
    dropped = {r.state for r in ignored}
    if decision in ("APPROVED", "CHANGES_REQUESTED") and decision not in kept \
            and decision in dropped:
        return "REVIEW_REQUIRED"
    if decision in ("APPROVED", "CHANGES_REQUESTED", "REVIEW_REQUIRED"):
        return decision  # type: ignore[no-any-return]
    # No review is required by the base branch (GitHub answers null): a reviewer's
    # request for changes still blocks.
    if "CHANGES_REQUESTED" in kept:
        return "CHANGES_REQUESTED"
    return "NONE"


def _reviews(node: Mapping[str, Any], repository: str, steer: Steer
             ) -> tuple[list[ReviewNote], list[ReviewNote], list[str]]:
    """The latest opinions of the people who steer, those ignored (without their text),
    and why each was ignored. A user steers when GitHub lists them among the writers
    (`writersOnly`); a bot only when trusted. The writers' opinions are read from their
    own list: in the full one, a crowd of strangers' reviews could push them off the page."""
    writer_nodes = [r for r in ((node.get("writerOpinions") or {}).get("nodes") or []) if r]
    writers = {actor_login(r.get("author")).lower() for r in writer_nodes}
    kept: list[ReviewNote] = []
    ignored: list[ReviewNote] = []
    why: list[str] = []
    seen: set[str] = set()
    for r in [*writer_nodes, *((node.get("latestOpinionatedReviews") or {}).get("nodes")
                               or [])]:
        if not r:
            continue
        login = actor_login(r.get("author"))
        key = str(r.get("id") or "") or f"@{login.lower()}"  # a writer is in both lists
        if key in seen:
            continue
        seen.add(key)
        note = ReviewNote(author=login, state=str(r.get("state") or ""),
                          body=str(r.get("body") or ""), id=str(r.get("id") or ""))
        reason = steer(repository, login) if is_bot(login) or not login else (
            None if login.lower() in writers else NO_PERMISSION)
        if reason is None:
            kept.append(note)
        else:
            ignored.append(ReviewNote(author=login, state=note.state, body="", id=note.id))
            why.append(f"review by @{login or 'ghost'} ({reason})")
    return kept, ignored, why


def ignored_notes(notes: Sequence[str]) -> tuple[str, ...]:
    """What `pr.raw` says of the ignored, bounded (a crowd of strangers is counted)."""
    if len(notes) <= IGNORED_NOTES:
        return tuple(notes)
    return (*notes[:IGNORED_NOTES], f"and {len(notes) - IGNORED_NOTES} more")


def thread_notes(nodes: Sequence[Mapping[str, Any] | None]) -> tuple[int, list[ThreadNote]]:
    unresolved = 0
    notes: list[ThreadNote] = []
    for thread in nodes:
        if not thread or thread.get("isResolved"):
            continue
        unresolved += 1
        comments = (thread.get("comments") or {}).get("nodes") or []
        first = comments[0] if comments and comments[0] else {}
        notes.append(ThreadNote(
            path=str(thread.get("path") or ""),
            line=thread.get("line") if isinstance(thread.get("line"), int) else None,
            author=actor_login(first.get("author")),
            body=str(first.get("body") or ""), id=str(thread.get("id") or "")))
    return unresolved, notes


def snapshot(node: Mapping[str, Any], *, threads: Sequence[ThreadNote],
             checks_truncated: bool = False, repository: str = "",
             steer: Steer | None = None) -> PullRequestSnapshot:
    """Evidence from one PR node (`ProbePullRequest` or `ProbeEndedPullRequest`) and its
    unresolved threads; `steer(repository, login)` says why an author is ignored (None:
    they steer; without it everyone does). Ignored threads are neither counted nor
    quoted, ignored reviews neither decide nor are quoted: `pr.raw` names their authors."""
    steer = steer or (lambda _repository, _login: None)
    kept_threads: list[ThreadNote] = []
    ignored: list[str] = []
    for thread in threads:
        reason = steer(repository, thread.author)
        if reason is None:
            kept_threads.append(thread)
        else:
            ignored.append(f"thread by @{thread.author or 'ghost'} ({reason})")
    state = node.get("state")
    merged = state == "MERGED" or bool(node.get("merged"))
    closed = not merged and (state == "CLOSED" or bool(node.get("closed")))
    commits = (node.get("commits") or {}).get("nodes") or []
    commit = (commits[-1] or {}).get("commit") or {} if commits else {}
    checks, failing, pending, own = _checks(commit.get("statusCheckRollup"))
    reviews, dropped, why = _reviews(node, repository, steer)
    mergeable_raw = node.get("mergeable")
    mergeable: Mergeable = (mergeable_raw if mergeable_raw in ("MERGEABLE", "CONFLICTING")
                            else "UNKNOWN")
    head, base = str(node.get("headRefName") or ""), str(node.get("baseRefName") or "")
    conflict = ""
    if mergeable == "CONFLICTING" and not merged and not closed:
        conflict = (f"{head} conflicts with {base} (mergeStateStatus "
                    f"{node.get('mergeStateStatus') or 'DIRTY'}): merge or rebase {base}"
                    " into the branch and resolve the conflicting files")
    evidence = PrEvidence(merged=merged, closed=closed, mergeable=mergeable, checks=checks,
                          review=_review(node, reviews, dropped), draft=bool(node.get("isDraft")))
    stop: StopMark | None = None
    if not merged and not closed:  # a stop label counts on the run's open PRs only
        stop = stop_mark(node, repository, steer)
    extra: dict[str, Any] = {}
    if node.get("mergeStateStatus"):
        extra["merge_state_status"] = node["mergeStateStatus"]
    if pending:
        extra["pending_checks"] = pending
    if own is not None:
        extra["change_set_status"] = own
    return PullRequestSnapshot(
        number=int(node.get("number") or 0), url=str(node.get("url") or ""),
        head_ref=head, head_sha=str(node.get("headRefOid") or commit.get("oid") or ""),
        base_ref=base, evidence=evidence, unresolved_threads=len(kept_threads),
        failing_checks=tuple(failing), reviews=tuple(reviews), conflict=conflict,
        extra=extra, threads=tuple(kept_threads[:THREAD_NOTES]),
        checks_truncated=checks_truncated,
        thread_ids=tuple(t.id for t in kept_threads if t.id),
        ignored=ignored_notes(why + ignored), stop=stop,
    )
