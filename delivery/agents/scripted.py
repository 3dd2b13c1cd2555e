"""A scripted editing agent: per node, a list of turns, each writing files and replying.

Like the replay backend it is deterministic, but it also *changes the workspace* the way a
coding agent would, so a run can go all the way through commits, PRs, checks, reviews
and merges without a model (`delivery demo`, end-to-end tests):

    ScriptedAgent({
        "implement": [ScriptedTurn(files={"api/app.py": "..."},
                                   reply='Done. {"context_updates": {"summary": "..."}}')],
        "repair": [ScriptedTurn(files={"api/app.py": "...fixed..."}, reply="...")],
    })

Each `send` to a session of a node takes that node's next turn (one cursor per node, across
visits and correction turns), writes its files relative to the session's workspace (None
deletes a file) and returns its reply. Running out of turns, or a path that would leave the
workspace, is an AgentError (a clear stage failure). The cursors are the saved state, so a
resumed run goes on with the next turn. Also exported as `delivery.testing.ScriptedAgent`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery.agents.base import AgentError, SessionRequest, TurnSink, Usage


@dataclass(frozen=True)
class ScriptedTurn:
    """One turn: the files to write (path relative to the workspace → text, or None to
    delete) and the reply to give."""

    reply: str
    files: Mapping[str, str | None] = field(default_factory=dict)
    # what the turn cost, reported as a real backend reports its counts (budget tests)
    usage: Usage | None = None


class ScriptedSession:
    def __init__(self, agent: ScriptedAgent, node_id: str, workspace: Path) -> None:
        self.agent = agent
        self.node_id = node_id
        self.workspace = workspace

    def send(self, message: str, sink: TurnSink | None = None) -> str:
        # a `full` thread's session serves several stages: the sink names the one speaking
        node_id = sink.node_id if sink is not None and sink.node_id else self.node_id
        turn = self.agent.next_turn(node_id, message)
        for name, text in turn.files.items():
            target = _inside(self.workspace, name, node_id)
            if text is None:
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if turn.usage is not None and sink is not None:
            sink.usage(turn.usage)
        return turn.reply


def _inside(workspace: Path, name: str, node_id: str) -> Path:
    root = workspace.resolve()
    target = (root / name).resolve()
    if target != root and root not in target.parents:
        raise AgentError(f"scripted agent: a turn of '{node_id}' writes {name!r}, outside the "
                         f"workspace {root}; script paths relative to the workspace")
    return target


class ScriptedAgent:
    """An AgentBackend that plays scripted turns and edits files (see the module docstring).

    `on_turn(node_id, turn_number, prompt)` is called before each turn is played (turn
    numbers count from 1 per node): a test or a demo can watch what the agent was asked."""

    name = "scripted"

    def __init__(self, turns: Mapping[str, Sequence[ScriptedTurn]], *,
                 on_turn: Callable[[str, int, str], None] | None = None) -> None:
        self._turns = {node: tuple(script) for node, script in turns.items()}
        self._used: dict[str, int] = {}
        self._lock = threading.Lock()  # parallel branches may share the backend
        self.on_turn = on_turn
        self.prompts: list[tuple[str, str]] = []  # (node, prompt) in the order they came

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> ScriptedSession:
        return ScriptedSession(self, node_id, workspace)

    def next_turn(self, node_id: str, prompt: str) -> ScriptedTurn:
        with self._lock:
            # a foreach stage's session for one folder (`implement@web`) plays its own
            # script when it has one, else the node's — with a cursor of its own
            script = self._turns.get(node_id)
            if script is None:
                script = self._turns.get(node_id.split("@", 1)[0], ())
            used = self._used.get(node_id, 0)
            if used >= len(script):
                raise AgentError(f"scripted agent: no turn {used + 1} for node '{node_id}' "
                                 f"(it has {len(script)}); add turns to its script")
            self._used[node_id] = used + 1
            self.prompts.append((node_id, prompt))
        if self.on_turn is not None:
            self.on_turn(node_id, used + 1, prompt)
        return script[used]

    def scripted_nodes(self) -> list[str]:
        """The keys the script has turns for (node ids, or `node@folder`)."""
        return list(self._turns)

    def turns_used(self, node_id: str) -> int:
        return self._used.get(node_id, 0)

    def save_state(self) -> dict[str, Any]:
        with self._lock:
            return {"used": dict(self._used)}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        used = state.get("used")
        if isinstance(used, Mapping):
            with self._lock:
                self._used = {str(node): int(count) for node, count in used.items()
                              if isinstance(count, int)}
