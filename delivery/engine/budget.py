"""The run's agent budget (SPEC §7.1): `budget_tokens=` / `budget_usd=` on the graph, or
`--budget` on `delivery run` / `resume`.

Usage is what the agents reported (their truthful counts: tokens always, dollars when the
backend reports them, as Claude Code does). At 80% of a limit the run records one warning
(an event; the sticky comment and the Action's job summary show it). Before each agent
stage — never in the middle of one — the budget is checked: when the run has used it all,
or when the next agent stage, costing what an agent stage of this run has cost on average,
would take it past the limit, the run pauses there (status `paused`, reason `budget`) so
it never overspends; `resume --budget …` raises the limit and the run goes on.

The counters a resume needs (dollars spent, agent stages counted, which limit was warned
about) live in the context under `internal.budget`, saved with every stage record like any
other key; the tokens are the run state's own `usage`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from delivery.errors import PauseReason, PauseRequested, RunRefused
from delivery.lang.model import Workflow
from delivery.store.records import RunInfo

CONTEXT_KEY: Final = "internal.budget"
WARN_AT: Final = 0.8

_TOKENS = re.compile(r"(\d[\d_,]*)([kKmM]?)\Z")
_DOLLARS = re.compile(r"\$(\d+(?:\.\d+)?)\Z")


@dataclass(frozen=True)
class Limits:
    """A run's limits; None: that kind of usage is not bounded."""

    tokens: int | None = None
    usd: float | None = None

    def __bool__(self) -> bool:
        return self.tokens is not None or self.usd is not None

    def overridden(self, by: Limits) -> Limits:
        """These limits with the ones `by` sets replacing them (`--budget` over the graph)."""
        return Limits(by.tokens if by.tokens is not None else self.tokens,
                      by.usd if by.usd is not None else self.usd)

    def describe(self) -> str:
        parts = ([f"{self.tokens:,} tokens"] if self.tokens is not None else []) + \
            ([f"${self.usd:,.2f}"] if self.usd is not None else [])
        return " and ".join(parts) or "none"


def parse_budget(text: str, option: str = "--budget") -> Limits:
    """`--budget 50000` (tokens; `50k`, `2M`, `50_000` too) or `--budget '$5'` (US dollars,
    `$2.50`). RunRefused names the option and shows both forms."""
    value = text.strip()
    dollars = _DOLLARS.match(value)
    if dollars:
        amount = float(dollars.group(1))
        if amount > 0 and math.isfinite(amount):
            return Limits(usd=amount)
    tokens = _TOKENS.match(value)
    if tokens:
        count = int(tokens.group(1).replace("_", "").replace(",", ""))
        count *= {"": 1, "k": 1_000, "m": 1_000_000}[tokens.group(2).lower()]
        if count > 0:
            return Limits(tokens=count)
    raise RunRefused(f"{option} {text!r}", "is not a positive number of tokens or dollars",
                     f"write {option} 200000 (tokens, also 200k) or {option} '$5' (US dollars)")


def budget_option(text: str, option: str = "--budget") -> Limits:
    """`--budget` as given (empty: none)."""
    return parse_budget(text, option) if text else Limits()


def run_limits(workflow: Workflow, info: RunInfo) -> Limits:
    """The graph's budget with what `--budget` (kept in run.json) sets over it."""
    return limits_of(workflow, info.budget_tokens, info.budget_usd)


def limits_of(workflow: Workflow, tokens: int, usd: float) -> Limits:
    """The graph's budget with run.json's `budget_tokens` and `budget_usd` over it (0: not
    set there)."""
    return Limits(workflow.budget_tokens, workflow.budget_usd).overridden(
        Limits(tokens or None, usd or None))


@dataclass
class _Spent:
    cost_usd: float = 0.0
    agent_stages: int = 0  # agent stages that reported usage: the average's divisor
    warned: str = ""  # the limits last warned about (a raised budget warns once more)

    def to_json(self) -> dict[str, Any]:
        return {"cost_usd": round(self.cost_usd, 9), "agent_stages": self.agent_stages,
                "warned": self.warned}

    @classmethod
    def from_context(cls, value: Any) -> _Spent:
        if not isinstance(value, Mapping):
            return cls()
        cost, stages, warned = (value.get("cost_usd"), value.get("agent_stages"),
                                value.get("warned"))
        return cls(float(cost) if isinstance(cost, (int, float)) and cost >= 0 else 0.0,
                   stages if isinstance(stages, int) and stages >= 0 else 0,
                   warned if isinstance(warned, str) else "")


class BudgetPause(PauseRequested):
    """Raised before an agent stage the budget does not cover: the run pauses there."""

    reason = PauseReason.BUDGET

    def __init__(self, node_id: str, message: str) -> None:
        super().__init__(node_id, message=message)


class Budget:
    """One run's budget: fed each agent stage's usage, asked before each agent stage."""

    def __init__(self, limits: Limits, saved: Any = None) -> None:
        self.limits = limits
        self._spent = _Spent.from_context(saved)
        self._saved = self._spent.to_json()

    # -- what the engine tells it -------------------------------------------------------
    def add(self, used_tokens: int, stage_tokens: int, stage_cost: float) -> dict[str, Any] | None:
        """An agent stage reported usage (`used_tokens`: the run's total after it). Returns
        the warning event's fields the first time a limit is 80% used, else None."""
        spent = self._spent
        spent.cost_usd += max(0.0, stage_cost)
        if stage_tokens or stage_cost:
            spent.agent_stages += 1
        if not self.limits or spent.warned == self._key():
            return None
        share = self._share(used_tokens)
        if share < WARN_AT:
            return None
        spent.warned = self._key()
        return {"used": self.used_text(used_tokens), "percent": round(share * 100),
                "limit": self.limits.describe()}

    def check(self, node_id: str, used_tokens: int) -> None:
        """Before agent stage `node_id`: raise BudgetPause when it is not covered."""
        limits, spent = self.limits, self._spent
        if not limits:
            return
        stages = max(spent.agent_stages, 1)
        over = []
        if limits.tokens is not None:
            next_tokens = used_tokens / stages if spent.agent_stages else 0
            if used_tokens >= limits.tokens or used_tokens + next_tokens > limits.tokens:
                over.append(f"{used_tokens:,} of {limits.tokens:,} tokens used")
        if limits.usd is not None:
            next_cost = spent.cost_usd / stages if spent.agent_stages else 0.0
            if spent.cost_usd >= limits.usd or spent.cost_usd + next_cost > limits.usd:
                over.append(f"${spent.cost_usd:,.2f} of ${limits.usd:,.2f} used")
        if over:
            raise BudgetPause(node_id, (
                f"budget: {' and '.join(over)}; agent stage '{node_id}' would pass it, so the "
                "run paused before it — resume with --budget N (tokens) or --budget '$N' to "
                "raise it"))

    def changes(self) -> dict[str, Any] | None:
        """The counters to save in the context, when they changed since the last save."""
        now = self._spent.to_json()
        if now == self._saved:
            return None
        self._saved = now
        return now

    # -- what readers show ----------------------------------------------------------------
    def used_text(self, used_tokens: int) -> str:
        """`12,000 of 50,000 tokens (24%)`, or the tokens alone when unbounded."""
        limits, cost = self.limits, self._spent.cost_usd
        parts = []
        if limits.tokens is not None:
            parts.append(f"{used_tokens:,} of {limits.tokens:,} tokens "
                         f"({_percent(used_tokens, limits.tokens)})")
        if limits.usd is not None:
            parts.append(f"${cost:,.2f} of ${limits.usd:,.2f} ({_percent(cost, limits.usd)})")
        if not parts:
            parts.append(f"{used_tokens:,} tokens" + (f", ${cost:,.2f}" if cost else ""))
        return "; ".join(parts)

    def summary(self, used_tokens: int) -> dict[str, Any]:
        """For `--json` and the job summary: the limits, what was used, whether warned."""
        limits = self.limits
        return {"tokens": limits.tokens, "usd": limits.usd, "used_tokens": used_tokens,
                "used_usd": round(self._spent.cost_usd, 9),
                "warned": bool(limits) and self._share(used_tokens) >= WARN_AT,
                "text": self.used_text(used_tokens)}

    def _share(self, used_tokens: int) -> float:
        limits = self.limits
        shares = ([used_tokens / limits.tokens] if limits.tokens else []) + \
            ([self._spent.cost_usd / limits.usd] if limits.usd else [])
        return max(shares, default=0.0)

    def _key(self) -> str:
        return self.limits.describe()


def _percent(used: float, limit: float) -> str:
    return f"{math.floor(used / limit * 100)}%"
