"""A child process that runs `delivery` commands for the reader fuzz tests, under a memory
limit, one command per line of stdin.

Each request is a JSON object `{"argv": [...], "files": {"path": "<base64>"}}`: the files
are written, then `main(argv)` runs with stdout and stderr captured. The answer is one
JSON line: the exit code, stdout, stderr, and the traceback of any exception that
escaped `main` (which no input may cause). Starting the interpreter once instead of per
example keeps a hypothesis suite over subprocesses within seconds.

    python tests/reader_worker.py MEMORY_BYTES
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import resource
import sys
import traceback
from pathlib import Path


def serve(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    from delivery.cli.main import main

    for line in sys.stdin:
        request = json.loads(line)
        for name, data in request["files"].items():
            Path(name).write_bytes(base64.b64decode(data))
        out, err = io.StringIO(), io.StringIO()
        escaped = ""
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(request["argv"], out=out, err=err)
        except BaseException:  # reported to the test, which fails on it
            code, escaped = -1, traceback.format_exc()
        answer = {"code": code, "stdout": out.getvalue()[-20_000:],
                  "stderr": err.getvalue()[-20_000:], "escaped": escaped}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
