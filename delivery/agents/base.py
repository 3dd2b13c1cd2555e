"""The agent backend interface (SPEC §5): what the engine needs from any backend.

A backend opens sessions; a session is a conversation: correction turns call `send` again
on the same session, and with `full` fidelity the engine keeps one session per thread key
and hands it to every stage of that thread. `SessionRequest` says what a session is for
(node, thread, workspace, model settings, timeout); `TurnSink` is where a turn leaves its
traces (stage files such as stdout/stderr, token usage) — the engine redacts everything
written through it. The backend's state (for replay: how far each node's script has been
consumed) is saved in the checkpoint after each stage and restored on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from delivery.errors import AgentError as AgentError


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one or more turns cost, as the backend reported them, and the money when
    the backend reports it (Claude Code's `total_cost_usd`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cost_usd + other.cost_usd)

    def __sub__(self, other: Usage) -> Usage:
        """The increase from `other` (an earlier running total) to this one; never below
        zero (a CLI that restarted its count is counted from zero)."""
        return Usage(max(0, self.input_tokens - other.input_tokens),
                     max(0, self.output_tokens - other.output_tokens),
                     max(0.0, round(self.cost_usd - other.cost_usd, 9)))

    def to_json(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "total_tokens": self.total_tokens}


def _ignore_file(name: str, text: str) -> None:
    pass


def _ignore_usage(usage: Usage) -> None:
    pass


@dataclass(frozen=True)
class TurnSink:
    """The stage a turn belongs to, and where its traces go. `file(name, text)` writes a
    file into the stage's folder (redacted by the engine); `usage(u)` adds to the stage's
    token count. A `full` thread's session serves several stages: `node_id` is the stage
    speaking and `request` its settings (model, timeout), which the session adopts."""

    node_id: str = ""
    file: Callable[[str, str], None] = _ignore_file
    usage: Callable[[Usage], None] = _ignore_usage
    request: SessionRequest | None = None


@dataclass(frozen=True)
class SessionRequest:
    """What a new session is for."""

    node_id: str
    workspace: Path
    thread: str | None = None  # full fidelity: the key every stage of the thread shares
    model: str = ""  # empty: the profile's own model
    provider: str = ""
    reasoning_effort: str = ""
    timeout: float | None = None  # seconds for one turn (the node's `timeout=`)


class AgentSession(Protocol):
    def send(self, message: str, sink: TurnSink | None = None) -> str:
        """Send one turn and return the agent's reply."""
        ...


class AgentBackend(Protocol):
    name: str

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> AgentSession:
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
