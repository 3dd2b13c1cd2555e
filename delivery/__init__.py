"""delivery: run DOT-graph workflows that carry a ticket through pull requests.

The library's public API, importable from the package itself:

    from delivery import RunRequest, World, start_run
    outcome = start_run(RunRequest(workflow=Path("flow.dot"), goal="Add /health"),
                        World(agent=ReplayBackend({...})))

- reading a workflow: `check_file`, `check_source` (model and every diagnostic),
  `load_workflow` (a model that is safe to run, or WorkflowSyntaxError / WorkflowInvalid);
- running one: `start_run`, `resume_run`, `RunRequest`, `RunOutcome`, `World`,
  `EngineOptions`;
- the errors: `DeliveryError` and its tree (`delivery.errors`).

The names are loaded on first use, so `import delivery` (and `delivery validate`) does not
import the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "check_file": "delivery.validation.loader",
    "check_source": "delivery.validation.loader",
    "load_workflow": "delivery.validation.loader",
    "start_run": "delivery.engine.runner",
    "resume_run": "delivery.engine.runner",
    "RunRequest": "delivery.engine.runner",
    "RunOutcome": "delivery.engine.runner",
    "World": "delivery.engine.runner",
    "EngineOptions": "delivery.engine.run_loop",
    "DeliveryError": "delivery.errors",
}

__all__ = [
    "DeliveryError",
    "EngineOptions",
    "RunOutcome",
    "RunRequest",
    "World",
    "__version__",
    "check_file",
    "check_source",
    "load_workflow",
    "resume_run",
    "start_run",
]

if TYPE_CHECKING:
    from delivery.engine.run_loop import EngineOptions
    from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
    from delivery.errors import DeliveryError
    from delivery.validation.loader import check_file, check_source, load_workflow


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'delivery' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value
