"""One error tree (delivery/errors.py): every exception the project raises on purpose is
in it and drawn in its docstring; pausing is a control signal outside it."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from delivery import errors
from delivery.errors import DeliveryError, PauseRequested, RunError, StageError

PACKAGE = Path(errors.__file__).parent


def _error_classes() -> dict[str, type[BaseException]]:
    return {name: value for name, value in vars(errors).items()
            if inspect.isclass(value) and issubclass(value, BaseException)
            and value.__module__ == errors.__name__}


def test_every_error_class_is_drawn_in_the_tree_and_every_drawn_name_exists() -> None:
    assert errors.__doc__ is not None
    drawn = set(re.findall(r"(?:├──|└──|^ {4})\s*([A-Z]\w+)", errors.__doc__, flags=re.M))
    assert drawn == set(_error_classes())


def test_every_error_but_the_control_signals_is_a_delivery_error() -> None:
    for name, cls in _error_classes().items():
        if cls in (PauseRequested, errors.RunInterrupted, errors.Terminated):
            assert not issubclass(cls, Exception)  # no `except Exception` swallows it
        else:
            assert issubclass(cls, DeliveryError), name


def test_stage_failures_are_run_errors_below_stage_error() -> None:
    for cls in (errors.AgentError, errors.ContractViolation, errors.TemplateRenderError,
                errors.FactsFormatError):
        assert issubclass(cls, StageError) and issubclass(cls, RunError)


def test_no_public_exception_is_defined_outside_errors_py() -> None:
    stray = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        if PACKAGE / "testing" in path.parents:
            continue  # the test harness (a fake GitHub): its errors never reach a user
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = [ast.unparse(base) for base in node.bases]
                if any(re.search(r"(Error|Exception|Violation|Refused|Problem)$", b)
                       for b in bases):
                    stray.append(f"{path.relative_to(PACKAGE)}: {node.name}({', '.join(bases)})")
    assert stray == []
