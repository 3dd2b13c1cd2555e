"""The agent backend interface (SPEC §5): what the engine needs from any backend.

A backend opens one session per stage visit (or per thread, with `full` fidelity); a
session is a conversation: correction turns call `send` again on the same session. The
backend's state (for replay: how far each node's script has been consumed) is saved in
the checkpoint after each stage and restored on resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from delivery.errors import RunError


class AgentError(RunError):
    """A backend failed to produce a reply; the message names the node and says why."""


class AgentSession(Protocol):
    def send(self, message: str) -> str:
        """Send one turn and return the agent's reply."""
        ...


class AgentBackend(Protocol):
    name: str

    def open_session(self, node_id: str, *, workspace: Path) -> AgentSession:
        """A new conversation for a stage of `node_id`, working in `workspace`."""
        ...

    def save_state(self) -> dict[str, Any]:
        """JSON-serializable state, stored in the checkpoint after each stage."""
        ...

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Put back what `save_state` returned (on resume)."""
        ...
