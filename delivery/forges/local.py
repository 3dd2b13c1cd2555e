"""The local forge (SPEC §7.1): offline, embedded, no network.

A folder's "remote" is a git repository on disk (bare, ideally). Its pull requests are
records in `<git dir>/delivery/pulls.json`, next to the objects they point at; every write
holds an fcntl lock on `pulls.lock` and replaces the file atomically, so concurrent runs
never lose or duplicate a record. Checks come from a per-folder command run against the PR
head in a temporary clone and are cached by head commit; mergeability from
`git merge-tree --write-tree`; reviews and review threads from `delivery review`; a merge
is a real merge commit written into the remote's base branch with a compare-and-swap.

The facts and the classification are the ones every forge shares (`probes.facts`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from git import Repo

from delivery.errors import ForgeError
from delivery.forges.base import GitRemote, MergeResult, PullRequestRef, ThreadReply
from delivery.git import BOT_EMAIL, BOT_NAME
from delivery.redact import Redactor
from probes.evidence import (
    FailingCheck,
    ProbeFailure,
    PrObservation,
    PrQuery,
    PullRequestSnapshot,
    ReviewNote,
    ThreadNote,
)
from probes.pr_state import Checks, Mergeable, PrEvidence, Review

RECORDS_DIR = "delivery"
CHECK_TIMEOUT = 600.0
SUMMARY_CHARS = 2000
ReviewState = Literal["APPROVED", "CHANGES_REQUESTED", "COMMENTED"]


def _error(repository: str, operation: str, problem: str, fix: str = "") -> ForgeError:
    return ForgeError("local", repository, operation, problem, fix)


def git_dir_of(repository: str) -> Path:
    """The git directory of a local forge repository (bare, or a working tree's .git)."""
    path = Path(repository).expanduser()
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path.resolve()
    if (path / ".git" / "HEAD").is_file():
        return (path / ".git").resolve()
    raise _error(repository, "open the repository", "it is not a git repository",
                 "give the path of a (bare) git repository")


def _git(git_dir: Path, *args: str, env: Mapping[str, str] | None = None,
         check: bool = True) -> tuple[int, str, str]:
    """`git <args>` in the repository (its own Repo, closed); (status, stdout, stderr)."""
    with Repo(git_dir) as repo:
        status, out, err = repo.git.execute(["git", *args], with_extended_output=True,
                                            with_exceptions=False,
                                            env=dict(env) if env else None)
    if check and status != 0:
        raise _error(str(git_dir), f"run git {args[0]}", err.strip())
    return int(status), str(out), str(err)


def _ref_sha(git_dir: Path, branch: str) -> str:
    status, out, _ = _git(git_dir, "rev-parse", "--verify", "--quiet",
                          f"refs/heads/{branch}^{{commit}}", check=False)
    return out.strip() if status == 0 else ""


@dataclass(frozen=True)
class MergeTree:
    tree: str
    conflicts: tuple[str, ...]  # conflicting paths; empty when the merge is clean


def merge_tree(git_dir: Path, base_sha: str, head_sha: str) -> MergeTree:
    status, out, err = _git(git_dir, "merge-tree", "--write-tree", "--name-only",
                            "--no-messages", base_sha, head_sha, check=False)
    if status not in (0, 1):
        raise _error(str(git_dir), "compute mergeability (git merge-tree)",
                     err.strip(),
                     "the local forge needs git 2.38 or later")
    lines = out.splitlines()
    files = tuple(dict.fromkeys(line for line in lines[1:] if line.strip()))
    return MergeTree(lines[0].strip() if lines else "", files if status == 1 else ())


# What every PR record must hold, and of which type (a hand-edited file is checked on load).
_RECORD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "number": int, "head": str, "base": str, "title": str, "body": str, "state": str,
    "reviews": list, "threads": list, "merged_sha": str, "merged_head_sha": str,
}


class _Records:
    """pulls.json: read without a lock (it is replaced atomically), written under one."""

    def __init__(self, git_dir: Path) -> None:
        self.dir = git_dir / RECORDS_DIR
        self.path = self.dir / "pulls.json"

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"next": 1, "pulls": []}
        except ValueError as err:
            raise _error(str(self.path), "read the PR records",
                         f"they are not JSON: {err}",
                         "restore the file or remove it (its PRs are lost)") from None
        if not isinstance(data, dict) or not isinstance(data.get("pulls"), list):
            raise _error(str(self.path), "read the PR records",
                         "they have the wrong shape",
                         "restore the file or remove it (its PRs are lost)")
        for index, pull in enumerate(data["pulls"]):
            wrong = [key for key, kind in _RECORD_FIELDS.items()
                     if not isinstance(pull, dict) or not isinstance(pull.get(key), kind)]
            if wrong:
                raise _error(str(self.path), "read the PR records",
                             f"record {index + 1} has no valid {', '.join(wrong)}",
                             "restore the file or fix that record")
        return data

    @contextmanager
    def writing(self) -> Iterator[dict[str, Any]]:
        """The records, locked against every other writer; saved when the block ends."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / "pulls.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = self.load()
                yield data
                _write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _write_atomically(path: Path, text: str) -> None:
    handle, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _find(data: Mapping[str, Any], number: int) -> dict[str, Any] | None:
    for pull in data["pulls"]:
        if isinstance(pull, dict) and pull.get("number") == number:
            return pull  # the record itself: updated in place, saved by the writer
    return None


@dataclass(frozen=True)
class CheckResult:
    conclusion: Literal["SUCCESS", "FAILURE"]
    exit_code: int
    log: str  # path of the full output
    summary: str  # its tail


class LocalForge:
    """`Forge` over repositories on disk. `checks` maps a folder to its check command."""

    name = "local"

    def __init__(self, checks: Mapping[str, str] | None = None, *,
                 check_timeout: float = CHECK_TIMEOUT, required_approvals: int = 0,
                 redactor: Redactor | None = None) -> None:
        self.checks = dict(checks or {})
        # check output is stored: secrets a check prints are masked first (SPEC §14)
        self.redactor = redactor or Redactor.from_environment(os.environ)
        self.check_timeout = check_timeout
        # like a protected branch: a PR waits for this many approvals (REVIEW_REQUIRED)
        self.required_approvals = required_approvals

    # -- the write side (Forge) -------------------------------------------------------
    def git_remote(self, repository: str) -> GitRemote:
        git_dir = git_dir_of(repository)
        return GitRemote(url=str(git_dir.parent if git_dir.name == ".git" else git_dir))

    def default_branch(self, repository: str) -> str:
        _, out, _ = _git(git_dir_of(repository), "symbolic-ref", "--short", "HEAD")
        return out.strip()

    def find_or_create_pull_request(self, repository: str, *, head: str, base: str,
                                    title: str, body: str,
                                    draft: bool = False) -> PullRequestRef:
        git_dir = git_dir_of(repository)
        with _Records(git_dir).writing() as data:
            found = _of_head(data["pulls"], head)
            if found is not None:  # closed or merged: found, never replaced (as GitHub)
                return self._ref(repository, git_dir, found, created=False)
            if not _ref_sha(git_dir, head):
                raise _error(repository, f"open a PR for {head}",
                             f"branch {head!r} is not in the repository",
                             "push the branch before opening its PR")
            if not _ref_sha(git_dir, base):
                raise _error(repository, f"open a PR for {head}",
                             f"base branch {base!r} is not in the repository",
                             "name an existing base branch")
            number = int(data.get("next", 1))
            data["next"] = number + 1
            pull = {"number": number, "head": head, "base": base, "title": title,
                    "body": body, "state": "open", "created": _now(), "reviews": [],
                    "threads": [], "merged_sha": "", "merged_head_sha": "", "draft": draft}
            data["pulls"].append(pull)
            return self._ref(repository, git_dir, pull, created=True)

    def find_pull_request(self, repository: str, *, head: str) -> PullRequestRef | None:
        git_dir = git_dir_of(repository)
        found = _of_head(_Records(git_dir).load()["pulls"], head)
        return None if found is None else self._ref(repository, git_dir, found,
                                                    created=False)

    def update_pull_request_body(self, repository: str, number: int, body: str) -> None:
        with self._pull(repository, number) as pull:
            pull["body"] = body

    def merge_pull_request(self, repository: str, number: int, *,
                           expected_head_sha: str, method: str = "merge") -> MergeResult:
        if method != "merge":  # preflight says so before a run starts
            return MergeResult(repository, number, "refused",
                               f"the local forge merges with merge commits only, not {method}")
        git_dir = git_dir_of(repository)
        with self._pull(repository, number) as pull:
            def refused(reason: str) -> MergeResult:
                return MergeResult(repository, number, "refused", reason)

            if pull["state"] == "merged":
                return MergeResult(repository, number, "already_merged",
                                   merge_sha=pull["merged_sha"])
            if pull["state"] == "closed":
                return refused(f"PR #{number} is closed")
            if pull.get("draft"):
                return refused(f"PR #{number} is a draft; mark it ready for review first")
            head_sha = _ref_sha(git_dir, pull["head"])
            base_sha = _ref_sha(git_dir, pull["base"])
            if not head_sha or not base_sha:
                gone = pull["head"] if not head_sha else pull["base"]
                return refused(f"PR #{number}: branch {gone!r} is gone")
            if git_dir.name == ".git" and _checked_out(git_dir) == pull["base"]:
                return refused(f"{pull['base']} is checked out in the working tree of "
                               f"{git_dir.parent}; merging would leave that tree stale "
                               "(use a bare repository as the local forge's remote)")
            if head_sha != expected_head_sha:
                return refused(f"PR #{number} moved: its head is {head_sha[:12]}, not the "
                               f"{expected_head_sha[:12]} that was checked")
            if _is_ancestor(git_dir, head_sha, base_sha):
                # merged into the base already (a merge killed before its record was saved)
                pull.update(state="merged", merged_sha=base_sha, merged_head_sha=head_sha)
                return MergeResult(repository, number, "already_merged", merge_sha=base_sha)
            merged = merge_tree(git_dir, base_sha, head_sha)
            if merged.conflicts:
                return refused(f"PR #{number} conflicts with {pull['base']} in "
                               f"{', '.join(merged.conflicts)}")
            message = f"Merge pull request #{number} from {pull['head']}\n\n{pull['title']}\n"
            _, commit, _ = _git(git_dir, "commit-tree", merged.tree, "-p", base_sha, "-p",
                                head_sha, "-m", message, env=_merger(git_dir))
            commit = commit.strip()
            status, _, err = _git(git_dir, "update-ref", "-m", f"merge PR #{number}",
                                  f"refs/heads/{pull['base']}", commit, base_sha, check=False)
            if status != 0:
                return refused(f"{pull['base']} moved while PR #{number} was being merged "
                               f"({err.strip()}); probe again")
            pull.update(state="merged", merged_sha=commit, merged_head_sha=head_sha)
            return MergeResult(repository, number, "merged", merge_sha=commit)

    # -- reviews and threads (`delivery review`) --------------------------------------
    def review(self, repository: str, number: int, state: ReviewState, body: str = "",
               author: str = "") -> None:
        git_dir = git_dir_of(repository)
        with self._pull(repository, number) as pull:
            pull["reviews"].append({"author": author or _user(), "state": state, "body": body,
                                    "head_sha": _ref_sha(git_dir, pull["head"]),
                                    "at": _now()})

    def comment(self, repository: str, number: int, body: str, *, path: str = "",
                line: int = 0, author: str = "") -> int:
        """Open a review thread; its id."""
        with self._pull(repository, number) as pull:
            thread_id = len(pull["threads"]) + 1
            pull["threads"].append({"id": thread_id, "author": author or _user(),
                                    "body": body, "path": path, "line": line,
                                    "resolved": False, "at": _now()})
            return thread_id

    def resolve_thread(self, repository: str, number: int, thread_id: int) -> None:
        self.resolve_review_thread(repository, number, str(thread_id))

    # -- review threads (`respond`): the same find-or-create as on GitHub -------------
    def reply_to_review_thread(self, repository: str, number: int, thread_id: str, *,
                               body: str, marker: str) -> ThreadReply:
        if marker not in body:
            raise ValueError("the reply must contain its marker")
        # looked for and added under one lock: two writers cannot both post it
        with self._pull(repository, number) as pull:
            thread = _thread(pull, thread_id, repository, "reply in")
            replies = thread.setdefault("replies", [])
            for index, reply in enumerate(replies, start=1):
                # only the bot's own replies: a person's copying the marker is no reply
                if isinstance(reply, dict) and reply.get("author") == BOT_NAME \
                        and marker in str(reply.get("body", "")):
                    return ThreadReply(thread_id, f"{thread_id}.{index}", created=False)
            replies.append({"author": BOT_NAME, "body": body, "at": _now()})
            return ThreadReply(thread_id, f"{thread_id}.{len(replies)}", created=True)

    def resolve_review_thread(self, repository: str, number: int, thread_id: str) -> None:
        with self._pull(repository, number) as pull:
            _thread(pull, thread_id, repository, "resolve")["resolved"] = True

    def thread_replies(self, repository: str, number: int, thread_id: str) -> list[str]:
        """The bodies of the replies in a thread, oldest first."""
        pulls = _Records(git_dir_of(repository)).load()["pulls"]
        pull = next((p for p in pulls if p["number"] == number), None)
        if pull is None:
            raise _error(repository, f"find PR #{number}",
                         f"there is no pull request #{number}", "check the number")
        return [str(r.get("body", "")) for r in _thread(pull, thread_id, repository,
                                                        "read").get("replies", [])]

    def set_draft(self, repository: str, number: int, draft: bool = True) -> None:
        """Make a PR a draft (never ready, never merged) or ready for review again."""
        with self._pull(repository, number) as pull:
            pull["draft"] = draft

    def mark_ready_for_review(self, repository: str, number: int) -> None:
        self.set_draft(repository, number, False)

    def close_pull_request(self, repository: str, number: int, *, comment: str = "",
                           marker: str = "") -> None:
        """Closed, with why in the record (`close_comment`); a merged PR stays merged."""
        with self._pull(repository, number) as pull:
            if pull["state"] == "open":
                pull["state"] = "closed"
                if comment:
                    pull["close_comment"] = comment

    def delete_branch(self, repository: str, branch: str) -> bool:
        """The branch is deleted; as on GitHub, each of its PRs keeps its head as
        `refs/pull/<N>/head`, so no commit on it (a person's too) is lost."""
        git_dir = git_dir_of(repository)
        with _Records(git_dir).writing() as data:
            sha = _ref_sha(git_dir, branch)
            if not sha:
                return False
            for pull in data["pulls"]:
                if pull["head"] == branch:
                    _git(git_dir, "update-ref", f"refs/pull/{pull['number']}/head", sha)
            _git(git_dir, "update-ref", "-d", f"refs/heads/{branch}", sha)
            return True

    def reopen_pull_request(self, repository: str, number: int) -> None:
        """A person reopens a PR they closed (a merged one stays merged)."""
        with self._pull(repository, number) as pull:
            if pull["state"] == "closed":
                pull["state"] = "open"

    @contextmanager
    def _pull(self, repository: str, number: int) -> Iterator[dict[str, Any]]:
        with _Records(git_dir_of(repository)).writing() as data:
            pull = _find(data, number)
            if pull is None:
                raise _error(repository, f"find PR #{number}",
                             f"there is no pull request #{number}",
                             "check the number with delivery probe")
            yield pull

    def _ref(self, repository: str, git_dir: Path, pull: Mapping[str, Any], *,
             created: bool) -> PullRequestRef:
        state: Literal["open", "closed", "merged"] = (
            "merged" if pull["state"] == "merged" else
            "closed" if pull["state"] == "closed" else "open")
        return PullRequestRef(repository=repository, number=pull["number"],
                              url=_url(git_dir, pull["number"]), head_ref=pull["head"],
                              created=created, body=pull["body"], state=state,
                              draft=bool(pull.get("draft", False)))

    # -- the read side (PullRequestSource) --------------------------------------------
    def pull_requests(self, queries: Sequence[PrQuery]) -> Mapping[str, PrObservation]:
        seen: dict[str, PrObservation] = {}
        for query in queries:
            try:
                seen[query.folder] = self._observe(query)
            except ForgeError as err:
                seen[query.folder] = ProbeFailure(query.folder, str(err))
        return seen

    def _observe(self, query: PrQuery) -> PullRequestSnapshot | None:
        git_dir = git_dir_of(query.repository)
        pulls = _Records(git_dir).load()["pulls"]
        if query.number is not None:
            chosen = next((p for p in pulls if p["number"] == query.number), None)
            if chosen is None:
                raise _error(query.repository, f"find PR #{query.number}",
                             f"there is no pull request #{query.number}",
                             "check the number (PRs are listed in delivery/pulls.json)")
        elif query.head_branch:
            of_head = [p for p in pulls if p["head"] == query.head_branch]
            open_ = [p for p in of_head if p["state"] == "open"]
            chosen = (open_ or of_head or [None])[-1]
            if chosen is None:
                return None
        else:
            return None
        snapshot = self._snapshot(git_dir, query.folder, chosen)
        if chosen["state"] == "open":
            # merged or closed while it was being read (a check can take minutes): observed
            # once more, and reported as it is now
            now = _find(_Records(git_dir).load(), chosen["number"])
            if now is not None and now["state"] != "open":
                snapshot = self._snapshot(git_dir, query.folder, now)
        return snapshot

    def _snapshot(self, git_dir: Path, folder: str,
                  pull: Mapping[str, Any]) -> PullRequestSnapshot:
        state = pull["state"]
        head_sha = pull["merged_head_sha"] if state == "merged" else _ref_sha(git_dir,
                                                                              pull["head"])
        mergeable: Mergeable = "UNKNOWN"
        checks: Checks = "NONE"
        conflict = ""
        failing: tuple[FailingCheck, ...] = ()
        if state == "open":
            base_sha = _ref_sha(git_dir, pull["base"])
            if not head_sha or not base_sha:
                gone = pull["head"] if not head_sha else pull["base"]
                raise _error(str(git_dir), f"read PR #{pull['number']}",
                             f"branch {gone!r} is gone", "push it again or close the PR")
            merged = merge_tree(git_dir, base_sha, head_sha)
            mergeable = "CONFLICTING" if merged.conflicts else "MERGEABLE"
            if merged.conflicts:
                conflict = f"conflicts with {pull['base']} in {', '.join(merged.conflicts)}"
            command = self.checks.get(folder)
            if command:
                result = self.run_check(git_dir, head_sha, command)
                checks = result.conclusion
                if result.conclusion == "FAILURE":
                    failing = (FailingCheck(name=f"{folder}: {command}",
                                            conclusion="FAILURE", details_url=result.log,
                                            summary=result.summary),)
        # a review's id is its place in the record (reviews are only ever appended)
        notes = tuple(ReviewNote(r["author"], r["state"], r["body"], id=str(index))
                      for index, r in enumerate(pull["reviews"], start=1))
        open_threads = [t for t in pull["threads"] if not t["resolved"]]
        return PullRequestSnapshot(
            number=pull["number"], url=_url(git_dir, pull["number"]), head_ref=pull["head"],
            head_sha=head_sha, base_ref=pull["base"],
            evidence=PrEvidence(merged=state == "merged", closed=state == "closed",
                                mergeable=mergeable, checks=checks,
                                review=_review_state(pull["reviews"],
                                                     self.required_approvals),
                                draft=bool(pull.get("draft", False))),
            unresolved_threads=len(open_threads),
            failing_checks=failing, reviews=notes, conflict=conflict,
            threads=tuple(ThreadNote(path=t["path"], line=t["line"] or None,
                                     author=t["author"], body=t["body"], id=str(t["id"]))
                          for t in open_threads),
            thread_ids=tuple(str(t["id"]) for t in open_threads),
            extra=_approvals(pull["reviews"], self.required_approvals),
        )

    # -- checks -----------------------------------------------------------------------
    def run_check(self, git_dir: Path, head_sha: str, command: str) -> CheckResult:
        """The check's result for this head commit: from the cache, or run now in a
        temporary clone of the commit and cached (one run per commit and command)."""
        key = f"{head_sha}-{hashlib.sha256(command.encode()).hexdigest()[:12]}"
        folder = git_dir / RECORDS_DIR / "checks"
        folder.mkdir(parents=True, exist_ok=True)
        cached = folder / f"{key}.json"
        with (folder / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second prober waits and reads the cache
            try:
                if cached.is_file():
                    try:
                        return CheckResult(**json.loads(cached.read_text(encoding="utf-8")))
                    except (ValueError, TypeError):
                        pass  # a damaged cache entry: run the check again
                result = self._run_check_now(git_dir, head_sha, command, folder / f"{key}.log")
                _write_atomically(cached, json.dumps(result.__dict__))
                return result
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _run_check_now(self, git_dir: Path, head_sha: str, command: str,
                       log: Path) -> CheckResult:
        scratch = Path(tempfile.mkdtemp(prefix="delivery-check-"))
        try:
            source = scratch / "src"
            with Repo(git_dir) as repo:
                repo.git.execute(["git", "clone", "--quiet", "--shared", "--no-checkout",
                                  str(git_dir), str(source)])
            with Repo(source) as clone:
                clone.git.execute(["git", "checkout", "--quiet", "--detach", head_sha])
            output = scratch / "output.log"  # raw, outside the records; redacted into `log`
            with output.open("wb") as out:
                try:
                    code = subprocess.run(["bash", "-c", command], cwd=source, stdout=out,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          timeout=self.check_timeout, check=False).returncode
                except subprocess.TimeoutExpired:
                    out.write(f"\ncheck timed out after {self.check_timeout:g}s\n".encode())
                    code = 124
            text = self.redactor.text(output.read_text(encoding="utf-8", errors="replace"))
            _write_atomically(log, text)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return CheckResult("SUCCESS" if code == 0 else "FAILURE", code, str(log),
                           text[-SUMMARY_CHARS:])


def _of_head(pulls: Sequence[Mapping[str, Any]], head: str) -> dict[str, Any] | None:
    """The open PR of `head`, else its latest closed or merged one."""
    of_head = [pull for pull in pulls if pull["head"] == head]
    open_ = [pull for pull in of_head if pull["state"] == "open"]
    chosen = open_ or of_head
    return dict(chosen[-1]) if chosen else None


def _thread(pull: Mapping[str, Any], thread_id: str, repository: str,
            doing: str) -> dict[str, Any]:
    """The record of a PR's review thread (its id as text: `respond` gets ids from facts)."""
    for thread in pull["threads"]:
        if isinstance(thread, dict) and str(thread.get("id")) == str(thread_id):
            return thread
    raise _error(repository, f"{doing} thread {thread_id} of PR #{pull['number']}",
                 "there is no such thread",
                 "name a thread listed in <folder>.threads.ids (delivery probe --json)")


def _latest(reviews: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each reviewer's latest approving or blocking review (comments do not count)."""
    return {r["author"]: r["state"] for r in reviews
            if r["state"] in ("APPROVED", "CHANGES_REQUESTED")}


def _approvals(reviews: Sequence[Mapping[str, Any]], required: int) -> dict[str, int]:
    """Approvals given of those `required` (`pr.raw`, what a wait names); none without."""
    given = sum(1 for state in _latest(reviews).values() if state == "APPROVED")
    return {"approvals": given, "approvals_required": required} if required > 0 else {}


def _review_state(reviews: Sequence[Mapping[str, Any]], required: int = 0) -> Review:
    """With `required` approvals, fewer is REVIEW_REQUIRED."""
    latest = _latest(reviews)
    if "CHANGES_REQUESTED" in latest.values():
        return "CHANGES_REQUESTED"
    approvals = sum(1 for state in latest.values() if state == "APPROVED")
    if approvals < required:
        return "REVIEW_REQUIRED"
    return "APPROVED" if approvals else "NONE"


def _checked_out(git_dir: Path) -> str:
    status, out, _ = _git(git_dir, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return out.strip() if status == 0 else ""


def _is_ancestor(git_dir: Path, ancestor: str, descendant: str) -> bool:
    status, _, _ = _git(git_dir, "merge-base", "--is-ancestor", ancestor, descendant,
                        check=False)
    return status == 0


def _url(git_dir: Path, number: int) -> str:
    """`PATH#N`: what `delivery probe --repo f=PATH#N` and `delivery review` accept."""
    return f"{git_dir.parent if git_dir.name == '.git' else git_dir}#{number}"


def _merger(git_dir: Path) -> dict[str, str]:
    """The merge commit's identity: git's configured one, else the bot's."""
    name = _git(git_dir, "config", "--get", "user.name", check=False)[1].strip()
    email = _git(git_dir, "config", "--get", "user.email", check=False)[1].strip()
    if not name or not email:
        name, email = BOT_NAME, BOT_EMAIL
    ident = {"NAME": name, "EMAIL": email}
    return {f"GIT_{role}_{part}": value for role in ("AUTHOR", "COMMITTER")
            for part, value in ident.items()}


def _user() -> str:
    return os.environ.get("USER") or os.environ.get("USERNAME") or "reviewer"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
