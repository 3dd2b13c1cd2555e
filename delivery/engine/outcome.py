"""What `start_run` and `resume_run` return: `RunOutcome`.

Its `context` is the run's final context with offloaded values (over 100 KB, in the
artifact store) read back in. Reading them back costs a file read and a JSON decode per
offloaded value, which a caller that never looks at the context (most embedders, the
benchmarks, a run of many large agent replies) paid at the end of every run: so the run
hands over a function that builds it, called on the first read of `context`, once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from delivery.errors import PauseReason
from delivery.git.preview import Preview
from delivery.store.records import RunStatus

Values = dict[str, Any]


class _BuiltOnFirstRead:
    """A dataclass field holding a dict, or a function making it, called on the first read
    (the dict kept from then on). It has no default: a read on the class raises
    AttributeError, which is how dataclasses tell a descriptor field without one."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}_value"

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> _BuiltOnFirstRead: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Values: ...

    def __get__(self, instance: object | None,
                owner: type | None = None) -> Values | _BuiltOnFirstRead:
        if instance is None:
            raise AttributeError(f"{self._slot[1:]} has no default")
        held: Values | Callable[[], Values] = instance.__dict__[self._slot]
        if callable(held):
            held = held()
            instance.__dict__[self._slot] = held
        return held

    def __set__(self, instance: object, value: Values | Callable[[], Values]) -> None:
        instance.__dict__[self._slot] = value


@dataclass
class RunOutcome:
    run_id: str
    status: RunStatus
    failure_reason: str
    path: list[str]
    # the final context, offloaded values resolved (a dict; see the module docstring)
    context: _BuiltOnFirstRead = _BuiltOnFirstRead()
    # (mypy takes the descriptor for a default; dataclasses see none, see above)
    run_dir: Path  # type: ignore[misc]
    usage: dict[str, int] = field(default_factory=dict)  # agent tokens of the whole run
    pause_reason: PauseReason | None = None  # why a paused run paused (None otherwise)
    # the budget's limits and use (delivery.engine.budget), when the run has one
    budget: dict[str, Any] = field(default_factory=dict)
    # keys whose value is in the artifact store (over 100 KB): their pointer and size
    offloaded: dict[str, tuple[str, int]] = field(default_factory=dict)
    # a dry run's pause: per folder what would be published (delivery.engine.dry_run)
    previews: dict[str, Preview] = field(default_factory=dict)
    # a fan-out's pause (SPEC §13): the chunk numbers its worker jobs run
    chunks: list[int] = field(default_factory=list)

    def to_json(self, *, full: bool = True) -> dict[str, Any]:
        """`full=False` shows an offloaded value as {"artifact": pointer, "bytes": n}."""
        context = self.context if full else {
            key: ({"artifact": self.offloaded[key][0], "bytes": self.offloaded[key][1]}
                  if key in self.offloaded else value) for key, value in self.context.items()}
        return {"run_id": self.run_id, "status": str(self.status),
                "failure_reason": self.failure_reason, "path": self.path,
                "context": context, "run_dir": str(self.run_dir), "usage": self.usage,
                # SPEC §12 names it `reason`; `pause_reason` kept for earlier readers
                **({"reason": str(self.pause_reason), "pause_reason": str(self.pause_reason)}
                   if self.pause_reason else {}),
                **({"budget": self.budget} if self.budget else {}),
                **({"diffs": {folder: shown.diff for folder, shown in self.previews.items()}}
                   if self.pause_reason is PauseReason.DRY_RUN else {}),
                **({"chunks": self.chunks} if self.pause_reason is PauseReason.FAN_OUT
                   else {})}
