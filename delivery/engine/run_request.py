"""What a run is started with (`start_run`'s request): apart from the runner so that a
manager loop's child runs (delivery.engine.child_runs) can ask for one without importing
the runner, which imports them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import Workflow
from delivery.store.records import GateMode


@dataclass
class RunRequest:
    workflow: Path
    goal: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)
    agent: str = ""
    workspace: Path | None = None
    run_dir: Path | None = None
    # gate id -> its answers, one per visit in order (a single string answers one visit)
    answers: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    repos: Mapping[str, str] = field(default_factory=dict)
    # An unanswered human gate (no --answer, no terminal): DENY fails the gate's stage,
    # PAUSE stops the run as paused so that `resume --answer` can continue it, MANAGED
    # lets the node's agent answer a delegatable gate (else it is denied). Its value as
    # text ("pause") is taken too; anything else is refused.
    gates: GateMode = GateMode.DENY
    forge: str = ""  # "local" | "github"; empty: chosen from the repository locations
    checks: Mapping[str, str] = field(default_factory=dict)  # folder -> local check command
    branch: str = ""  # the run's branch; empty: delivery/<ticket slug or run id>
    # `workflow` already loaded and validated (route scenarios run one file many times);
    # None: read and validated here
    model: Workflow | None = None
    # with `model`: the warnings its validation gave, so that the run's model cache
    # (delivery.store.model_cache) is written at the start; None: a resume writes it
    diagnostics: Sequence[Diagnostic] | None = None
    # refusals name the command line's options (--input, --repo) instead of these fields
    cli: bool = False
    # `--logs DIR`: write the Attractor view of the run there as it goes (and on resumes)
    logs: Path | None = None
    # `--budget`: tokens (`200000`, `200k`) or US dollars (`$5`), over the graph's budget
    budget: str = ""
    # `--max-parallel`: how many folders a stage works on at once when neither the node nor
    # the graph says `max_parallel` (a number of 1 or more, or its text); None: 8
    max_parallel: int | str | None = None
    # `--max-runners`: in event mode, the worker jobs a foreach stage with more folders than
    # its parallelism is split across (SPEC §13); None or 1: no fan-out
    max_runners: int | str | None = None
