"""Run or resume the bundled campaign.dot over a fleet of local repositories, in a process
of its own that a chaos test SIGKILLs (tests/soak/test_campaign_chaos.py).

    python tests/campaign_driver.py start|resume ROOT FOLDERS

ROOT holds `remotes/` (made by the test: `Fleet.local_remotes`), and gets `workspace/`,
`run/`, `cache/` and `calls.log` (the agent's sessions, one line per call, kept across
kills). The fleet is `Fleet.of(FOLDERS)`: 10% of the folders fail CI once and are repaired.
Prints the outcome as JSON; exit 0 when the run succeeded, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from delivery.engine.runner import RunRequest, World, resume_run, start_run
from delivery.testing.fleet import GOAL, TICKET, Fleet
from delivery.validation.loader import load_workflow

WORKFLOW = Path(__file__).resolve().parent.parent / "workflows" / "campaign.dot"
BRANCH = "delivery/fleet-1"
SECONDS_PER_FOLDER = 0.3  # a second or so of implement: a kill drawn there lands mid-call


def main(argv: list[str]) -> int:
    command, root, count = argv[0], Path(argv[1]), int(argv[2])
    fleet = Fleet.of(count)
    workspace = root / "workspace"
    workspace.mkdir(exist_ok=True)
    agent = fleet.agent(load_workflow(WORKFLOW), seconds_per_folder=SECONDS_PER_FOLDER,
                        log=root / "calls.log")
    world = World(agent=agent, git_cache=root / "cache")
    if command == "start":
        repos = {f: str(root / "remotes" / f"{f}.git") for f in fleet.folders}
        outcome = start_run(RunRequest(
            workflow=WORKFLOW, goal=GOAL, inputs={"ticket": TICKET}, workspace=workspace,
            run_dir=root / "run", repos=repos, forge="local",
            checks=fleet.local_checks(root, workspace), branch=BRANCH), world)
    else:  # the forge and its checks come back from run.json
        outcome = resume_run(root / "run", world)
    print(json.dumps({"status": outcome.status, "failure_reason": outcome.failure_reason}))
    return 0 if outcome.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
