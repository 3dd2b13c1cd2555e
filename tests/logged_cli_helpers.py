"""The `delivery` executable as a CI job runs it: stdout read, stderr redirected to a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DELIVERY = Path(sys.executable).with_name("delivery")
DEADLINE = 60.0


def delivery(cwd: Path, *args: str | Path) -> tuple[int, str, str]:
    """`delivery ARGS` run in `cwd` with stderr written to a file; (exit status, stdout,
    the file's text)."""
    log = cwd / "stderr.log"
    with log.open("w", encoding="utf-8") as err:
        done = subprocess.run([str(DELIVERY), *map(str, args)], cwd=cwd,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                              text=True, timeout=DEADLINE, check=False)
    return done.returncode, done.stdout, log.read_text(encoding="utf-8")
