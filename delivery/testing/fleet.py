"""A fleet of repositories for campaign runs (SPEC §8.1): N folders on the local forge or the
fake GitHub, a CI check that fails once in chosen folders, and a scripted agent whose turns
edit folders and take a real time per folder edited.

Used by `benchmarks/campaign.py` and the campaign chaos suite:

    fleet = Fleet.of(24, failing=0.1)
    repos = fleet.local_remotes(root)              # or fleet.github_repos(github)
    checks = fleet.local_checks(root, workspace)   # the local forge's per-folder CI
    agent = fleet.agent(load_workflow(path), seconds_per_folder=0.2, log=root / "calls")

The check fails the first time it runs for a failing folder in CI (the forge's clone of the
PR head; a marker file per folder remembers it) and passes in the run's own worktrees (the
workflow's local checks), as a test depending on CI's environment would: the change reaches
a PR and its repair is driven by CI's evidence. The agent plays a `ScriptedAgent` built
from the workflow's nodes: a prompt node replies with its declared outputs; an agent node
also writes `change.txt` — in its folder for a foreach stage (`implement@web`), in every
folder for deliver.dot's implement, in the failing folders for its repair. Before a turn it
sleeps `seconds_per_folder` for each folder it edits (the cost of a real agent grows with
the work) and appends the session's name to `log`, so calls are counted across kills.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.git import BOT_EMAIL, BOT_NAME
from delivery.lang.declarations import OutputKind
from delivery.lang.model import Node, NodeType, Workflow
from delivery.testing.github import CheckRule, FakeGitHub, Tree

TICKET = "https://tracker.example/browse/FLEET-1"
GOAL = "Bump the shared logging library in every service"
CHANGED = "change.txt"  # the file every agent turn writes
FILES = {"README.md": "# a service of the fleet\n", "app.py": "print('hello')\n"}
TURNS = 6  # turns per session script: repairs past it are not part of a campaign's plan
_MARKS = "ci-failed-once"


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": BOT_NAME, "GIT_AUTHOR_EMAIL": BOT_EMAIL,
           "GIT_COMMITTER_NAME": BOT_NAME, "GIT_COMMITTER_EMAIL": BOT_EMAIL}
    subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                   check=True)


@dataclass(frozen=True)
class Fleet:
    folders: tuple[str, ...]
    failing: frozenset[str]  # folders whose CI fails once

    @classmethod
    def of(cls, count: int, *, failing: float = 0.1) -> Fleet:
        """`count` folders (`r000`, `r001`, …), a `failing` share of them (at least one
        when the share is above 0) failing CI once, spread evenly over the fleet."""
        folders = tuple(f"r{i:03d}" for i in range(count))
        chosen = min(count, max(1, round(failing * count))) if failing > 0 else 0
        picked = {folders[math.floor(k * count / chosen)] for k in range(chosen)}
        return cls(folders, frozenset(picked))

    # -- repositories -----------------------------------------------------------------
    def local_remotes(self, root: Path) -> dict[str, str]:
        """`root/remotes/<folder>.git`, bare, `main` holding FILES; folder → path."""
        seed = root / "seed"
        seed.mkdir(parents=True)
        for name, text in FILES.items():
            (seed / name).write_text(text, encoding="utf-8")
        _git(seed, "init", "--quiet", "-b", "main")
        _git(seed, "add", "-A")
        _git(seed, "commit", "--quiet", "-m", "initial")
        remotes = {}
        for folder in self.folders:
            target = root / "remotes" / f"{folder}.git"
            _git(root, "clone", "--quiet", "--bare", str(seed), str(target))
            remotes[folder] = str(target)
        return remotes

    def local_checks(self, root: Path, workspace: Path) -> dict[str, str]:
        """The local forge's check command of each folder (`--check F=CMD`): fails once in
        CI for the failing folders, passes in the run's worktrees under `workspace`."""
        marks = root / _MARKS
        marks.mkdir(parents=True, exist_ok=True)
        script = root / "ci.sh"
        script.write_text(
            '# $1: the folder; $2: "fail" when its CI fails the first time\n'
            f'case "$PWD/" in {shlex.quote(str(workspace.resolve()))}/*) exit 0;; esac\n'
            '[ "$2" = fail ] || exit 0\n'
            f'mark={shlex.quote(str(marks))}/"$1"\n'
            '[ -e "$mark" ] && exit 0\n'
            ': > "$mark"\n'
            'echo "FAIL: test_logging ($1): the new logger needs LOG_FORMAT in CI"\n'
            'exit 1\n', encoding="utf-8")
        return {folder: f"bash {shlex.quote(str(script))} {folder}"
                        + (" fail" if folder in self.failing else "")
                for folder in self.folders}

    def github_repos(self, github: FakeGitHub, owner: str = "fleet") -> dict[str, str]:
        """`owner/<folder>` on the fake GitHub with a CI check failing once for the failing
        folders (its first head with a change); folder → owner/name."""
        repos = {}
        for folder in self.folders:
            name = f"{owner}/{folder}"
            rule = CheckRule("ci", predicate=_FailsOnce(folder in self.failing))
            github.create_repo(name, files=dict(FILES), check_rules=(rule,))
            repos[folder] = name
        return repos

    # -- the agent --------------------------------------------------------------------
    def agent(self, workflow: Workflow, *, seconds_per_folder: float = 0.0,
              log: Path | None = None) -> ScriptedAgent:
        scripts = {node.id: self._script(node) for node in workflow.nodes.values()
                   if node.type in (NodeType.AGENT, NodeType.PROMPT)}
        timing = _Timing(scripts, seconds_per_folder, log)
        return ScriptedAgent(scripts, on_turn=timing)

    def _script(self, node: Node) -> list[ScriptedTurn]:
        turns = []
        for number in range(1, TURNS + 1):
            files: dict[str, str | None] = {}
            if node.type is NodeType.AGENT:
                text = f"{node.id}, turn {number}\n"
                if node.foreach:
                    files = {CHANGED: text}
                else:  # one session over every folder: the first turn of a repair
                    edited = self.failing if number == 1 and "repair" in node.id \
                        else self.folders
                    files = {f"{folder}/{CHANGED}": text for folder in sorted(edited)}
            turns.append(ScriptedTurn(_reply(node, number), files=files))
        return turns


@dataclass
class _FailsOnce:
    """A fake GitHub CI predicate: fails the first head it sees with a change, if asked."""

    fails: bool
    failed: bool = False

    def __call__(self, tree: Tree) -> bool:
        if not self.fails or self.failed or tree.read(CHANGED) is None:
            return True
        self.failed = True
        return False


@dataclass
class _Timing:
    """ScriptedAgent's on_turn: sleep for the folders the turn edits, log the call."""

    scripts: Mapping[str, Sequence[ScriptedTurn]]
    seconds_per_folder: float
    log: Path | None

    def __call__(self, session: str, number: int, prompt: str) -> None:
        if self.log is not None:
            # one O_APPEND write per call: whole lines, even from concurrent folders
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{session}\n".encode())
            finally:
                os.close(fd)
        script = self.scripts.get(session.split("@", 1)[0], ())
        if number <= len(script):
            edited = {name.split("/", 1)[0] if "/" in name else "." for name in
                      script[number - 1].files}
            time.sleep(self.seconds_per_folder * len(edited))


def _reply(node: Node, number: int) -> str:
    updates: dict[str, Any] = {}
    for output in node.outputs:
        if output.kind is OutputKind.WORK:
            updates[output.name] = {"type": "leaf", "ticket": TICKET, "parent": None}
        elif output.kind is OutputKind.JSON:
            updates[output.name] = {}
        else:
            updates[output.name] = f"{node.id}: done (turn {number})."
    return f"{node.id}: done.\n\n" + json.dumps({"context_updates": updates})


def calls(log: Path) -> list[str]:
    """The sessions the agent was called in, one per call, in order (see `_Timing`)."""
    if not log.is_file():
        return []
    return [line for line in log.read_text(encoding="utf-8").splitlines() if line]
