"""A disk that fills up while a stage writes (SPEC §14: "A full disk … end[s] the stage with
one line naming the path and the fix, never a traceback"). The disk is simulated without
root: the `delivery` process runs with a file size limit (RLIMIT_FSIZE), so writing past it
fails as a full disk does, with an OSError from a real write."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

from engine_helpers import write_flow

_LAUNCH = "import sys\nfrom delivery.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
LIMIT = 1 << 20  # bytes any one file of the run may grow to

FLOW = """
digraph F {
  graph [goal="Fill the disk"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  loud [type=script, timeout="20s", script="head -c 3000000 /dev/zero | tr '\\\\0' x"]
  start -> loud -> exit
}
"""


def run_with_file_limit(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))

    return subprocess.run([sys.executable, "-c", _LAUNCH, *argv], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, preexec_fn=limit, check=False)


def test_a_stage_output_that_fills_the_disk_fails_the_stage_in_one_line(
        tmp_path: Path) -> None:
    workflow = write_flow(tmp_path, FLOW)
    done = run_with_file_limit(tmp_path, "run", str(workflow), "--workspace", str(tmp_path),
                               "--json")
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr, \
        done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "failed"
    reason = outcome["failure_reason"]
    stdout_file = Path(outcome["run_dir"]) / "loud" / "1" / "stdout.txt"
    assert f"writing {stdout_file}" in reason and "free space" in reason, reason
    assert "timed out" not in reason  # the script is not left blocked on a full pipe
