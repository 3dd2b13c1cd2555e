"""The outside world of a run (`World`) and the real clock: apart from the runner so that
everything that wires a run (run_setup, child_runs, the runner) imports them from below."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from delivery.agents.base import AgentBackend
from delivery.engine.foreach import FanOutSource
from delivery.engine.handlers.base import Clock, Handler
from delivery.engine.interviewer import Interviewer
from delivery.forges.base import Forge
from delivery.forges.stop_label import StopLabelForge
from delivery.lang.model import NodeType
from delivery.store.base import RunStores
from delivery.store.runstore import LocalRunStores


class SystemClock:
    """The real clock: monotonic time for durations, UTC wall time for records."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class World:
    """The outside world of a run — what it talks to, not how it is set up (that is
    `EngineOptions`) nor who watches (the `observer` argument). Every part may be replaced
    by the caller."""

    agent: AgentBackend | None = None
    # backends for profile names (a node's agent=, or --agent NAME), before delivery.toml's
    agents: Mapping[str, AgentBackend] = field(default_factory=dict)
    interviewer: Interviewer | None = None
    # every time the engine reads: durations, waits, timestamps
    clock: Clock = field(default_factory=SystemClock)
    # where runs are kept (the local run directory; a git ref for the Action)
    stores: RunStores = field(default_factory=LocalRunStores)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    # Stage handlers that stand in for the real ones (route scenarios play scripted probes,
    # scripts and effects instead of touching the world), by node type.
    handlers: Mapping[NodeType, Handler] | None = None
    # Where the folders' repositories and PRs live; None: opened from the run's settings.
    forge: Forge | None = None
    # The clone cache worktrees hang on; None: $XDG_CACHE_HOME/delivery.
    git_cache: Path | None = None
    # Who reads the stop label (route scenarios script it); None: the forge, if it has
    # labels (GitHub)
    stop_labels: StopLabelForge | None = None
    # Event mode's fan-out of foreach stages across worker jobs (SPEC §13); None: a run
    # kept on a state ref fans out by `--max-runners` but gathers no worker's results
    fan_out: FanOutSource | None = None
