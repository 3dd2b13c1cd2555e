"""GitHub's limits pause a run, they do not fail it (SPEC §7.1, §12; issue 37 item 2),
through `delivery run`: GitHub answers a PR's creation with a `Retry-After` longer than the
stage's patience; the run exits 3, `paused` with reason `rate_limit` and the UTC time it
may go on, which `delivery runs` and `inspect` show; `delivery resume` then publishes the
rest with no PR opened twice."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from engine_helpers import cli

from delivery.testing import flow
from delivery.testing.github import FakeGitHub, faults

FOLDERS = ("web", "api", "docs")
UTC_TIME = re.compile(r"may go on at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")


def publish_flow() -> str:
    return flow(f"""
    add [type=worktree_add]
    change [shape=parallelogram,
            script="for f in {' '.join(FOLDERS)}; do echo ok > $f/app.py; done"]
    ship [type=publish]
    look [type=probe, probe="pr"]
    start -> add -> change -> ship -> look -> exit
    """, goal="Say hello", graph=f'inputs="ticket", folders="{",".join(FOLDERS)}"', name="R")


def created_pulls(github: FakeGitHub, name: str) -> int:
    return sum(1 for r in github.requests if r.method == "POST" and r.status == 201
               and r.path == f"/api/v3/repos/octo/{name}/pulls")


def test_a_long_retry_after_pauses_the_run_which_resumes_without_opening_a_pr_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:
        for name, value in github.env().items():
            monkeypatch.setenv(name, value)
        for name in FOLDERS:
            github.create_repo(f"octo/{name}", files={"app.py": "print(0)\n"})
        github.inject(faults.secondary_rate_limit(900, method="POST",
                                                  path="/api/v3/repos/octo/api/pulls"))
        workspace = tmp_path / "ws"
        workspace.mkdir()
        (workspace / "flow.dot").write_text(publish_flow())
        code, out, err = cli("run", workspace / "flow.dot", "--input", "ticket=T-9",
                             "--workspace", workspace, "--cache", tmp_path / "cache", "--json",
                             *[arg for name in FOLDERS
                               for arg in ("--repo", f"{name}=octo/{name}")])
        assert code == 3, err
        report = json.loads(out)
        assert (report["status"], report["reason"]) == ("paused", "rate_limit")
        assert "secondary rate limit" in report["failure_reason"]
        when = UTC_TIME.search(report["failure_reason"])
        assert when is not None, report["failure_reason"]

        code, out, _ = cli("runs", "--workspace", workspace, "--json")
        listed = json.loads(out)
        assert [(r["status"], r["reason"], r["until"]) for r in listed] == [
            ("paused", "rate_limit", when.group(1))]
        code, out, _ = cli("runs", "--workspace", workspace)
        assert f"paused: rate_limit until {when.group(1)}" in out

        run_dir = Path(report["run_dir"])
        code, out, _ = cli("inspect", run_dir, "--json")
        shown = json.loads(out)
        assert (shown["reason"], shown["until"]) == ("rate_limit", when.group(1))

        code, out, err = cli("resume", run_dir, "--json")
        assert code == 0, err
        assert json.loads(out)["status"] == "succeeded"
        assert [created_pulls(github, name) for name in FOLDERS] == [1, 1, 1]
        code, out, _ = cli("runs", "--workspace", workspace, "--json")
        assert [(r["status"], r["reason"]) for r in json.loads(out)] == [("succeeded", "")]


def test_a_probe_answered_with_the_spent_primary_limit_pauses_until_the_reset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's GraphQL read, not only a write: GitHub's `RATE_LIMITED` with the pool's
    reset an hour away pauses the run (it does not fail the probe's folders); once the
    hour is over, `delivery resume` probes again and the run goes on."""
    branch = "delivery/t-9"
    with FakeGitHub() as github:
        for name, value in github.env().items():
            monkeypatch.setenv(name, value)
        for name in FOLDERS:
            github.create_repo(f"octo/{name}", files={"app.py": "print(0)\n"})
            github.push_files(f"octo/{name}", branch, {"app.py": "print(1)\n"})
            github.open_pull(f"octo/{name}", branch)
        limits = github.enforce_primary_limits(graphql_per_hour=0)
        (tmp_path / "flow.dot").write_text(flow(
            'look [type=probe, probe="pr"]\nstart -> look -> exit', goal="Watch",
            graph=f'inputs="ticket", folders="{",".join(FOLDERS)}"', name="P"))
        code, out, err = cli("run", tmp_path / "flow.dot", "--input", "ticket=T-9",
                             "--branch", branch, "--workspace", tmp_path, "--json",
                             *[arg for name in FOLDERS
                               for arg in ("--repo", f"{name}=octo/{name}")])
        assert code == 3, err
        report = json.loads(out)
        assert (report["status"], report["reason"]) == ("paused", "rate_limit")
        assert "RATE_LIMITED" in report["failure_reason"]
        when = UTC_TIME.search(report["failure_reason"])
        assert when is not None and limits.refused == 1
        code, out, _ = cli("runs", "--workspace", tmp_path)
        assert f"paused: rate_limit until {when.group(1)}" in out

        github.primary_limits = None  # the hour is over
        code, out, err = cli("resume", report["run_dir"], "--json")
        assert code == 0, err
        resumed = json.loads(out)
        assert resumed["status"] == "succeeded"
        assert resumed["context"]["web.pr.state"] == "WAITING"


def test_delivery_probe_on_a_spent_limit_says_when_to_try_again_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:
        for name, value in github.env().items():
            monkeypatch.setenv(name, value)
        github.create_repo("octo/web")
        github.enforce_primary_limits(graphql_per_hour=0)
        code, out, err = cli("probe", "--repo", "web=octo/web#1")
        assert code == 1 and out == ""
        [line] = err.splitlines()
        assert line.startswith("delivery probe: GitHub's rate limit: ")
        assert re.search(r"try again at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", line), line
