"""Shared pieces for the review-thread deliveries (the bundled deliver.dot on the fake GitHub
and on the local forge): a scripted agent whose repairs answer the threads a person opened,
and that person, who opens a thread once the PRs are up, then — between two probes —
resolves it and opens another ("this breaks the API"), which a count would not notice."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.cli.demo_files import API_FIXED, API_TEST, TICKET, WEB_ESCAPED, WEB_TEST_ESCAPED
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.lang.model import Node

FIRST_THREAD = "Please call it greeting(), not page()."
SECOND_THREAD = "This breaks the API, do not merge yet."
FIRST_REPLY = "Renamed it; the old name stays as an alias."
SECOND_REPLY = "The public signature is back as it was."


def _json(updates: Mapping[str, Any]) -> str:
    return json.dumps({"context_updates": dict(updates)})


class AnsweringAgent(ScriptedAgent):
    """The demo's agent with correct code from the start; its n-th repair answers the
    threads `answers(n)` gives (their ids are only known once the person opened them)."""

    def __init__(self, answers: Callable[[int], dict[str, dict[str, Any]]]) -> None:
        scope = {"type": "leaf", "ticket": TICKET, "parent": None}
        super().__init__({
            "scope": [ScriptedTurn(_json({"scope": scope}))],
            "plan": [ScriptedTurn(_json({"plan": "api and web; api first"}))],
            "implement": [ScriptedTurn(_json({"summary": "greetings in api and web"}), files={
                "api/greeting.py": API_FIXED, "api/test_greeting.py": API_TEST,
                "web/page.py": WEB_ESCAPED, "web/test_page.py": WEB_TEST_ESCAPED})],
            "repair": [ScriptedTurn("", files={"web/NOTES.md": f"repair {n}\n"})
                       for n in (1, 2)],
        })
        self.answers = answers

    def next_turn(self, node_id: str, prompt: str) -> ScriptedTurn:
        turn = super().next_turn(node_id, prompt)
        if node_id != "repair":
            return turn
        number = self.turns_used(node_id)
        reply = _json({"summary": f"repair {number}", "answers": self.answers(number)})
        return ScriptedTurn(reply, turn.files)

    def repair_prompts(self) -> list[str]:
        return [prompt for node, prompt in self.prompts if node == "repair"]


@dataclass
class ThreadPerson(Progress):
    """A reviewer on the `web` PR, acting between stages through the forge's own API:
    `open_thread(text) -> id`, `resolve(id)`, `unresolved() -> ids`. `key(id)` is how the
    repair keys its answer to that thread."""

    open_thread: Callable[[str], str]
    resolve: Callable[[str], None]
    unresolved: Callable[[], Sequence[str]]
    key: Callable[[str], str]
    threads: list[str] = field(default_factory=list)
    unresolved_at_merge: list[list[str]] = field(default_factory=list)

    def stage_started(self, node: Node, attempt: int) -> None:
        if node.id == "land":
            self.unresolved_at_merge.append(list(self.unresolved()))

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.id == "publish" and not self.threads:
            self.threads.append(self.open_thread(FIRST_THREAD))
        elif node.id == "answer" and len(self.threads) == 1:
            # between two probes: the first thread resolved, a second one opened
            self.resolve(self.threads[0])
            self.threads.append(self.open_thread(SECOND_THREAD))

    def answers(self, repair: int) -> dict[str, dict[str, Any]]:
        if repair == 1:  # answered, left for the reviewer to resolve
            return {self.key(self.threads[0]): {"reply": FIRST_REPLY, "resolve": False}}
        return {self.key(self.threads[1]): {"reply": SECOND_REPLY, "resolve": True}}
