"""Everything an agent stage needs beyond its node: which backend, which session, what
model, how much of the run to tell (fidelity), and where its token usage goes.

Fidelity of a stage (Attractor §5.4): the `fidelity` of the edge it was entered by, else
the node's, else the graph's `default_fidelity`, else `compact`. At `full` the stage
continues a session: the one of its thread key — the node's `thread_id`, else the entry
edge's, else the graph's `thread_id`, else the class derived from its subgraph's label —
or, with none of those, the session of the stage just before it. Sessions live in memory:
after a resume the first agent stage gets `summary:high` instead, once — unless its
backend can continue the thread's session (a command profile with `resume_command`).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from delivery.agents.base import AgentBackend, AgentSession, SessionRequest, Usage
from delivery.agents.registry import Agents
from delivery.engine.context import Context
from delivery.engine.preamble import (
    MAX_VALUES,
    SCAN_FACTOR,
    PreambleMemo,
    RecentStages,
    RunFacts,
    listed_nodes,
    render_preamble,
)
from delivery.lang.model import Edge, Node, Workflow
from delivery.lang.stylesheet import ModelSettings, derived_class, model_settings
from probes.local_git import git_environment

ENTRY_EDGE = "internal.entry_edge"  # index of the edge a stage was entered by (if it matters)
DEFAULT_FIDELITY = "compact"
GIT_TIMEOUT = 10.0
MAX_FILES = 100


def entry_edge(workflow: Workflow, context: Context) -> Edge | None:
    index = context.get(ENTRY_EDGE)
    if type(index) is int and 0 <= index < len(workflow.edges):
        return workflow.edges[index]
    return None


def edge_matters(edge: Edge) -> bool:
    """Whether the stage an edge enters must know it was entered by it."""
    return "fidelity" in edge.attrs or "thread_id" in edge.attrs


def resolve_fidelity(workflow: Workflow, node: Node, edge: Edge | None) -> str:
    return ((edge.attr("fidelity") if edge else "") or node.attr("fidelity")
            or workflow.attr("default_fidelity") or DEFAULT_FIDELITY)


def thread_key(workflow: Workflow, node: Node, edge: Edge | None) -> str:
    """The explicit thread of a `full` stage; empty: continue the previous stage's session."""
    key = node.attr("thread_id") or (edge.attr("thread_id") if edge else "") \
        or workflow.attr("thread_id")
    if key:
        return key
    if node.subgraph is not None:
        label = workflow.subgraphs.get(node.subgraph, {}).get("label")
        if label is not None and derived_class(label.text):
            return derived_class(label.text)
    return ""


@dataclass
class StagePlan:
    backend: AgentBackend
    profile: str
    fidelity: str
    thread: str  # explicit thread key; "" with `full`: the previous stage's session
    request: SessionRequest
    session: AgentSession | None  # an existing session this stage continues
    preamble: str


@dataclass
class AgentRuntime:
    """Per run: backends, live sessions, fidelity, usage. Shared by parallel branches."""

    workflow: Workflow
    agents: Agents
    workspace: Path
    folders: Mapping[str, Path]
    run_id: str
    path: Callable[[], list[str]]
    outcomes: Callable[[], Mapping[str, str]]
    redact: Callable[[str], str] = lambda text: text
    # True once after a resume: the next agent stage gets summary:high instead of full
    take_resumed: Callable[[], bool] = lambda: False
    threads: dict[tuple[str, str], AgentSession] = field(default_factory=dict)
    last: tuple[str, str, AgentSession] | None = None  # (node, profile, session)
    usage_by_node: dict[str, str] = field(default_factory=dict)  # for summary:high
    # the preamble's summaries of listed stages (RunFacts.memo): one entry per node and
    # fidelity, bounded by the workflow
    preamble_memo: PreambleMemo = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _markers: list[tuple[str, Path, str]] | None = None
    _recent: RecentStages | None = None  # the preamble's completed stages, kept up to date
    # each agent node's model settings: the workflow's alone, resolved once a run
    _settings: dict[str, ModelSettings] = field(default_factory=dict)
    # a foreach stage's view for one folder (for_folder): its sessions, its worktree
    folder: str = ""
    # each folder's last (node, profile, session): the previous stage's session, per folder
    folder_lasts: dict[str, tuple[str, str, AgentSession]] = field(default_factory=dict)

    def for_folder(self, folder: str, path: Path) -> AgentRuntime:
        """The runtime of one folder's run of a foreach stage (SPEC §8.1): sessions kept
        per folder (a `thread_id` is the folder's own thread), the worktree as the agent's
        workspace, the preamble's changed files of that worktree alone. The sessions, memo,
        usage and lock are the run's (shared)."""
        return dataclasses.replace(self, workspace=path, folders={}, folder=folder,
                                   _markers=None)

    def session_key(self, node: Node) -> str:
        """What the node's session is called: `implement@web` for a folder's run."""
        return f"{node.id}@{self.folder}" if self.folder else node.id

    def plan(self, node: Node, context: Context) -> StagePlan:
        edge = entry_edge(self.workflow, context)
        fidelity = resolve_fidelity(self.workflow, node, edge)
        profile = node.attr("agent")
        backend = self.agents.for_profile(profile)
        settings = self._settings.get(node.id)
        if settings is None:
            settings = self._settings[node.id] = model_settings(self.workflow, node)
        thread = thread_key(self.workflow, node, edge) if fidelity == "full" else ""
        if thread and self.folder:
            thread = f"{thread}@{self.folder}"
        request = SessionRequest(self.session_key(node), self.workspace, thread=thread or None,
                                 model=settings.model, provider=settings.provider,
                                 reasoning_effort=settings.reasoning_effort, timeout=node.timeout)
        session: AgentSession | None = None
        with self._lock:
            resumed = self.take_resumed()  # consumed by the first agent stage after a resume
            if resumed and fidelity == "full":
                session = self._restored_session(backend, profile, thread, request)
                if session is None:
                    fidelity = "summary:high"  # the session was lost with the process
            elif fidelity == "full":
                session = self._live_session(profile, thread, str(context.get("last_stage")
                                                                  or ""))
        preamble = "" if fidelity == "full" else render_preamble(fidelity,
                                                                 self.facts(context, fidelity))
        return StagePlan(backend, profile, fidelity, thread, request, session, preamble)

    def _restored_session(self, backend: AgentBackend, profile: str, thread: str,
                          request: SessionRequest) -> AgentSession | None:
        """A thread's session from before the resume, when the backend can continue it."""
        resume = getattr(backend, "resume_thread", None)
        if not thread or resume is None:
            return None
        session: AgentSession | None = resume(thread, request)
        if session is not None:
            self.threads[(profile, thread)] = session
        return session

    def _live_session(self, profile: str, thread: str, previous: str) -> AgentSession | None:
        if thread:
            return self.threads.get((profile, thread))
        last = self.folder_lasts.get(self.folder) if self.folder else self.last
        if last is not None and last[0] == previous and last[1] == profile:
            return last[2]
        return None

    def finished(self, node: Node, plan: StagePlan, session: AgentSession) -> None:
        """Keep the stage's session for the stages that may continue it."""
        with self._lock:
            if plan.thread:
                self.threads[(plan.profile, plan.thread)] = session
            if self.folder:
                self.folder_lasts[self.folder] = (node.id, plan.profile, session)
            else:
                self.last = (node.id, plan.profile, session)

    def record_usage(self, node: Node, plan: StagePlan, usage: Usage) -> None:
        model = plan.request.model or plan.profile or self.agents.default_name \
            or plan.backend.name
        with self._lock:
            self.usage_by_node[node.id] = (f"{model}, {usage.input_tokens} tokens in / "
                                           f"{usage.output_tokens} out")

    # -- preamble facts ---------------------------------------------------------------
    def facts(self, context: Context, fidelity: str) -> RunFacts:
        if self._recent is None:
            self._recent = RecentStages(listed_nodes(self.workflow))  # once a run
        stages = self._recent(self.path(), self.outcomes())
        files = self.changed_files() if fidelity in ("compact", "summary:high") else []
        return RunFacts(goal=str(context.get("goal") or ""), run_id=self.run_id,
                        stages=stages, context=context.stored(), files=files,
                        usage=dict(self.usage_by_node), memo=self.preamble_memo,
                        shown_keys=lambda: _with_inputs(context, context.newest_shown_keys(
                            MAX_VALUES, MAX_VALUES * SCAN_FACTOR)))

    def _git_markers(self) -> list[tuple[str, Path, str]]:
        """(folder name, folder, its `.git` as a string) of the workspace ("") and each
        folder, built once a run: joining Paths before every agent stage cost more than
        the checks."""
        if self._markers is None:
            self._markers = [(name, folder, os.path.join(folder, ".git")) for name, folder in
                             [("", self.workspace), *sorted(self.folders.items())]]
        return self._markers

    def changed_files(self) -> list[str]:
        """Uncommitted changes (`git status`) in the workspace and each folder that is a
        git repository; nothing when none is."""
        places: dict[str, Path] = {}
        for name, folder, marker in self._git_markers():
            if os.path.exists(marker):  # asked every stage: a stage may make a repository
                places[name] = folder
        files: list[str] = []
        for name, where in places.items():
            for line in _git_status(where):
                files.append(f"{name}: {line}" if name else line)
                if len(files) >= MAX_FILES:
                    return [*files, "… (more)"]
        return files


def _with_inputs(context: Context, newest: list[str]) -> list[str]:
    """The preamble's keys: the newest ones and, whatever came after them, the run's inputs
    (the ticket): in a run over 200 folders the folders' own keys are the newest 40."""
    inputs = [name for name in context.child_names("inputs")
              if name not in newest and name in context]
    return sorted([*newest, *inputs]) if inputs else newest


def _git_status(where: Path) -> list[str]:
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                              cwd=where, env=git_environment(where), capture_output=True,
                              text=True,
                              timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    lines = []
    for line in done.stdout.splitlines():
        if len(line) > 3 and not line[3:].startswith(".delivery/"):
            lines.append(f"{line[3:]} ({line[:2].strip() or 'changed'})")
    return lines
