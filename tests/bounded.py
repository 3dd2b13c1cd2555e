"""Running the `delivery` CLI in a child process with its memory and time bounded.

For tests of hostile input: a regression must fail the test (exit by MemoryError, a
kill on timeout), never hang the suite or take the machine's memory.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MEMORY_LIMIT = 1 << 30  # address space of the child: 1 GiB
_LAUNCH = "import sys\nfrom delivery.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str

    @property
    def one_line_error(self) -> bool:
        """stderr is exactly one non-empty line and holds no traceback."""
        lines = self.stderr.strip("\n").split("\n")
        return (len(lines) == 1 and bool(lines[0].strip())
                and "Traceback" not in self.stderr)


def run_cli(*argv: str | Path, timeout: float = 30, memory: int = MEMORY_LIMIT,
            cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Finished:
    """`delivery ARGV` in a child process limited to `memory` bytes and `timeout` seconds
    (subprocess.TimeoutExpired when it runs longer)."""
    return run_python(_LAUNCH, *argv, timeout=timeout, memory=memory, cwd=cwd, env=env)


def run_python(code: str, *argv: str | Path, timeout: float = 30, memory: int = MEMORY_LIMIT,
               cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Finished:
    """`python -c CODE ARGV` in a child process, bounded as run_cli()."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, argv)],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, preexec_fn=limit,
        env=dict(env) if env is not None else None, check=False,
    )
    return Finished(done.returncode, done.stdout, done.stderr)
