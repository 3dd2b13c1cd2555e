"""Answers for human gates: the console on a terminal, scripted answers, or auto-deny."""

from __future__ import annotations

import sys
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO, cast

from delivery.engine.routing import accelerator, normalize_label
from delivery.errors import PauseRequested as PauseRequested
from delivery.printable import PrintableStream


@dataclass(frozen=True)
class Answer:
    label: str  # the chosen edge label, exactly as written on the edge
    text: str = ""
    by: str = "script"  # who answered: script (--answer), person (console), agent (managed)


class Interviewer(Protocol):
    def ask(self, node_id: str, question: str, choices: Sequence[str]) -> Answer | None:
        """The chosen choice, or None when nobody answers (the gate is denied)."""
        ...


def match_choice(answer: str, choices: Sequence[str]) -> str | None:
    """The choice an answer names: by accelerator key, full label or normalised label."""
    wanted = answer.strip()
    for choice in choices:
        if wanted == choice or normalize_label(wanted) == normalize_label(choice):
            return choice
    for choice in choices:
        if wanted.upper() == accelerator(choice).upper():
            return choice
    return None


class ScriptedInterviewer:
    """Answers from `--answer NODE=LABEL`: each answers one visit of that gate, in the order
    given. A gate whose answers are used up is unanswered (denied, or the run pauses), so a
    loop through a gate never repeats an answer forever.

    `used` counts the answers taken per gate; the engine keeps it in the checkpoint so that
    a resumed run does not hand out the same answer twice.
    """

    def __init__(self, answers: Mapping[str, str | Sequence[str]],
                 used: MutableMapping[str, int] | None = None) -> None:
        self.answers = {node: [given] if isinstance(given, str) else list(given)
                        for node, given in answers.items()}
        self.used = used if used is not None else {}

    def ask(self, node_id: str, question: str, choices: Sequence[str]) -> Answer | None:
        given = self.answers.get(node_id, [])
        index = self.used.get(node_id, 0)
        if index >= len(given):
            return None
        self.used[node_id] = index + 1
        chosen = match_choice(given[index], choices)
        return Answer(chosen) if chosen is not None else None


class PausingInterviewer:
    """Scripted answers first; a gate without one pauses the run instead of being denied."""

    def __init__(self, scripted: ScriptedInterviewer) -> None:
        self.scripted = scripted

    def ask(self, node_id: str, question: str, choices: Sequence[str]) -> Answer | None:
        answer = self.scripted.ask(node_id, question, choices)
        if answer is None:
            raise PauseRequested(node_id, choices)
        return answer


class ConsoleInterviewer:
    """Asks on a terminal; falls back to scripted answers first."""

    def __init__(self, scripted: ScriptedInterviewer, stdin: TextIO | None = None,
                 stderr: TextIO | None = None) -> None:
        self.scripted = scripted
        self.stdin = stdin or sys.stdin
        # the question may quote a run's text: shown, never obeyed by the terminal
        self.stderr = cast(TextIO, PrintableStream(stderr or sys.stderr))

    def ask(self, node_id: str, question: str, choices: Sequence[str]) -> Answer | None:
        scripted = self.scripted.ask(node_id, question, choices)
        if scripted is not None:
            return scripted
        print(f"\n{question}", file=self.stderr)
        for choice in choices:
            print(f"  {choice}", file=self.stderr)
        for _ in range(3):
            print("> ", end="", file=self.stderr, flush=True)
            line = self.stdin.readline()
            if not line:
                return None
            chosen = match_choice(line, choices)
            if chosen is not None:
                return Answer(chosen, by="person")
            print(f"not a choice: {line.strip()!r}", file=self.stderr)
        return None
