"""Agent profiles (SPEC §5): `replay:<file.json>`, `command:<cmd>`, `openai:<model>`."""

from __future__ import annotations

from pathlib import Path

from delivery.agents.base import AgentBackend
from delivery.agents.replay import ReplayBackend
from delivery.errors import RunRefused

ACCEPTED_FORMS = "replay:<file.json>, command:<cmd> or openai:<model>"
_LATER = ("command", "openai")


def make_backend(profile: str, *, base_dir: Path) -> AgentBackend:
    """The backend a profile names; a replay file is resolved against `base_dir`."""
    kind, sep, arg = profile.partition(":")
    kind, arg = kind.strip(), arg.strip()
    if sep and kind == "replay":
        if not arg:
            raise RunRefused("agent", f"profile '{profile}' names no replay file",
                             "write replay:<file.json>")
        return ReplayBackend.from_file(base_dir / arg)
    if sep and kind in _LATER:
        raise RunRefused(
            "agent", f"backend '{kind}' is not available yet",
            f"it comes in a later issue; use replay:<file.json> for now (profile '{profile}')",
        )
    raise RunRefused("agent", f"unknown agent profile '{profile}'", f"use {ACCEPTED_FORMS}")
