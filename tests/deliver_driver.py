"""Run or resume the bundled deliver.dot on the demo's two repositories and SIGKILL the
process at one point of a forge write (kill-and-resume tests).

    python tests/deliver_driver.py start|resume ROOT local|github [POINT:K]

ROOT holds `workspace/`, `run/`, `cache/` (and `remotes/` for the local forge, made by the
test); GitHub is reached through the GITHUB_* variables of the environment (the fake).
POINT is where the process kills itself, at the K-th time in this process:

    push           after a folder's commit, before its push (the forge hands out the remote)
    create-before  after the push, before the PR is looked up or created
    create-after   right after the PR was found or created
    body-after     right after a PR body was rewritten
    merge-before   before a PR is merged
    merge-after    right after a PR was merged, before the stage records it
    reply-after    right after a reply was posted in a review thread, before any resolve

Without POINT the run goes to its end; exit 0 when it succeeded, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from delivery.cli.demo import demo_agent
from delivery.engine.runner import World, resume_run, start_run
from delivery.forges.base import Forge, GitRemote, MergeResult, PullRequestRef, ThreadReply
from delivery.forges.select import open_forge
from delivery.testing.two_repos import request
from probes.evidence import PrObservation, PrQuery

POINTS = ("push", "create-before", "create-after", "body-after", "merge-before",
          "merge-after", "reply-after")


def checks() -> dict[str, str]:
    python = shlex.quote(sys.executable)
    return {"api": f"{python} -m unittest -q", "web": f"{python} -m unittest -q"}


class KillingForge:
    """Delegates to a real forge and kills the process at the chosen point."""

    def __init__(self, inner: Forge, point: str, count: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.point = point
        self.count = count
        self.seen: dict[str, int] = {}

    def _at(self, point: str) -> None:
        if point != self.point:
            return
        self.seen[point] = self.seen.get(point, 0) + 1
        if self.seen[point] == self.count:
            os.kill(os.getpid(), signal.SIGKILL)

    def git_remote(self, repository: str) -> GitRemote:
        if sys._getframe(1).f_code.co_name == "_publish_folder":  # the push comes next
            self._at("push")
        return self.inner.git_remote(repository)

    def default_branch(self, repository: str) -> str:
        return self.inner.default_branch(repository)

    def find_pull_request(self, repository: str, *, head: str) -> PullRequestRef | None:
        return self.inner.find_pull_request(repository, head=head)

    def find_or_create_pull_request(self, repository: str, *, head: str, base: str,
                                    title: str, body: str) -> PullRequestRef:
        self._at("create-before")
        ref = self.inner.find_or_create_pull_request(repository, head=head, base=base,
                                                     title=title, body=body)
        self._at("create-after")
        return ref

    def update_pull_request_body(self, repository: str, number: int, body: str) -> None:
        self.inner.update_pull_request_body(repository, number, body)
        self._at("body-after")

    def merge_pull_request(self, repository: str, number: int, *,
                           expected_head_sha: str) -> MergeResult:
        self._at("merge-before")
        result = self.inner.merge_pull_request(repository, number,
                                               expected_head_sha=expected_head_sha)
        self._at("merge-after")
        return result

    def reply_to_review_thread(self, repository: str, number: int, thread_id: str, *,
                               body: str, marker: str) -> ThreadReply:
        reply = self.inner.reply_to_review_thread(repository, number, thread_id, body=body,
                                                  marker=marker)
        self._at("reply-after")
        return reply

    def resolve_review_thread(self, repository: str, number: int, thread_id: str) -> None:
        self.inner.resolve_review_thread(repository, number, thread_id)

    def pull_requests(self, queries: list[PrQuery]) -> dict[str, PrObservation]:
        return dict(self.inner.pull_requests(queries))

    def graphql_read(self, operation: str, repository: str, query: str,
                     variables: dict[str, Any]) -> dict[str, Any]:
        """Preflight's query, before the first write (no kill point: it writes nothing)."""
        return self.inner.graphql_read(  # type: ignore[attr-defined, no-any-return]
            operation, repository, query, variables)


def main(argv: list[str]) -> int:
    command, root, forge_kind = argv[0], Path(argv[1]), argv[2]
    point, _, count = (argv[3] if len(argv) > 3 else "").partition(":")
    if forge_kind == "local":
        repos = {name: str(root / "remotes" / f"{name}.git") for name in ("api", "web")}
    else:
        repos = {name: f"octo/{name}" for name in ("api", "web")}
    if command == "start":
        kind, checked = forge_kind, checks() if forge_kind == "local" else {}
    else:  # what the run started with, as resume reads it
        info = json.loads((root / "run" / "run.json").read_text())
        kind, checked = info["forge"], info["checks"]
    forge: Forge = open_forge(kind, checks=checked, environ=os.environ)
    if point:
        forge = KillingForge(forge, point, int(count or 1))  # type: ignore[assignment]
    # with the local forge, the CI command is each folder's local check too
    world = World(agent=demo_agent(checked_locally=bool(checked)), forge=forge,
                  git_cache=root / "cache")
    if command == "start":
        outcome = start_run(request(root, repos, forge=forge_kind, checks=checked), world)
    else:
        outcome = resume_run(root / "run", world)
    print(json.dumps({"status": outcome.status, "failure_reason": outcome.failure_reason,
                      "path": outcome.path}))
    return 0 if outcome.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
