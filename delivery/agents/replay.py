"""The replay backend (SPEC §5): scripted replies per node, for tests and dry runs.

The file is `{"<node_id>": ["reply 1", "reply 2", ...]}`. A node's replies are consumed in
order across its visits and correction turns: one cursor per node id, shared by every
session of that node. Running out is a clear stage failure (AgentError).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from delivery.agents.base import AgentError, SessionRequest, TurnSink
from delivery.errors import RunRefused

_SHAPE = 'an object mapping node ids to lists of reply strings, e.g. {"review": ["reply 1"]}'


_JSON_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
MAX_JSON_DEPTH = 200  # well below where the JSON decoder runs out of stack


def _too_deep(text: str) -> tuple[int, int]:
    """Line and column where `text` first nests arrays/objects MAX_JSON_DEPTH deep."""
    depth = 0
    for m in _JSON_NESTING.finditer(text):
        token = m.group()
        if token in ("[", "{"):
            depth += 1
            if depth >= MAX_JSON_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                return line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        elif token in ("]", "}"):
            depth -= 1
    return 1, 1


class ReplaySession:
    """One conversation with the replay backend; every `send` takes the node's next reply."""

    def __init__(self, backend: ReplayBackend, node_id: str, workspace: Path) -> None:
        self.backend = backend
        self.node_id = node_id
        self.workspace = workspace

    def send(self, message: str, sink: TurnSink | None = None) -> str:
        # in a shared (`full`) thread the stage speaking takes its own node's replies
        speaker = sink.node_id if sink is not None and sink.node_id else self.node_id
        return self.backend.next_reply(speaker, message)


class ReplayBackend:
    name = "replay"

    def __init__(self, replies: Mapping[str, Sequence[str]], *, source: str = "<replies>") -> None:
        self.source = source
        self._replies: dict[str, tuple[str, ...]] = {
            node: tuple(items) for node, items in replies.items()
        }
        self._cursors: dict[str, int] = {}
        self._moved: set[str] = set()  # cursors moved since the last state_changes()
        self._lock = threading.Lock()
        self.prompts: list[tuple[str, str]] = []

    @classmethod
    def from_file(cls, path: Path) -> ReplayBackend:
        fix = f"write {path} as {_SHAPE}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RunRefused("agent", f"replay file {path} does not exist", fix) from None
        except (OSError, UnicodeDecodeError) as err:
            raise RunRefused("agent", f"replay file {path} cannot be read: {err}", fix) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise RunRefused(
                "agent",
                f"replay file {path} is not JSON: {err.msg} at line {err.lineno} "
                f"column {err.colno}",
                fix,
            ) from None
        except RecursionError:
            line, column = _too_deep(text)
            raise RunRefused(
                "agent", f"replay file {path}: arrays or objects nest too deeply at line "
                f"{line} column {column}", fix) from None
        if not isinstance(data, dict):
            raise RunRefused(
                "agent", f"replay file {path} holds {type(data).__name__}, not an object", fix
            )
        for node, items in data.items():
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise RunRefused(
                    "agent",
                    f"replay file {path}: the replies for node '{node}' are not a list of "
                    "strings",
                    fix,
                )
        return cls(data, source=str(path))

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> ReplaySession:
        return ReplaySession(self, node_id, workspace)

    def next_reply(self, node_id: str, message: str) -> str:
        """Record the prompt and return the node's next scripted reply."""
        with self._lock:
            self.prompts.append((node_id, message))
            # a foreach stage's session for one folder (`implement@web`): its own replies
            # when the file has them, else the node's, with a cursor of its own
            replies = self._replies.get(node_id)
            if replies is None:
                replies = self._replies.get(node_id.split("@", 1)[0], ())
            cursor = self._cursors.get(node_id, 0)
            if cursor >= len(replies):
                known = node_id in self._replies or node_id.split("@", 1)[0] in self._replies
                where = "" if known else f"; {self.source} has no entry for it"
                raise AgentError(
                    f"replay: no reply left for node '{node_id}' (it had {len(replies)}) in "
                    f"{self.source}{where}; add replies to the list for '{node_id}'"
                )
            self._cursors[node_id] = cursor + 1
            self._moved.add(node_id)
            return replies[cursor]

    def save_state(self) -> dict[str, Any]:
        with self._lock:
            self._moved.clear()
            return {"cursors": dict(self._cursors)}

    def state_changes(self) -> dict[str, Any]:
        """A JSON merge patch from the state last saved or changed to now: the cursors that
        moved (the whole state grows with the number of nodes; a stage moves one)."""
        with self._lock:
            moved = {node: self._cursors[node] for node in self._moved}
            self._moved.clear()
        return {"cursors": moved} if moved else {}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        cursors = state.get("cursors")
        if not isinstance(cursors, Mapping) or not all(
            isinstance(node, str) and type(n) is int and n >= 0 for node, n in cursors.items()
        ):
            raise RunRefused(
                "agent",
                f"the saved replay state is malformed: {json.dumps(dict(state), default=str)}",
                'expected {"cursors": {"<node_id>": <count>, ...}}; start a new run',
            )
        with self._lock:
            self._cursors = dict(cursors)
            self._moved.clear()
