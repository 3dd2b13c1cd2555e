"""The agent backend interface (SPEC §5): what the engine needs from any backend.

A backend opens one session per stage visit (or per thread, with `full` fidelity); a
session is a conversation: correction turns call `send` again on the same session. The
backend's state (for replay: how far each node's script has been consumed) is saved in
the checkpoint after each stage and restored on resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from delivery.errors import AgentError as AgentError


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


@runtime_checkable
class IncrementalState(Protocol):
    """A backend whose saved state grows with the run may also say what changed: the run
    store then saves that after each stage instead of the whole state."""

    def state_changes(self) -> dict[str, Any]:
        """A JSON merge patch (RFC 7396) from the state last returned by `save_state` or
        `state_changes` to the current one ({} when nothing changed)."""
        ...
