"""`delivery run --dry-run` (SPEC §12): the run goes up to the first stage that writes to a
forge and pauses before it (status `paused`, reason `dry_run`), having computed per folder
what a publish would push; `delivery resume` then goes on without the dry run.

A stage writes to the forge when it is a publish, merge or respond; a script given the
forge's token (`forge_token=true`), which may do anything with it; a probe of the PRs where
the change set's status and comments are kept (it writes them when the run's PRs exist); a
manager loop (its child runs are not looked into); a parallel section holding any of these.
Checked by the engine as it enters a stage of the main path, beside the stop switch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from delivery.engine.handlers.base import StageEnv
from delivery.engine.handlers.change_set import change_set_enabled
from delivery.engine.handlers.folders import base_branch
from delivery.errors import DeliveryError, PauseReason, PauseRequested
from delivery.git.preview import Preview, preview
from delivery.lang.declarations import PROBE_KINDS
from delivery.lang.model import Node, NodeType
from delivery.lang.topology import ParallelSection, parallel_sections
from probes.worktree import worktree_state

ALWAYS_WRITE: Final = frozenset({NodeType.PUBLISH, NodeType.MERGE, NodeType.RESPOND,
                                 NodeType.MANAGER_LOOP})
_TRUE = ("true", "1", "yes", "on")


class DryRunPause(PauseRequested):
    """The run reached its first stage that writes to a forge: it pauses before it."""

    reason = PauseReason.DRY_RUN

    def __init__(self, node_id: str, previews: Mapping[str, Preview],
                 problems: Mapping[str, str]) -> None:
        changes = "; ".join([f"{folder}: {shown.summary()}"
                             for folder, shown in previews.items()]
                            + [f"{folder}: no diff ({problem})"
                               for folder, problem in problems.items()]) or "no folder"
        super().__init__(node_id, message=(
            f"dry run: paused before '{node_id}', the first stage that writes to the "
            f"forge ({changes}); resume the run to go on and publish"),
            event_fields={"changes": changes})


class DryRun:
    """Asked by the engine before each stage of the main path; `previews` holds what was
    shown once it paused, `problems` the folders whose changes could not be read."""

    def __init__(self, env: StageEnv) -> None:
        self.env = env
        self.sections: dict[str, ParallelSection] = parallel_sections(env.workflow)
        self.previews: dict[str, Preview] = {}
        self.problems: dict[str, str] = {}

    def check(self, node: Node) -> None:
        if not self.writes(node):
            return
        self.previews, self.problems = self._previews()
        raise DryRunPause(node.id, self.previews, self.problems)

    def writes(self, node: Node, seen: frozenset[str] = frozenset()) -> bool:
        """Whether running `node` may write to the forge (see the module docstring)."""
        if node.type in ALWAYS_WRITE:
            return True
        if node.type is NodeType.SCRIPT:
            return node.attr("forge_token").strip().lower() in _TRUE
        if node.type is NodeType.PROBE:
            kinds = node.probe_kinds or PROBE_KINDS
            return ("pr" in kinds or "threads" in kinds) and bool(self.env.branch) \
                and change_set_enabled(self.env)
        section = self.sections.get(node.id)
        if node.type is NodeType.PARALLEL and section is not None:
            nodes = self.env.workflow.nodes
            return any(self.writes(nodes[inner], seen | {node.id})
                       for branch in section.branches for inner in branch.nodes
                       if inner not in seen and inner != node.id)
        return False

    def _previews(self) -> tuple[dict[str, Preview], dict[str, str]]:
        previews: dict[str, Preview] = {}
        problems: dict[str, str] = {}
        for folder, path in self.env.folders.items():
            if not worktree_state(Path(path)).exists:
                continue  # no worktree yet: nothing of this folder would be published
            try:
                previews[folder] = preview(Path(path), self.env.branch,
                                           base_branch(self.env, folder))
            except DeliveryError as problem:
                problems[folder] = str(problem)
        return previews, problems
