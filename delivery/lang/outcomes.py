"""The outcome vocabulary (SPEC §2): what a stage reports, and what conditions compare.

Two kinds, kept apart by type:

- `StageOutcome`: the standard outcomes, which the engine acts on (a failure routes to a
  failure edge, a retry runs the stage again, ...). A StrEnum: it is stored and printed as
  its value, so run files from earlier versions (plain strings) read back unchanged.
- `CustomOutcome`: a word a workflow defines for itself (an agent's `"outcome": "yes"`,
  a condition's `outcome=needs_review`); it routes as a success and the engine never
  compares it with anything but conditions.

`outcome_of` turns stored text into one or the other; the lowest layer that uses them
(conditions, the validator) owns them, and the store and engine import them from here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, NewType, TypeAlias


class StageOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PARTIAL_SUCCESS = "partial_success"
    RETRY = "retry"
    SKIPPED = "skipped"

    @property
    def attractor_name(self) -> str:
        """The name Attractor's specification gives it (Appendix C: `success`, `fail`)."""
        return _ATTRACTOR_NAMES.get(self, self.value)


CustomOutcome = NewType("CustomOutcome", str)
Outcome: TypeAlias = StageOutcome | CustomOutcome

# Attractor's spellings where they differ from delivery's; conditions accept them too
_ATTRACTOR_NAMES: Final[dict[StageOutcome, str]] = {StageOutcome.SUCCEEDED: "success",
                                                    StageOutcome.FAILED: "fail"}
OUTCOME_ALIASES: Final[dict[str, StageOutcome]] = {
    name: outcome for outcome, name in _ATTRACTOR_NAMES.items()}
_STANDARD: Final[dict[str, StageOutcome]] = {outcome.value: outcome for outcome in StageOutcome}
# Outcomes that leave a goal gate unmet: a failure, a pending retry, a skip.
GATE_UNMET: Final = frozenset({StageOutcome.FAILED, StageOutcome.RETRY, StageOutcome.SKIPPED})
# Outcomes a stage is run again on (within its max_retries).
RETRIED: Final = frozenset({StageOutcome.FAILED, StageOutcome.RETRY})
# A parallel branch's outcomes that are not a success (for join_policy).
NOT_SUCCEEDED: Final = frozenset({StageOutcome.FAILED, StageOutcome.SKIPPED})


def outcome_of(text: str) -> Outcome:
    """The outcome `text` names as stored (no aliases): a standard one, else custom."""
    standard = _STANDARD.get(text)
    return standard if standard is not None else CustomOutcome(text)


def standard_outcome(text: str) -> StageOutcome | None:
    """The standard outcome `text` names, Attractor's spellings included; None if custom."""
    return _STANDARD.get(text) or OUTCOME_ALIASES.get(text)
