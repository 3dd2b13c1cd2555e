"""docs/guarantees.md proves each statement with a named test: every test it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def named_tests() -> list[tuple[str, str]]:
    """(file, function) for every `tests/<file>::<function>` and every `::<function>` that
    continues the file named just before it."""
    text = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    found, current = [], ""
    for match in re.finditer(r"`(tests/[\w/]+\.py)?::(test_\w+)`", text):
        current = match.group(1) or current
        found.append((current, match.group(2)))
    return found


def test_every_test_named_in_the_guarantees_exists() -> None:
    named = named_tests()
    assert len(named) >= 40
    missing = [f"{path}::{name}" for path, name in named
               if not re.search(rf"^def {name}\(", (ROOT / path).read_text(encoding="utf-8"),
                                re.MULTILINE)]
    assert missing == []
