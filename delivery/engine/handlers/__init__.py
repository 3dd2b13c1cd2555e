"""Stage handlers, registered explicitly in one table (no import side effects)."""

from __future__ import annotations

from delivery.engine.handlers.agent import run_agent
from delivery.engine.handlers.base import Handler
from delivery.engine.handlers.control import run_conditional, run_noop, run_wait
from delivery.engine.handlers.folders import run_probe, run_worktree_add, run_worktree_remove
from delivery.engine.handlers.human import run_human
from delivery.engine.handlers.manager import run_manager_loop
from delivery.engine.handlers.merging import run_merge
from delivery.engine.handlers.publishing import run_publish
from delivery.engine.handlers.respond import run_respond
from delivery.engine.handlers.script import run_script
from delivery.lang.model import NodeType


def default_handlers() -> dict[NodeType, Handler]:
    """Handlers by node type. PARALLEL and FAN_IN are driven by the engine itself."""
    return {
        NodeType.START: run_noop,
        NodeType.EXIT: run_noop,
        NodeType.AGENT: run_agent,
        NodeType.PROMPT: run_agent,
        NodeType.SCRIPT: run_script,
        NodeType.HUMAN: run_human,
        NodeType.CONDITIONAL: run_conditional,
        NodeType.WAIT: run_wait,
        NodeType.PROBE: run_probe,
        NodeType.WORKTREE_ADD: run_worktree_add,
        NodeType.WORKTREE_REMOVE: run_worktree_remove,
        NodeType.PUBLISH: run_publish,
        NodeType.MERGE: run_merge,
        NodeType.MANAGER_LOOP: run_manager_loop,
        NodeType.RESPOND: run_respond,
    }
