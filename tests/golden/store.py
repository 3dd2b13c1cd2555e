"""Reading, writing and comparing golden files: tests/golden/<area>/<case>.json, each
{"input": ..., "output": ...}, written by `python -m tests.golden.regen`.

An area is a module with AREA (its folder's name), `cases()` (case name -> JSON input, the
same every time: fixed texts and seeded generators) and `output(input)` (what the current
code makes of it, as JSON). The tests compare `output(input)` with the file; regen writes
it. Outputs go through JSON before comparing, so tuples and lists are the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

GOLDEN = Path(__file__).resolve().parent
ROOT = GOLDEN.parents[1]
REGEN = ".venv/bin/python -m tests.golden.regen"


class Area(Protocol):
    AREA: str

    def cases(self) -> dict[str, Any]: ...

    def output(self, case: Any) -> Any: ...


def plain(value: Any) -> Any:
    """`value` as JSON would give it back (tuples become lists)."""
    return json.loads(json.dumps(value))


def path(area: str, name: str) -> Path:
    return GOLDEN / area / f"{name}.json"


def stored_names(area: str) -> set[str]:
    return {p.stem for p in (GOLDEN / area).glob("*.json")}


def load(area: str, name: str) -> Any:
    file = path(area, name)
    if not file.exists():
        raise AssertionError(f"{file.relative_to(ROOT)} is missing: run `{REGEN} {area}` and "
                             "review the new file")
    return json.loads(file.read_text(encoding="utf-8"))


def check(area: Area, name: str, case: Any) -> None:
    """The case's golden file holds this input, and the current code's output for it."""
    stored = load(area.AREA, name)
    assert stored["input"] == plain(case), (
        f"the corpus changed: run `{REGEN} {area.AREA}` and review the diff")
    assert plain(area.output(case)) == stored["output"], (
        f"the output changed: if that is meant, run `{REGEN} {area.AREA}` and review the "
        "diff of tests/golden/")


def write(area: Area) -> tuple[int, int]:
    """Write every case's golden file and remove the files of cases that are gone;
    (files written, files removed)."""
    folder = GOLDEN / area.AREA
    folder.mkdir(exist_ok=True)
    cases = area.cases()
    for name, case in cases.items():
        text = dumps({"input": plain(case), "output": plain(area.output(case))})
        path(area.AREA, name).write_text(text + "\n", encoding="utf-8")
    gone = stored_names(area.AREA) - set(cases)
    for name in gone:
        path(area.AREA, name).unlink()
    return len(cases), len(gone)


def dumps(value: Any, indent: str = "") -> str:
    """JSON that reads well in a diff: what fits on a line of 100 characters stays on
    one, and so does a list or object of plain values (a token, a diagnostic) unless it is
    a list of strings only (lines); anything else is opened one item a line. ASCII only
    (a lone surrogate of the redaction corpus could not be written as UTF-8)."""
    flat = json.dumps(value, ensure_ascii=True)
    if len(indent) + len(flat) <= 100 or not isinstance(value, (list, dict)) or not value:
        return flat
    items = list(value.values() if isinstance(value, dict) else value)
    lines = isinstance(value, list) and all(isinstance(item, str) for item in items)
    if not lines and not any(isinstance(item, (list, dict)) for item in items):
        return flat
    inner = indent + "  "
    if isinstance(value, list):
        items = [inner + dumps(item, inner) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    items = [inner + json.dumps(key) + ": " + dumps(item, inner) for key, item in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"
