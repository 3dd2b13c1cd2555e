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
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.forges.local import LocalForge
from delivery.git import BOT_EMAIL, BOT_NAME
from delivery.lang.model import Node, NodeType
from probes.evidence import PrQuery, PullRequestSnapshot

TICKET = "https://tracker.example/browse/DEMO-1"
FOLDERS = ("api", "web")
REVIEWER = "ada"
REVIEW_TEXT = "Please escape the name: it comes from the visitor (html.escape)."

SAMPLES: dict[str, dict[str, str]] = {
    "api": {
        "README.md": "# api\n\nThe sample service of `delivery demo`.\n",
        "greeting.py": 'def status() -> str:\n    return "ok"\n',
        "test_greeting.py": (
            "import unittest\n\nfrom greeting import status\n\n\n"
            "class StatusTest(unittest.TestCase):\n"
            "    def test_status(self) -> None:\n"
            '        self.assertEqual(status(), "ok")\n'
        ),
    },
    "web": {
        "README.md": "# web\n\nThe sample web page of `delivery demo`.\n",
        "page.py": 'def title() -> str:\n    return "<h1>Welcome</h1>"\n',
        "test_page.py": (
            "import unittest\n\nfrom page import title\n\n\n"
            "class TitleTest(unittest.TestCase):\n"
            "    def test_title(self) -> None:\n"
            '        self.assertEqual(title(), "<h1>Welcome</h1>")\n'
        ),
    },
}

API_TEST = (
    "import unittest\n\nfrom greeting import hello, status\n\n\n"
    "class GreetingTest(unittest.TestCase):\n"
    "    def test_status(self) -> None:\n"
    '        self.assertEqual(status(), "ok")\n\n'
    "    def test_hello_greets_by_name(self) -> None:\n"
    '        self.assertEqual(hello("Ada"), "Hello, Ada!")\n'
)
API_BUGGY = ('def status() -> str:\n    return "ok"\n\n\n'
             'def hello(name: str) -> str:\n    return "Hello " + name\n')
API_FIXED = ('def status() -> str:\n    return "ok"\n\n\n'
             'def hello(name: str) -> str:\n    return f"Hello, {name}!"\n')
WEB_FIRST = ('def title() -> str:\n    return "<h1>Welcome</h1>"\n\n\n'
             'def greeting(name: str) -> str:\n    return f"<p>Hello, {name}!</p>"\n')
WEB_ESCAPED = ('import html\n\n\ndef title() -> str:\n    return "<h1>Welcome</h1>"\n\n\n'
               'def greeting(name: str) -> str:\n'
               '    return f"<p>Hello, {html.escape(name)}!</p>"\n')
WEB_TEST = (
    "import unittest\n\nfrom page import greeting, title\n\n\n"
    "class PageTest(unittest.TestCase):\n"
    "    def test_title(self) -> None:\n"
    '        self.assertEqual(title(), "<h1>Welcome</h1>")\n\n'
    "    def test_greeting(self) -> None:\n"
    '        self.assertEqual(greeting("Ada"), "<p>Hello, Ada!</p>")\n'
)
WEB_TEST_ESCAPED = WEB_TEST + (
    "\n    def test_greeting_escapes_the_name(self) -> None:\n"
    '        self.assertEqual(greeting("<b>"), "<p>Hello, &lt;b&gt;!</p>")\n'
)


def _reply(summary: str, **updates: Any) -> str:
    return f"{summary}\n\n" + json.dumps({"context_updates": {"summary": summary, **updates}})


def demo_agent() -> ScriptedAgent:
    """The scripted agent of the demo: real edits in both worktrees."""
    scope = {"type": "leaf", "ticket": TICKET, "parent": None}
    return ScriptedAgent({
        "scope": [ScriptedTurn(json.dumps({"context_updates": {"scope": scope}}))],
        "plan": [ScriptedTurn(json.dumps({"context_updates": {
            "plan": "api: add hello(name); web: add greeting(name). Merge api first."}}))],
        "implement": [ScriptedTurn(
            _reply("Added hello(name) to api and greeting(name) to web, with tests."),
            files={"api/greeting.py": API_BUGGY, "api/test_greeting.py": API_TEST,
                   "web/page.py": WEB_FIRST, "web/test_page.py": WEB_TEST})],
        "repair": [
            # the review asks for changes in a review, not in a thread: no thread to answer
            ScriptedTurn(_reply("api: hello() now puts a comma and an exclamation mark.",
                                answers={}),
                         files={"api/greeting.py": API_FIXED}),
            ScriptedTurn(_reply("web: the name is escaped with html.escape, with a test.",
                                answers={}),
                         files={"web/page.py": WEB_ESCAPED, "web/test_page.py": WEB_TEST_ESCAPED}),
        ],
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
    """The person of the demo: asks for a change on `web` once its PR is first observed,
    and approves once a new commit is pushed after that request."""

    forge: LocalForge
    remotes: dict[str, Path]
    branch: str
    out: TextIO
    requested_at: str = ""  # web's head when the change was requested
    approved: bool = False

    def _web(self) -> PullRequestSnapshot | None:
        seen = self.forge.pull_requests([PrQuery("web", str(self.remotes["web"]),
                                                 head_branch=self.branch)])["web"]
        return seen if isinstance(seen, PullRequestSnapshot) else None

    def after(self, node: Node) -> None:
        if node.type is NodeType.PROBE and not self.requested_at:
            pr = self._web()
            if pr is not None and pr.state.value not in ("MERGED", "CLOSED"):
                self.forge.review(str(self.remotes["web"]), pr.number, "CHANGES_REQUESTED",
                                  REVIEW_TEXT, author=REVIEWER)
                self.requested_at = pr.head_sha
                print(f"      reviewer {REVIEWER} asks for a change on web#{pr.number}: "
                      f"{REVIEW_TEXT}", file=self.out, flush=True)
        elif node.type is NodeType.PUBLISH and self.requested_at and not self.approved:
            pr = self._web()
            if pr is not None and pr.head_sha != self.requested_at:
                self.forge.review(str(self.remotes["web"]), pr.number, "APPROVED",
                                  "Thanks, escaped now.", author=REVIEWER)
                self.approved = True
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
        mark = "ok" if result.outcome == "succeeded" else "FAILED"
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


def run_demo(root: Path, out: TextIO) -> DemoOutcome:
    """Set up the samples under `root` (an empty directory) and deliver the ticket."""
    remotes = make_samples(root)
    workspace = root / "workspace"
    workspace.mkdir()
    python = shlex.quote(sys.executable)
    checks = {folder: f"{python} -m unittest -q" for folder in FOLDERS}
    forge = LocalForge(checks)
    branch = "delivery/demo-1"
    reviewer = Reviewer(forge, remotes, branch, out)
    print(f"delivery demo: ticket {TICKET}\n  repositories (local forge): "
          f"{', '.join(str(p) for p in remotes.values())}\n  workspace: {workspace}\n"
          f"  CI per folder: python -m unittest (run by the local forge on each PR head)\n",
          file=out, flush=True)
    bundled = importlib.resources.files("delivery.bundled.workflows").joinpath("deliver.dot")
    with importlib.resources.as_file(bundled) as workflow:
        request = RunRequest(
            workflow=workflow, goal="Greet people by name in the API and on the web page",
            inputs={"ticket": TICKET, "check_command": f"{python} -m compileall -q api web"},
            workspace=workspace, run_dir=root / "run", repos={k: str(v) for k, v in
                                                              remotes.items()},
            forge="local", checks=checks, branch=branch)
        world = World(agent=demo_agent(), forge=forge, git_cache=root / "cache")
        outcome = start_run(request, world, observer=DemoProgress(out, reviewer))
    rows: list[tuple[str, str, str, str]] = []
    seen = forge.pull_requests([PrQuery(f, str(remotes[f]), head_branch=branch)
                                for f in FOLDERS])
    for folder in FOLDERS:
        pr = seen[folder]
        if isinstance(pr, PullRequestSnapshot):
            rows.append((folder, f"#{pr.number}", pr.state.value, pr.url))
        else:
            rows.append((folder, "-", "NONE" if pr is None else "UNREADABLE", ""))
    return DemoOutcome(outcome, rows, root)


def print_table(rows: list[tuple[str, str, str, str]], out: TextIO) -> None:
    header = ("folder", "PR", "state", "link")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        print("  " + "  ".join([*cells, row[3]]).rstrip(), file=out)


def cmd_demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.dir is not None:
        root = args.dir.resolve()
        if root.exists() and any(root.iterdir()):
            print(f"delivery demo: {root} is not empty; name an empty or new directory",
                  file=err)
            return 2
        root.mkdir(parents=True, exist_ok=True)
        return _demo(root, out, kept=True)
    scratch = Path(tempfile.mkdtemp(prefix="delivery-demo-"))
    try:
        return _demo(scratch, out, kept=False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _demo(root: Path, out: TextIO, *, kept: bool) -> int:
    started = time.monotonic()
    done = run_demo(root, out)
    print(f"\nrun {done.run.run_id}: {done.run.status} in {time.monotonic() - started:.1f}s"
          + (f" — {done.run.failure_reason}" if done.run.failure_reason else ""), file=out)
    print_table(done.rows, out)
    print(f"  worktrees: {done.run.context.get('worktree.status', '')}", file=out)
    where = "" if kept else " (a temporary directory, removed now: --dir DIR keeps it)"
    print(f"  run directory: {done.run.run_dir}{where}", file=out)
    return 0 if done.run.status == "succeeded" and done.merged else 1
