"""What a run waits for (SPEC §7.1 `wait`, §12, §13; issue 37 item 5): per folder whose PR
the last probe saw WAITING, the pending checks by name, the missing approval, mergeability
being computed, the unresolved threads — on the progress line as the wait begins, in
`inspect` (text and `--json` `waiting_for`), in `runs`, in the sticky comment and in the
Action's job summary; bounded whatever the number of folders."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from engine_helpers import FakeClock, cli, write_flow

from delivery.action.main import Result
from delivery.action.report import summary_markdown
from delivery.agents.replay import ReplayBackend
from delivery.cli.progress import StderrProgress
from delivery.engine.runner import RunInterrupted, RunRequest, World, resume_run, start_run
from delivery.forges.change_set import comment_body
from delivery.lang.model import NodeType
from delivery.scenarios.model import Scenario
from delivery.scenarios.stages import ScenarioPlayer
from delivery.testing import flow
from probes.evidence import PullRequestSnapshot
from probes.pr_state import PrEvidence
from probes.waiting import folder_waits, waiting_for, waiting_summary

FLOW = flow("""
observe [type=probe]
route   [shape=diamond]
pause   [type=wait, interval="60s"]
start -> observe -> route
route -> exit  [condition="pr.state=MERGED"]
route -> pause
pause -> observe
""", goal="Watch")

API_RAW = {"state": "WAITING", "checks": "PENDING", "pending_checks": ["ci/test", "lint"],
           "review": "REVIEW_REQUIRED", "mergeable": "MERGEABLE", "unresolved_threads": 0}
WEB_RAW = {"state": "WAITING", "checks": "SUCCESS", "review": "APPROVED",
           "mergeable": "UNKNOWN", "unresolved_threads": 2}
SAID = ("api (checks: ci/test, lint; approval), "
        "web (mergeability being computed; 2 unresolved threads)")


class _CtrlCInSleep(FakeClock):
    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        raise KeyboardInterrupt


def waiting_run(tmp_path: Path) -> tuple[Path, str]:
    """A run stopped in its wait after a probe saw api and web WAITING: its directory and
    what the progress said."""
    facts = {"api.pr.state": "WAITING", "api.pr.raw": json.dumps(API_RAW),
             "web.pr.state": "WAITING", "web.pr.raw": json.dumps(WEB_RAW),
             "web.threads.unresolved": 2}
    player = ScenarioPlayer(Scenario(name="w", folders=["api", "web"],
                                     probes={"observe": [facts, facts]}))
    handlers = {k: run for k, run in player.handlers().items() if k is not NodeType.WAIT}
    stream = io.StringIO()
    with pytest.raises(RunInterrupted):
        start_run(RunRequest(workflow=write_flow(tmp_path, FLOW), workspace=tmp_path,
                             repos={"api": str(tmp_path), "web": str(tmp_path)}),
                  World(agent=ReplayBackend({}), clock=_CtrlCInSleep(), handlers=handlers),
                  observer=StderrProgress(stream, terminal=False))
    [run_dir] = (tmp_path / ".delivery" / "runs").iterdir()
    return run_dir, stream.getvalue()


def test_one_folders_line_names_pending_checks_approvals_mergeability_and_threads() -> None:
    assert folder_waits(API_RAW) == "checks: ci/test, lint; approval"
    assert folder_waits({**API_RAW, "pending_checks": ["a", "b", "c", "d", "e"],
                         "approvals_required": 2}) == "checks: a, b, c +2; 2 approvals"
    assert folder_waits(WEB_RAW) == "mergeability being computed; 2 unresolved threads"


def test_a_ready_pr_or_one_that_failed_is_not_waited_for() -> None:
    context = {"api.pr.state": "WAITING", "api.pr.ready": True, "api.pr.raw": "{}",
               "web.pr.state": "CI_FAILED", "web.pr.raw": "{}"}
    assert waiting_for(context, ["api", "web"]) == {}


def test_the_summary_stays_short_at_200_folders() -> None:
    waits = {f"f{i}": "checks: ci" for i in range(200)}
    said = waiting_summary(waits)
    assert said.endswith("f4 (checks: ci) and 195 more") and len(said) < 200


def test_the_progress_line_says_what_the_wait_waits_for_as_it_begins(tmp_path: Path) -> None:
    _, said = waiting_run(tmp_path)
    assert f"  … pause: waiting for {SAID}; next look in 1m" in said.splitlines()


def test_inspect_shows_what_the_run_waits_for_in_text_and_json(tmp_path: Path) -> None:
    run_dir, _ = waiting_run(tmp_path)
    code, out, err = cli("inspect", run_dir, "--json")
    assert code == 0, err
    assert json.loads(out)["waiting_for"] == {
        "api": "checks: ci/test, lint; approval",
        "web": "mergeability being computed; 2 unresolved threads"}
    code, out, err = cli("inspect", run_dir)
    assert f"  waiting for: {SAID}" in out.splitlines()


def test_runs_lists_what_a_waiting_run_waits_for(tmp_path: Path) -> None:
    waiting_run(tmp_path)
    code, out, err = cli("runs", "--workspace", tmp_path)
    assert code == 0, err
    assert out.strip().endswith(f"— waiting: {SAID}")
    code, out, err = cli("runs", "--workspace", tmp_path, "--json")
    assert json.loads(out)[0]["waiting"] == SAID


def test_a_finished_run_waits_for_nothing(tmp_path: Path) -> None:
    run_dir, _ = waiting_run(tmp_path)
    merged = {"api.pr.state": "MERGED", "web.pr.state": "MERGED"}
    player = ScenarioPlayer(Scenario(name="w", folders=["api", "web"],
                                     probes={"observe": [merged]}))
    handlers = {k: run for k, run in player.handlers().items() if k is not NodeType.WAIT}
    done = resume_run(run_dir, World(agent=ReplayBackend({}), clock=FakeClock(),
                                     handlers=handlers))
    assert done.status == "succeeded"
    _, out, _ = cli("inspect", run_dir, "--json")
    assert json.loads(out)["waiting_for"] == {}


def test_the_job_summary_says_what_a_paused_run_waits_for(tmp_path: Path) -> None:
    run_dir, _ = waiting_run(tmp_path)
    _, out, _ = cli("inspect", run_dir, "--json")
    # what the summary reads of a run's outcome
    outcome = SimpleNamespace(path=["start", "observe", "route", "pause"], budget={},
                              context=json.loads(out)["context"])
    markdown = summary_markdown([Result("r1", "paused", "", cast(Any, outcome))])
    assert f"**Waiting for:** {SAID}" in markdown


def snapshot(number: int, evidence: PrEvidence, **extra: object) -> PullRequestSnapshot:
    return PullRequestSnapshot(number=number, url=f"https://github.com/o/r/pull/{number}",
                               head_ref="b", head_sha="0" * 40, base_ref="main",
                               evidence=evidence, extra=extra)


def test_the_sticky_comment_has_one_line_of_what_the_set_waits_for() -> None:
    waiting = snapshot(1, PrEvidence(merged=False, closed=False, mergeable="MERGEABLE",
                                     checks="PENDING", review="NONE"),
                       pending_checks=["ci/test"])
    ready = snapshot(2, PrEvidence(merged=False, closed=False, mergeable="MERGEABLE",
                                   checks="SUCCESS", review="APPROVED"))
    body = comment_body("r1", "delivery/T-1", {"api": waiting, "web": ready}, ["api", "web"])
    assert body is not None
    assert [line for line in body.splitlines() if line.startswith("Waiting for:")] == [
        "Waiting for: api (checks: ci/test)"]
