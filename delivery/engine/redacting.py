"""The agent as the engine sees it: every message sent is redacted, every reply cleaned.

The run wraps whatever backend it was given (SPEC §14): the bytes a backend sends are
the redacted prompt, whatever the backend does itself, and a reply reaches the context,
`response.md` and the checkpoint only with its secrets masked and with NUL characters
and lone surrogates (which no UTF-8 file can hold) replaced by U+FFFD.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from delivery.agents.base import AgentBackend, AgentSession, SessionRequest, TurnSink
from delivery.redact import Redactor


class RedactingSession:
    def __init__(self, session: AgentSession, redactor: Redactor) -> None:
        self._session = session
        self._redactor = redactor

    def send(self, message: str, sink: TurnSink | None = None) -> str:
        reply = self._session.send(self._redactor.clean_text(message), sink)
        if not isinstance(reply, str):
            return reply  # the handler reports a backend that returns no text
        # remembered as clean and masked: the context stores it without another scan
        return self._redactor.clean_text(reply)


class RedactingAgent:
    """An AgentBackend that redacts what goes to and comes from `backend`."""

    def __init__(self, backend: AgentBackend, redactor: Redactor) -> None:
        self.backend = backend
        self.redactor = redactor
        self.name = backend.name

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> AgentSession:
        session = self.backend.open_session(node_id, workspace=workspace, request=request)
        return RedactingSession(session, self.redactor)

    def resume_thread(self, thread: str, request: SessionRequest) -> AgentSession | None:
        """The backend's session of a `full` thread from before a resume, if it keeps one."""
        resume = getattr(self.backend, "resume_thread", None)
        session = resume(thread, request) if resume is not None else None
        return RedactingSession(session, self.redactor) if session is not None else None

    def save_state(self) -> dict[str, Any]:
        return self.backend.save_state()

    def restore_state(self, state: Mapping[str, Any]) -> None:
        self.backend.restore_state(state)
