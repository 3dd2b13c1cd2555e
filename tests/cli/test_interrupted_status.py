"""A run whose process is gone is shown `interrupted`, not `running` (SPEC §12, issue 39):
by `delivery runs` (and `--json`, with a reason) and `delivery inspect`. run.json records
the process running the run (pid, machine); on this machine a gone process settles it, a
run of another machine is judged by its heartbeat (the event log's last write) against
the longest stage timeout. Through the `delivery` executable, stderr in a file."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from logged_cli_helpers import DELIVERY, delivery
from signal_helpers import wait_until

from delivery.testing import flow

# `slow` sleeps on its first visit (its pid in a file) and is quick once the mark is there
SLOW_SH = """if [ -e started ]; then echo again; exit 0; fi
touch started
echo $$ > slow.pid
exec sleep 60
"""
SLOW = flow("""
slow [type=script, script="sh slow.sh"]
start -> slow -> exit
""", name="Slow")


@pytest.fixture
def killed(tmp_path: Path) -> Iterator[Path]:
    """A run killed (SIGKILL) during its `slow` stage; its directory."""
    (tmp_path / "slow.dot").write_text(SLOW, encoding="utf-8")
    (tmp_path / "slow.sh").write_text(SLOW_SH, encoding="utf-8")
    process = subprocess.Popen([str(DELIVERY), "run", "slow.dot", "--quiet"], cwd=tmp_path,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    pid_file = tmp_path / "slow.pid"
    try:
        wait_until(lambda: pid_file.is_file() and pid_file.read_text().strip() != "",
                   process, "the slow stage started")  # type: ignore[arg-type]
        _, stdout, _ = delivery(tmp_path, "runs", "--json")
        assert [run["status"] for run in json.loads(stdout)] == ["running"]  # alive
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if pid_file.is_file():
            with_group = int(pid_file.read_text())
            with contextlib.suppress(ProcessLookupError):
                os.killpg(with_group, signal.SIGKILL)  # the stage's sleep, left behind
    (run_dir,) = (tmp_path / ".delivery" / "runs").iterdir()
    yield run_dir


def test_runs_json_shows_a_killed_run_as_interrupted_with_a_reason(killed: Path) -> None:
    code, stdout, log = delivery(killed.parents[2], "runs", "--json")
    assert code == 0, log
    (run,) = json.loads(stdout)
    assert run["status"] == "interrupted"
    assert "is gone" in run["reason"] and "delivery resume" in run["reason"]


def test_runs_and_inspect_show_a_killed_run_as_interrupted(killed: Path) -> None:
    _, listed, _ = delivery(killed.parents[2], "runs")
    assert listed.split()[1] == "interrupted", listed
    _, shown, _ = delivery(killed.parents[2], "inspect", killed)
    assert shown.splitlines()[0].endswith(": interrupted"), shown
    _, report, _ = delivery(killed.parents[2], "inspect", killed, "--json")
    assert json.loads(report)["status"] == "interrupted"


def test_an_interrupted_run_resumes(killed: Path) -> None:
    code, stdout, log = delivery(killed.parents[2], "resume", killed, "--json", "--quiet")
    assert code == 0, log
    assert json.loads(stdout)["status"] == "succeeded"
    _, listed, _ = delivery(killed.parents[2], "runs", "--json")
    assert [run["status"] for run in json.loads(listed)] == ["succeeded"]


def test_a_run_of_another_machine_is_interrupted_once_its_heartbeat_is_stale(
        killed: Path) -> None:
    info = json.loads((killed / "run.json").read_text())
    info["host"] = "another-machine"  # as if the run's process were there
    (killed / "run.json").write_text(json.dumps(info))
    _, fresh, _ = delivery(killed.parents[2], "runs", "--json")
    assert json.loads(fresh)[0]["status"] == "running"  # its last sign of life is recent
    hours_ago = time.time() - 2 * 3600  # past the default stage timeout of an hour
    os.utime(killed / "events.jsonl", (hours_ago, hours_ago))
    _, stale, _ = delivery(killed.parents[2], "runs", "--json")
    (run,) = json.loads(stale)
    assert run["status"] == "interrupted"
    assert "another-machine" in run["reason"] and "heartbeat" in run["reason"]
