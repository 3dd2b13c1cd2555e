"""Choosing agent backends for a run (SPEC §5): profiles by name, inline forms, checks.

The run's default profile is `--agent` (or the profile file's `default`); a node's
`agent=` picks another. Every profile a run needs is built and checked before the first
stage: an unknown name, a command that cannot be found or a server that cannot be reached
refuses the run, naming the profile and the node that needs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery.agents.base import AgentBackend
from delivery.agents.command import CommandBackend
from delivery.agents.openai_http import OpenAIBackend
from delivery.agents.presets import PRESETS
from delivery.agents.profiles import (
    INLINE_FORMS,
    CommandProfile,
    OpenAIProfile,
    Profile,
    ProfileFile,
    ReplayProfile,
    ScriptedProfile,
    inline_profile,
    load_profile_file,
)
from delivery.agents.replay import ReplayBackend
from delivery.agents.scripted import ScriptedAgent
from delivery.agents.scripted_file import check_scripted_nodes, load_scripted_agent
from delivery.errors import RunRefused

ACCEPTED_FORMS = (INLINE_FORMS + ", a preset (" + ", ".join(PRESETS) + ")"
                  ", or a profile name from delivery.toml")
DEFAULT = ""  # the key of the run's default backend


def build_backend(profile: Profile, *, label: str, base_dir: Path,
                  environ: Mapping[str, str],
                  sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.monotonic) -> AgentBackend:
    if isinstance(profile, ReplayProfile):
        return ReplayBackend.from_file(base_dir / profile.file)
    if isinstance(profile, ScriptedProfile):
        return load_scripted_agent(label, base_dir / profile.file)
    if isinstance(profile, CommandProfile):
        return CommandBackend(profile, environ=environ, label=label)
    assert isinstance(profile, OpenAIProfile)
    return OpenAIBackend(profile, environ=environ, label=label, sleep=sleep, clock=clock)


def make_backend(spec: str, *, base_dir: Path,
                 environ: Mapping[str, str] | None = None) -> AgentBackend:
    """The backend an inline profile (`replay:…`, `command:…`, `openai:…`) names."""
    profile = inline_profile(spec) or PRESETS.get(spec)
    if profile is None:
        raise RunRefused("agent", f"unknown agent profile '{spec}'", f"use {ACCEPTED_FORMS}")
    return build_backend(profile, label=spec, base_dir=base_dir, environ=environ or {})


@dataclass
class Agents:
    """The backends of one run: the default one and those named by nodes' `agent=`."""

    default: AgentBackend | None
    named: dict[str, AgentBackend] = field(default_factory=dict)
    default_name: str = ""  # the profile the default backend was built from, if any

    def for_profile(self, name: str) -> AgentBackend:
        backend = self.named.get(name) if name else self.default
        if backend is None:  # resolve_agents checked every node; a bug if reached
            raise RunRefused(f"agent profile '{name}'", "was not prepared for this run",
                             f"use {ACCEPTED_FORMS}")
        return backend

    def wrapped(self, wrap: Callable[[AgentBackend], AgentBackend]) -> Agents:
        """The same backends, each wrapped (the engine wraps them in its redaction)."""
        return Agents(wrap(self.default) if self.default is not None else None,
                      {name: wrap(backend) for name, backend in self.named.items()},
                      self.default_name)

    def save_state(self) -> dict[str, Any]:
        return {name: backend.save_state() for name, backend in self.named.items()}

    def restore_state(self, states: Mapping[str, Any]) -> None:
        for name, state in states.items():
            if name in self.named and isinstance(state, Mapping):
                self.named[name].restore_state(state)


def resolve_agents(needs: Iterable[tuple[str, str]], *, default_spec: str,
                   workspace: Path, environ: Mapping[str, str],
                   given: AgentBackend | None = None,
                   given_named: Mapping[str, AgentBackend] | None = None,
                   check: bool = True,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> Agents:
    """Build the backends that `needs` — (node id, its `agent=` or "") pairs — call for.

    `given` (a caller's backend) is the default; otherwise `default_spec` (`--agent`) or
    the profile file's `default`. `given_named` are a caller's backends by profile name,
    used before the profile file. RunRefused names the profile and the node."""
    profile_file, path = load_profile_file(workspace)
    default_spec = default_spec or profile_file.default
    needs = list(needs)
    agents = Agents(given)
    built: dict[str, AgentBackend] = dict(given_named or {})

    def backend(spec: str, node: str) -> AgentBackend:
        if spec in built:
            return built[spec]
        profile = _lookup(spec, node, profile_file, path)
        made = build_backend(profile, label=spec, base_dir=workspace, environ=environ,
                             sleep=sleep, clock=clock)
        if check:
            _check(made, spec, node)
        if isinstance(made, ScriptedAgent):
            check_scripted_nodes(made, spec, (need for need, _ in needs))
        built[spec] = made
        return made

    for node, spec in needs:
        if spec:
            agents.named[spec] = backend(spec, node)
        elif agents.default is None:
            if not default_spec:
                raise RunRefused("--agent", f"no agent backend was chosen and node '{node}' "
                                 "needs one",
                                 f"pass --agent with {ACCEPTED_FORMS}, set default= in "
                                 "delivery.toml, or agent= on the node")
            agents.default = backend(default_spec, node)
            agents.default_name = default_spec
    return agents


def _lookup(spec: str, node: str, profiles: ProfileFile, path: Path | None) -> Profile:
    if spec in profiles.profiles:
        return profiles.profiles[spec]
    if spec in PRESETS:
        return PRESETS[spec]
    inline = inline_profile(spec)
    if inline is not None:
        return inline
    names = ", ".join(sorted(profiles.profiles)) or "none"
    where = f"{path} defines: {names}" if path else "no delivery.toml was found"
    raise RunRefused(f"agent profile '{spec}'", f"is unknown (needed by node '{node}')",
                     f"{where}; use one of them, a preset ({', '.join(PRESETS)}) or "
                     f"{INLINE_FORMS}")


def _check(backend: AgentBackend, spec: str, node: str) -> None:
    if isinstance(backend, CommandBackend):
        missing = backend.missing_program()
        if missing is not None:
            package = backend.profile.package
            how = (f"install it (npm install -g {package}), put it on PATH, or fix the "
                   "profile's command") if package else \
                "install it, put it on PATH, or fix the profile's command"
            raise RunRefused(f"agent profile '{spec}'", f"runs {missing!r}, which cannot be "
                             f"found (needed by node '{node}')", how)
    elif isinstance(backend, OpenAIBackend):
        missing = backend.missing_key()
        if missing is not None:
            raise RunRefused(f"agent profile '{spec}'", f"talks to {backend.base_url} but "
                             f"{missing} is not set (needed by node '{node}')",
                             f"export {missing}, or set base_url (or OPENAI_BASE_URL) for a "
                             "local server")
        problem = backend.unreachable()
        if problem is not None:
            raise RunRefused(f"agent profile '{spec}'", f"{problem} (needed by node '{node}')",
                             "start the server, or fix base_url / OPENAI_BASE_URL")
