"""`delivery demo`: the main job, offline, in under a minute.

Two small sample repositories (`api`, `web`) become bare repositories of the local forge,
and a ticket asks for a change in both. The bundled `deliver.dot` runs with a scripted
editing agent (`delivery.agents.scripted`) that really edits the worktrees: the first
change fails the `api` check (the forge's CI), the repair fixes it; a reviewer (played by
the demo through the local forge's review API, as a person would use `delivery review`)
asks for a change on `web`, the agent makes it and the reviewer approves; both PRs merge
in order and the worktrees are removed. Progress lines follow the run; a table of the PRs
ends it.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.cli.demo_args import DEMO_AGENT
from delivery.cli.demo_files import (
    API_BUGGY,
    API_FIXED,
    API_TEST,
    FOLDERS,
    REVIEW_TEXT,
    REVIEWER,
    SAMPLES,
    TICKET,
    WEB_ESCAPED,
    WEB_FIRST,
    WEB_TEST,
    WEB_TEST_ESCAPED,
)
from delivery.cli.prs import print_table
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.errors import RunInterrupted
from delivery.forges.local import LocalForge
from delivery.git import BOT_EMAIL, BOT_NAME
from delivery.lang.model import Node, NodeType
from delivery.lang.outcomes import StageOutcome
from delivery.store.records import RunStatus
from probes.evidence import PrQuery, PullRequestSnapshot


def _reply(summary: str, **updates: Any) -> str:
    return f"{summary}\n\n" + json.dumps({"context_updates": {"summary": summary, **updates}})


def demo_agent(*, checked_locally: bool = False) -> ScriptedAgent:
    """The scripted agent of the demo: real edits in both worktrees. The first change
    breaks api's test. `checked_locally`: the folders' CI command is also their local
    check (the demo's `--check`, SPEC §8.1), which catches it before anything is
    published: `fix` mends it, and `repair` has only web's review to answer. Otherwise
    (GitHub's CI, local checks that only compile) CI catches it and the first repair
    mends it."""
    scope = {"type": "leaf", "ticket": TICKET, "parent": None}
    api_fixed = ScriptedTurn(_reply("api: hello() now puts a comma and an exclamation mark.",
                                    answers={}), files={"api/greeting.py": API_FIXED})
    # the review asks for changes in a review, not in a thread: no thread to answer
    web_escaped = ScriptedTurn(_reply("web: the name is escaped with html.escape, with a test.",
                                      answers={}),
                               files={"web/page.py": WEB_ESCAPED,
                                      "web/test_page.py": WEB_TEST_ESCAPED})
    return ScriptedAgent({
        "scope": [ScriptedTurn(json.dumps({"context_updates": {"scope": scope}}))],
        "plan": [ScriptedTurn(json.dumps({"context_updates": {
            "plan": "api: add hello(name); web: add greeting(name). Merge api first."}}))],
        "implement": [ScriptedTurn(
            _reply("Added hello(name) to api and greeting(name) to web, with tests."),
            files={"api/greeting.py": API_BUGGY, "api/test_greeting.py": API_TEST,
                   "web/page.py": WEB_FIRST, "web/test_page.py": WEB_TEST})],
        "fix": [ScriptedTurn(_reply("api: hello() now puts a comma and an exclamation mark."),
                             files={"api/greeting.py": API_FIXED})] if checked_locally else [],
        "repair": [web_escaped] if checked_locally else [api_fixed, web_escaped],
    })


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": BOT_NAME, "GIT_AUTHOR_EMAIL": BOT_EMAIL,
           "GIT_COMMITTER_NAME": BOT_NAME, "GIT_COMMITTER_EMAIL": BOT_EMAIL}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def make_samples(root: Path) -> dict[str, Path]:
    """`root/remotes/<folder>.git`: bare repositories whose `main` holds the samples."""
    remotes: dict[str, Path] = {}
    for folder, files in SAMPLES.items():
        seed = root / "seed" / folder
        seed.mkdir(parents=True)
        for name, text in files.items():
            (seed / name).write_text(text, encoding="utf-8")
        _git(seed, "init", "--quiet", "-b", "main")
        _git(seed, "add", "-A")
        _git(seed, "commit", "--quiet", "-m", f"{folder}: the sample")
        remote = root / "remotes" / f"{folder}.git"
        remote.parent.mkdir(parents=True, exist_ok=True)
        _git(root, "clone", "--quiet", "--bare", str(seed), str(remote))
        remotes[folder] = remote
    shutil.rmtree(root / "seed")
    return remotes


@dataclass
class Reviewer:
    """The person of the demo: asks for a change on `web` as soon as its PR is opened (by
    the first publish), and approves once a new commit is pushed after that request."""

    forge: LocalForge
    remotes: dict[str, Path]
    branch: str
    out: TextIO
    requested_at: str = ""  # web's head when the change was requested
    approved: bool = False
    # where what the reviewer did is kept, so that a demo continued after Ctrl-C does not
    # ask for the change twice
    saved: Path | None = None

    def load(self) -> None:
        if self.saved is not None and self.saved.is_file():
            data = json.loads(self.saved.read_text(encoding="utf-8"))
            self.requested_at = str(data.get("requested_at", ""))
            self.approved = bool(data.get("approved", False))

    def _save(self) -> None:
        if self.saved is not None:
            self.saved.write_text(json.dumps({"requested_at": self.requested_at,
                                              "approved": self.approved}), encoding="utf-8")

    def _web(self) -> PullRequestSnapshot | None:
        seen = self.forge.pull_requests([PrQuery("web", str(self.remotes["web"]),
                                                 head_branch=self.branch)])["web"]
        return seen if isinstance(seen, PullRequestSnapshot) else None

    def after(self, node: Node) -> None:
        if node.type is NodeType.PUBLISH and not self.requested_at:
            pr = self._web()
            if pr is not None and pr.state.value not in ("MERGED", "CLOSED"):
                self.forge.review(str(self.remotes["web"]), pr.number, "CHANGES_REQUESTED",
                                  REVIEW_TEXT, author=REVIEWER)
                self.requested_at = pr.head_sha
                self._save()
                print(f"      reviewer {REVIEWER} asks for a change on web#{pr.number}: "
                      f"{REVIEW_TEXT}", file=self.out, flush=True)
        elif node.type is NodeType.PUBLISH and self.requested_at and not self.approved:
            pr = self._web()
            if pr is not None and pr.head_sha != self.requested_at:
                self.forge.review(str(self.remotes["web"]), pr.number, "APPROVED",
                                  "Thanks, escaped now.", author=REVIEWER)
                self.approved = True
                self._save()
                print(f"      reviewer {REVIEWER} approves web#{pr.number}", file=self.out,
                      flush=True)


@dataclass
class DemoProgress(Progress):
    """One line per stage, with what it did to the PRs; the reviewer acts between stages."""

    out: TextIO
    reviewer: Reviewer | None = None
    started: float = field(default_factory=time.monotonic)

    def stage_started(self, node: Node, attempt: int) -> None:
        pass

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.type in (NodeType.START, NodeType.EXIT, NodeType.CONDITIONAL):
            return
        mark = "ok" if result.outcome == StageOutcome.SUCCEEDED else "FAILED"
        note = _note(node, result)
        clock = time.monotonic() - self.started
        print(f"[{clock:5.1f}s] {node.label:<28} {mark}{note}", file=self.out, flush=True)
        if self.reviewer is not None:
            self.reviewer.after(node)


def _note(node: Node, result: StageResult) -> str:
    updates = result.updates
    if result.failure_reason:
        return f" — {result.failure_reason}"
    if node.type is NodeType.PROBE:
        states = [f"{f} {updates.get(f'{f}.pr.state')}" for f in FOLDERS
                  if f"{f}.pr.state" in updates]
        return f" — {', '.join(states)}" if states else ""
    if node.type is NodeType.PUBLISH:
        prs = [f"{f}#{updates[f'{f}.pr.number']}" for f in FOLDERS
               if f"{f}.pr.number" in updates]
        return f" — {', '.join(prs)}" if prs else ""
    if node.type is NodeType.WORKTREE_REMOVE:
        return f" — {updates.get('worktree.status', '')}"
    if node.type in (NodeType.AGENT, NodeType.PROMPT) and updates.get("summary"):
        return f" — {updates['summary']}"
    return ""


@dataclass
class DemoOutcome:
    run: RunOutcome
    rows: list[tuple[str, str, str, str]]  # folder, PR, state, link
    root: Path

    @property
    def merged(self) -> bool:
        return bool(self.rows) and all(row[2] == "MERGED" for row in self.rows)


BRANCH = "delivery/demo-1"
REVIEWER_FILE = "reviewer.json"


def demo_world(root: Path, forge: LocalForge | None = None) -> World:
    """The world of the demo's run in `root`: its scripted agent under the profile name
    run.json records (so `delivery resume ROOT/run` finds it), the clone cache in `root`."""
    return World(agents={DEMO_AGENT: demo_agent(checked_locally=True)}, forge=forge,
                 git_cache=root / "cache")


def _checks() -> dict[str, str]:
    python = shlex.quote(sys.executable)
    return {folder: f"{python} -m unittest -q" for folder in FOLDERS}


def _remotes(root: Path) -> dict[str, Path]:
    return {folder: root / "remotes" / f"{folder}.git" for folder in FOLDERS}


def run_demo(root: Path, out: TextIO) -> DemoOutcome:
    """Set up the samples under `root` (an empty directory) and deliver the ticket."""
    remotes = make_samples(root)
    workspace = root / "workspace"
    workspace.mkdir()
    python = shlex.quote(sys.executable)
    checks = _checks()
    forge = LocalForge(checks)
    reviewer = Reviewer(forge, remotes, BRANCH, out, saved=root / REVIEWER_FILE)
    print(f"delivery demo: ticket {TICKET}\n  repositories (local forge): "
          f"{', '.join(str(p) for p in remotes.values())}\n  workspace: {workspace}\n"
          f"  CI per folder: python -m unittest (run by the local forge on each PR head)\n",
          file=out, flush=True)
    bundled = importlib.resources.files("delivery.bundled.workflows").joinpath("deliver.dot")
    with importlib.resources.as_file(bundled) as workflow:
        request = RunRequest(
            workflow=workflow, goal="Greet people by name in the API and on the web page",
            inputs={"ticket": TICKET, "check_command": f"{python} -m compileall -q ."},
            workspace=workspace, run_dir=root / "run", repos={k: str(v) for k, v in
                                                              remotes.items()},
            forge="local", checks=checks, branch=BRANCH, agent=DEMO_AGENT)
        outcome = start_run(request, demo_world(root, forge),
                            observer=DemoProgress(out, reviewer))
    return DemoOutcome(outcome, _rows(forge, remotes), root)


def continue_demo(root: Path, out: TextIO) -> DemoOutcome:
    """Resume the demo's run in `root` (stopped by Ctrl-C, or failed) to its end, with the
    reviewer where it was."""
    remotes = _remotes(root)
    forge = LocalForge(_checks())
    reviewer = Reviewer(forge, remotes, BRANCH, out, saved=root / REVIEWER_FILE)
    reviewer.load()
    print(f"delivery demo: continuing the demo in {root}\n", file=out, flush=True)
    outcome = resume_run(root / "run", demo_world(root, forge),
                         observer=DemoProgress(out, reviewer))
    return DemoOutcome(outcome, _rows(forge, remotes), root)


def _rows(forge: LocalForge, remotes: dict[str, Path]) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    seen = forge.pull_requests([PrQuery(f, str(remotes[f]), head_branch=BRANCH)
                                for f in FOLDERS])
    for folder in FOLDERS:
        pr = seen[folder]
        if isinstance(pr, PullRequestSnapshot):
            rows.append((folder, f"#{pr.number}", pr.state.value, pr.url))
        else:
            rows.append((folder, "-", "NONE" if pr is None else "UNREADABLE", ""))
    return rows


def cmd_demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.dir is not None:
        root = args.dir.resolve()
        if (root / "run" / "run.json").is_file():  # a demo stopped or failed here: go on
            return _demo(root, out, kept=True, resume=True)
        if root.exists() and any(root.iterdir()):
            print(f"delivery demo: {root} is not empty and holds no demo to continue; name "
                  "an empty or new directory", file=err)
            return 2
        root.mkdir(parents=True, exist_ok=True)
        return _demo(root, out, kept=True)
    scratch = Path(tempfile.mkdtemp(prefix="delivery-demo-"))
    keep = False
    try:
        return _demo(scratch, out, kept=False)
    except RunInterrupted:
        keep = True  # what the demo did so far stays, to be continued
        raise
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


def _demo(root: Path, out: TextIO, *, kept: bool, resume: bool = False) -> int:
    started = time.monotonic()
    try:
        done = continue_demo(root, out) if resume else run_demo(root, out)
    except RunInterrupted as stop:
        raise RunInterrupted(stop.run_id, stop.run_dir, stop.signal_name,
                             hint=f"delivery demo --dir {shlex.quote(str(root))}") from None
    print(f"\nrun {done.run.run_id}: {done.run.status} in {time.monotonic() - started:.1f}s"
          + (f" — {done.run.failure_reason}" if done.run.failure_reason else ""), file=out)
    print_table(done.rows, out)
    print(f"  worktrees: {done.run.context.get('worktree.status', '')}", file=out)
    where = "" if kept else " (a temporary directory, removed now: --dir DIR keeps it)"
    print(f"  run directory: {done.run.run_dir}{where}", file=out)
    return 0 if done.run.status is RunStatus.SUCCEEDED and done.merged else 1
