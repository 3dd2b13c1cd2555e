"""The demo's scripted agent as a command (`python -m delivery.testing.actions.agent`), for
Actions jobs: each job is a fresh process on a fresh runner, so the agent cannot keep
cursors in memory the way `ScriptedAgent` does. It reads the prompt on stdin, tells the
stage by the bundled deliver.dot's prompt text, and writes the demo's files into the
workspace (its working directory):

    scope, plan   the demo's context updates
    implement     api with the demo's bug (its CI fails once), web without escaping
    repair        the first of the demo's repairs whose files are not in place yet: api's
                  fix, then web's escaping (what the reviewer asks for)

What it does depends only on the prompt and the files, so a stage run again after a killed
job does the same thing again. In a delivery.toml:

    [profiles.claude]
    backend = "command"
    command = "/path/to/python -m delivery.testing.actions.agent"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from delivery.cli.demo_files import (
    API_BUGGY,
    API_FIXED,
    API_TEST,
    TICKET,
    WEB_ESCAPED,
    WEB_FIRST,
    WEB_TEST,
    WEB_TEST_ESCAPED,
)

# the stage a prompt belongs to, by a sentence of its prompt in workflows/deliver.dot
STAGES = {
    "scope": "decide what work it asks for",
    "plan": "Say what changes in which folder",
    "implement": "Change the code in every folder",
    "fix": "The local checks failed",
    "repair": "The pull requests are blocked",
}
REPAIRS = (
    ("api: hello() now puts a comma and an exclamation mark.",
     {"api/greeting.py": API_FIXED}),
    ("web: the name is escaped with html.escape, with a test.",
     {"web/page.py": WEB_ESCAPED, "web/test_page.py": WEB_TEST_ESCAPED}),
)


def stage_of(prompt: str) -> str:
    """The stage whose sentence comes last (a continued turn carries earlier prompts)."""
    found = {stage: prompt.rfind(text) for stage, text in STAGES.items()}
    stage, at = max(found.items(), key=lambda item: item[1])
    return stage if at >= 0 else ""


def _summary(text: str, **updates: object) -> str:
    return f"{text}\n\n" + json.dumps({"context_updates": {"summary": text, **updates}})


def _write(workspace: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _in_place(workspace: Path, files: dict[str, str]) -> bool:
    return all((workspace / name).is_file()
               and (workspace / name).read_text(encoding="utf-8") == text
               for name, text in files.items())


def turn(prompt: str, workspace: Path) -> str:
    """Play the turn for `prompt` in `workspace`; the reply."""
    stage = stage_of(prompt)
    if stage == "scope":
        scope = {"type": "leaf", "ticket": TICKET, "parent": None}
        return json.dumps({"context_updates": {"scope": scope}})
    if stage == "plan":
        return json.dumps({"context_updates": {
            "plan": "api: add hello(name); web: add greeting(name). Merge api first."}})
    if stage == "implement":
        _write(workspace, {"api/greeting.py": API_BUGGY, "api/test_greeting.py": API_TEST,
                           "web/page.py": WEB_FIRST, "web/test_page.py": WEB_TEST})
        return _summary("Added hello(name) to api and greeting(name) to web, with tests.")
    if stage in ("repair", "fix"):
        # the repair also answers review threads (`answers`); the demo's reviewer writes a
        # review, not threads, so there is none to answer
        extra: dict[str, object] = {"answers": {}} if stage == "repair" else {}
        for text, files in REPAIRS:
            if not _in_place(workspace, files):
                _write(workspace, files)
                return _summary(text, **extra)
        return _summary("Nothing left to repair: both changes are in place.", **extra)
    return _summary("This scripted agent knows only the stages of deliver.dot.")


def main() -> int:
    print(turn(sys.stdin.read(), Path.cwd()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
