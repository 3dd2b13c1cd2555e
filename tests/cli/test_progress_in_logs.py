"""Progress where no terminal is (SPEC §12, issue 39): the `delivery` executable with its
stderr redirected to a FILE, as in a CI log. One line per stage as it ends, a line for
every retry (a stage's or a GitHub request's: attempt n of m, next try in N s), nothing
with --quiet but errors, and stdout left to the report (--json stays one object)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from logged_cli_helpers import delivery

from delivery.testing import flow
from delivery.testing.github import FakeGitHub, Fault

# `flaky` fails its first attempt (it leaves a mark in the workspace) and is retried once.
FLOW = flow("""
plan  [type=prompt, prompt="Plan $goal", outputs="plan:text"]
flaky [type=script, max_retries=1,
       script="if [ -e tried ]; then echo ok; else touch tried; exit 1; fi"]
build [type=script, script="echo built"]
start -> plan -> flaky -> build -> exit
""", goal="Show progress", name="Progress")
REPLIES = {"plan": ['Planned.\n{"context_updates": {"plan": "do it"}}']}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "flow.dot").write_text(FLOW, encoding="utf-8")
    (tmp_path / "replies.json").write_text(json.dumps(REPLIES), encoding="utf-8")
    return tmp_path


def run_args(workspace: Path, *extra: str) -> list[str]:
    return ["run", "flow.dot", "--agent", "replay:replies.json",
            "--run-dir", str(workspace / "run"), *extra]


def test_a_log_file_gets_one_line_per_stage_as_it_ends_and_the_json_stays_clean(
        workspace: Path) -> None:
    code, stdout, log = delivery(workspace, *run_args(workspace, "--json"))
    assert code == 0, log
    assert json.loads(stdout)["status"] == "succeeded"  # progress is not in the report
    lines = log.splitlines()
    ended = [line for line in lines if re.fullmatch(r"  [✓✗] \w+ \w+ in \d+\.\ds.*", line)]
    assert [line.split()[1] for line in ended] == ["start", "plan", "flaky", "flaky",
                                                   "build"], log
    assert re.search(r"flaky failed in \d+\.\ds — script exited with code 1", log), log


def test_a_stage_retry_says_which_attempt_of_how_many_and_when(workspace: Path) -> None:
    code, _, log = delivery(workspace, *run_args(workspace))
    assert code == 0, log
    assert re.search(r"↻ flaky: retrying \(attempt 2 of 2\) in \d+\.\ds", log), log


def test_quiet_prints_no_progress(workspace: Path) -> None:
    code, stdout, log = delivery(workspace, *run_args(workspace, "--quiet"))
    assert code == 0
    assert log == ""
    assert stdout.startswith("run ") and "succeeded" in stdout.splitlines()[0]


def test_quiet_still_prints_errors(workspace: Path) -> None:
    code, stdout, log = delivery(workspace, *run_args(workspace, "--quiet", "--input",
                                                      "nope=1"))
    assert (code, stdout) == (2, "")
    assert log.count("\n") == 1 and "input 'nope'" in log


def test_a_resume_logs_the_stages_it_runs(workspace: Path) -> None:
    gated = flow("""
    approve [shape=hexagon, label="Ship?"]
    build [type=script, script="echo built"]
    start -> approve
    approve -> build [label="yes"]
    approve -> exit [label="no"]
    build -> exit
    """, name="Gated")
    (workspace / "gated.dot").write_text(gated, encoding="utf-8")
    code, _, _ = delivery(workspace, "run", "gated.dot", "--gates", "pause", "--run-dir",
                          str(workspace / "gated"), "--quiet")
    assert code == 3
    code, _, log = delivery(workspace, "resume", str(workspace / "gated"), "--answer",
                            "approve=yes")
    assert code == 0, log
    ended = [line.split()[1] for line in log.splitlines() if line.startswith("  ✓ ")]
    assert ended == ["approve", "build"], log


@pytest.fixture
def github(fake_github_env: FakeGitHub, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fake_github_env.create_repo("octo/web", files={"app.py": "print(0)\n"})
    fake_github_env.clear_requests()
    return fake_github_env


def test_a_github_request_retried_after_a_502_says_so(github: FakeGitHub,
                                                      tmp_path: Path) -> None:
    github.inject(Fault("status", method="POST", path="/api/graphql", status=502))
    code, stdout, log = delivery(tmp_path, "preflight", "--repo", "web=octo/web")
    assert code == 0, log
    assert stdout.rstrip().endswith("ok")
    assert re.fullmatch(r"  ↻ GitHub: check what the token may do \(octo/web\): HTTP 502; "
                        r"retrying \(attempt 2 of 6\), next try in 1s\n", log), log


def test_a_refused_token_is_not_retried_and_fails_at_once(github: FakeGitHub,
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    started = time.monotonic()
    code, stdout, log = delivery(tmp_path, "preflight", "--repo", "web=octo/web")
    assert time.monotonic() - started < 20  # a retried 401 waited 31 s
    assert (code, stdout) == (2, "")
    assert log.count("\n") == 1 and "HTTP 401" in log and "check GITHUB_TOKEN" in log
    assert "retrying" not in log
    assert len([r for r in github.requests if r.status == 401]) == 1


FOREACH = flow("""
check [type=script, foreach="folders", script="test $(basename $(pwd)) != api"]
start -> check -> exit
""", goal="Check each folder", name="Folders")


def test_a_foreach_stage_logs_each_folder_as_it_ends(tmp_path: Path) -> None:
    (tmp_path / "flow.dot").write_text(FOREACH, encoding="utf-8")
    repos: list[str] = []
    for name in ("web", "api"):
        (tmp_path / name).mkdir()
        repos += ["--repo", f"{name}={tmp_path / name}"]
    code, _, log = delivery(tmp_path, "run", "flow.dot", *repos, "--run-dir",
                            str(tmp_path / "run"))
    assert code == 0, log
    assert re.search(r"    ✓ check@web succeeded in \d+\.\ds\n", log), log
    assert re.search(r"    ✗ check@api failed in \d+\.\ds — script exited with code 1", log)
    assert re.search(r"  ✓ check partial_success in \d+\.\ds — 1 of 2 folders failed", log)
