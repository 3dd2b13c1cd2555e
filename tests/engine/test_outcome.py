"""RunOutcome: its context may be handed over as a function, called on the first read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from delivery.engine.outcome import RunOutcome


def outcome(context: dict[str, Any] | Any) -> RunOutcome:
    return RunOutcome("r1", "succeeded", "", ["start", "exit"], context, Path("/runs/r1"),
                      offloaded={"big": ("file:///runs/r1/artifacts/values/big.json", 9)})


def test_a_context_given_as_a_dict_reads_as_that_dict() -> None:
    values = {"a": 1, "big": "x" * 9}
    assert outcome(values).context is values


def test_a_context_given_as_a_function_is_built_on_the_first_read_only() -> None:
    calls: list[int] = []

    def build() -> dict[str, Any]:
        calls.append(1)
        return {"a": 1}

    made = outcome(build)
    assert calls == []
    assert made.context == {"a": 1}
    assert made.context is made.context
    assert calls == [1]


def test_equality_repr_and_json_see_the_built_context() -> None:
    lazy, eager = outcome(lambda: {"a": 1, "big": "x" * 9}), outcome({"a": 1, "big": "x" * 9})
    assert lazy == eager
    assert repr(lazy) == repr(eager)
    assert "'big': 'xxxxxxxxx'" in repr(lazy)
    assert lazy.to_json() == eager.to_json()
    assert lazy.to_json(full=False)["context"]["big"] == {
        "artifact": "file:///runs/r1/artifacts/values/big.json", "bytes": 9}


def test_the_context_can_be_replaced() -> None:
    made = outcome(lambda: {"a": 1})
    made.context = {"b": 2}
    assert made.context == {"b": 2}


def test_the_context_is_required() -> None:
    with pytest.raises(TypeError, match="context"):
        RunOutcome("r1", "succeeded", "", [], run_dir=Path("/runs/r1"))  # type: ignore[call-arg]
