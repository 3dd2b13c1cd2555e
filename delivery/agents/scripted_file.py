"""`--agent scripted:FILE`: the scripted editing agent's turns read from a TOML or JSON file,
so a person can try a workflow on their own repositories offline without writing Python.

    # one array of turns per agent node; `node@folder` gives one folder's session its own
    [[scope]]
    context_updates = { scope = { type = "goal", goal = "Set VALUE to 2" } }

    [[implement]]                      # each turn: the files it writes, then its reply
    files = { "lib.py" = "VALUE = 2\\n" }
    delete = ["old.py"]
    reply = "Done."                    # optional text before the context_updates object
    context_updates = { summary = "VALUE is 2" }

Paths are relative to the session's workspace (a folder's worktree for a `foreach` stage,
the run's workspace otherwise). Each key's turns are played in order, one per message (a
correction turn takes the next one); a `foreach` stage's folders each start at the first
turn of the node's script unless `node@folder` scripts that folder.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.errors import RunRefused

FORMAT = ("a TOML or JSON file of node id (or node@folder) → a list of turns, each with "
          "files (path → text), delete (paths), reply and context_updates; see "
          "docs/agents.md \"An offline agent\"")


class _Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    files: dict[str, str] = {}
    delete: list[str] = []
    reply: str = ""
    context_updates: dict[str, Any] | None = None

    def played(self) -> ScriptedTurn:
        reply = self.reply
        if self.context_updates is not None:
            # the same shape a model's reply has: prose, then the JSON object (SPEC §5)
            updates = json.dumps({"context_updates": self.context_updates})
            reply = f"{reply}\n\n{updates}" if reply else updates
        files: dict[str, str | None] = {**self.files, **dict.fromkeys(self.delete)}
        return ScriptedTurn(reply=reply or "Done.", files=files)


def load_scripted_agent(spec: str, path: Path) -> ScriptedAgent:
    """The agent `path` scripts; RunRefused (naming `spec`) when it cannot be read."""
    subject = f"agent profile '{spec}'"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise RunRefused(subject, f"cannot read {path}: {err.strerror or err}",
                         f"give the path of {FORMAT}") from None
    try:
        data: object = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as err:
        kind = "JSON" if path.suffix == ".json" else "TOML (name it .json for JSON)"
        raise RunRefused(subject, f"{path} is not valid {kind}: {err}",
                         f"write {FORMAT}") from None
    if not isinstance(data, dict) or not data:
        raise RunRefused(subject, f"{path} scripts no node", f"write {FORMAT}")
    turns: dict[str, list[ScriptedTurn]] = {}
    for key, script in data.items():
        listed = [script] if isinstance(script, dict) else script  # one turn may stand alone
        if not isinstance(listed, list):
            raise RunRefused(subject, f"{path}: '{key}' is a {type(script).__name__}, not a "
                             "list of turns", f"write {FORMAT}")
        turns[key] = [_played(subject, path, key, number, turn)
                      for number, turn in enumerate(listed, start=1)]
    return ScriptedAgent(turns)


def _played(subject: str, path: Path, key: str, number: int, turn: object) -> ScriptedTurn:
    try:
        return _Turn.model_validate(turn).played()
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the turn"
        raise RunRefused(subject, f"{path}: turn {number} of '{key}': {where}: {first['msg']}",
                         f"write {FORMAT}") from None


def check_scripted_nodes(agent: ScriptedAgent, spec: str, nodes: Iterable[str]) -> None:
    """Refuse a script whose key names no agent node of the workflow: a misspelt node id
    would otherwise be found only when that stage runs out of turns."""
    known = sorted(set(nodes))
    for key in agent.scripted_nodes():
        node = key.split("@", 1)[0]
        if node in known:
            continue
        near = difflib.get_close_matches(node, known, n=1)
        hint = f"did you mean '{near[0]}'? " if near else ""
        raise RunRefused(f"agent profile '{spec}'",
                         f"scripts node '{node}', which is no agent stage of this workflow",
                         f"{hint}the agent stages are: {', '.join(known) or 'none'}")
