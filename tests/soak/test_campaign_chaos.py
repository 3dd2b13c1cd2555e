"""Chaos across a campaign (issue 36): the bundled campaign.dot over 20 local repositories
(two of them failing CI once and repaired alone) is SIGKILLed at random points — seeded
event counts of its own event log, so a kill lands inside folder stages, between a
folder's end and its save, inside publish, merges — and resumed until it ends. Every time:
the run succeeds, the log verifies, every PR is merged exactly once (the local forge's
records, one merge commit on each main) and each folder's implement call was made once,
unless that folder's implement was running (started, not saved as done) at a kill."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from delivery.engine.foreach import PROGRESS_PREFIX
from delivery.testing.fleet import Fleet, calls

pytestmark = pytest.mark.slow  # a soak: 20-folder campaigns killed and resumed

FOLDERS = 20
KILLS = 2  # kill points of one campaign
DRIVER = Path(__file__).resolve().parent.parent / "campaign_driver.py"
DELIVERY = str(Path(sys.executable).with_name("delivery"))
BRANCH = "delivery/fleet-1"


@dataclass
class Campaign:
    root: Path
    exits: list[int]  # each process's exit status, -SIGKILL for a killed one
    running_at_kills: Counter[str]  # folder -> kills that found its implement running
    events: int  # lines of the event log at the end

    @property
    def implement_calls(self) -> Counter[str]:
        return Counter(s.split("@", 1)[1] for s in calls(self.root / "calls.log")
                       if s.startswith("implement@"))


def events(run_dir: Path) -> list[dict[str, Any]]:
    """The event log's whole lines (a line torn by the kill is left out)."""
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return []
    parsed = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            parsed.append(json.loads(line))
        except ValueError:
            continue
    return parsed


def implement_running(log: list[dict[str, Any]]) -> set[str]:
    """Folders whose implement had started and was not saved as done: the engine's own
    per-folder marker (`internal.foreach.implement.done.<f>`) in a saved state, or the
    stage's outcome, tells a folder that will not run again."""
    running: set[str] = set()
    done_key = f"{PROGRESS_PREFIX}implement.done."
    for event in log:
        if event["type"] == "folder_started" and event.get("node") == "implement":
            running.add(event["folder"])
        elif event["type"] == "state":
            if "implement" in event.get("outcomes", {}):
                running.clear()
            for key in event.get("context_set", {}):
                if key.startswith(done_key):
                    running.discard(key[len(done_key):])
    return running


def lines(run_dir: Path) -> int:
    try:
        return (run_dir / "events.jsonl").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def campaign(root: Path, kill_at: list[int]) -> Campaign:
    """Run the campaign, SIGKILLed once its event log holds each of `kill_at`'s counts of
    lines (ascending), resumed after each kill until a process ends by itself."""
    root.mkdir(parents=True, exist_ok=True)
    Fleet.of(FOLDERS).local_remotes(root)
    run_dir = root / "run"
    exits: list[int] = []
    running: Counter[str] = Counter()
    pending = list(kill_at)
    command = "start"
    while True:
        proc = subprocess.Popen([sys.executable, str(DRIVER), command, str(root),
                                 str(FOLDERS)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while proc.poll() is None and pending and time.monotonic() < deadline:
            if lines(run_dir) >= pending[0]:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.005)
        out, err = proc.communicate(timeout=300)
        exits.append(proc.returncode)
        if proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, (kill_at, exits, out, err[-3000:])
            return Campaign(root, exits, running, lines(run_dir))
        pending.pop(0)
        running.update(implement_running(events(run_dir)))
        command = "resume"


def merges(remote: Path) -> tuple[list[str], int]:
    """(the states of the branch's PRs in the forge's records, merge commits on main)."""
    pulls = json.loads((remote / "delivery" / "pulls.json").read_text(encoding="utf-8"))
    states = [p["state"] for p in pulls["pulls"] if p["head"] == BRANCH]
    count = subprocess.run(["git", "-C", str(remote), "rev-list", "--merges", "--count",
                            "main"], capture_output=True, text=True, check=True).stdout
    return states, int(count)


def assert_ended_well(end: Campaign) -> None:
    for folder in Fleet.of(FOLDERS).folders:
        assert merges(end.root / "remotes" / f"{folder}.git") == (["merged"], 1), folder
        made = end.implement_calls[folder]
        assert 1 <= made <= 1 + end.running_at_kills[folder], (folder, made, end.exits)
    verified = subprocess.run([DELIVERY, "verify", str(end.root / "run")],
                              capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    return campaign(tmp_path_factory.mktemp("reference"), [])


def test_an_uninterrupted_campaign_merges_each_pr_once_after_one_implement_call_a_folder(
        uninterrupted: Campaign) -> None:
    assert uninterrupted.exits == [0]
    assert set(uninterrupted.implement_calls.values()) == {1}
    assert len(uninterrupted.implement_calls) == FOLDERS
    assert_ended_well(uninterrupted)


def kill_points(reference: Path, seed: int) -> list[int]:
    """KILLS event counts drawn at random (seeded) over the uninterrupted run's log; seed 0
    kills once while implement runs, so a folder is caught mid-call."""
    log = events(reference / "run")
    rng = random.Random(seed)
    points = rng.sample(range(5, len(log) - 1), KILLS)
    if seed == 0:
        inside = [i for i, e in enumerate(log, 1) if e["type"] == "folder_started"
                  and e.get("node") == "implement"]
        points[0] = rng.choice(inside)
    return sorted(set(points))


def test_a_campaign_killed_at_random_points_and_resumed_merges_each_pr_once(
        uninterrupted: Campaign, tmp_path: Path, campaign_seed: int) -> None:
    points = kill_points(uninterrupted.root, campaign_seed)
    print(f"kills at event counts {points}")
    end = campaign(tmp_path / "chaos", points)
    assert end.exits.count(-signal.SIGKILL) >= 1, (points, end.exits)
    assert end.exits[-1] == 0
    assert_ended_well(end)
