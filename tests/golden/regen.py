"""Rewrite the golden files from the current code: `.venv/bin/python -m tests.golden.regen
[AREA...]` (all areas when none is named). Review the diff of tests/golden/ before
committing it: every changed output is a changed behaviour."""

from __future__ import annotations

import sys

from .areas import AREAS
from .store import write


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in AREAS]
    if unknown:
        print(f"unknown area {unknown[0]!r}: name one of {', '.join(AREAS)} (or none for all)",
              file=sys.stderr)
        return 2
    for name in argv or list(AREAS):
        written, removed = write(AREAS[name])
        print(f"tests/golden/{name}: {written} files written, {removed} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
