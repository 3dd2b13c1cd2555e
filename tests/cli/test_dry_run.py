"""`delivery run --dry-run` (SPEC §12): every stage up to the first one that writes to a
forge runs, then the run pauses (reason `dry_run`, exit 3) showing per folder what would be
published — files, insertions, deletions on stderr, the diffs in `--json` — and nothing
has reached the forge; `delivery resume RUN` then publishes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from github_helpers import TWO_REPO_FLOW, TWO_REPOS, open_pr

from delivery.testing import flow
from delivery.testing.cli import CliResult, invoke
from delivery.testing.github import FakeGitHub
from delivery.testing.github.gitops import read_file

REPO_OPTIONS = [arg for folder, repo in TWO_REPOS.items() for arg in ("--repo", f"{folder}={repo}")]


def start(tmp_path: Path, fake: FakeGitHub, dot: str, *options: str) -> CliResult:
    for repository in TWO_REPOS.values():
        if fake.state.repo(repository) is None:
            fake.create_repo(repository, files={"app.py": "print(0)\n"})
    workflow = tmp_path / "flow.dot"
    workflow.write_text(dot)
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    result = invoke("run", workflow, "--workspace", workspace, "--run-dir", tmp_path / "run",
                    "--cache", tmp_path / "cache", "--input", "ticket=T-1", "--json",
                    "--dry-run", *options, cwd=tmp_path)
    assert "Traceback" not in result.err
    return result


def outcome(result: CliResult) -> dict[str, Any]:
    shown = json.loads(result.out)
    assert isinstance(shown, dict), result.err
    return shown


def test_dry_run_pauses_before_the_first_publish_having_written_nothing(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    result = start(tmp_path, fake_github_env, TWO_REPO_FLOW, *REPO_OPTIONS)
    shown = outcome(result)
    assert result.code == 3, result.err
    assert shown["status"] == "paused" and shown["reason"] == "dry_run"
    assert shown["path"] == ["start", "add", "change"]  # the publish did not run
    assert "'ship'" in shown["failure_reason"]
    assert fake_github_env.write_requests() == []  # no push, PR, comment or status
    assert "+print(1)" in shown["diffs"]["web"] and "-print(0)" in shown["diffs"]["web"]
    assert "+print(2)" in shown["diffs"]["api"]
    assert "web: 1 file changed, 1 insertion(+), 1 deletion(-)" in result.err
    assert "api: 1 file changed, 1 insertion(+), 1 deletion(-)" in result.err
    assert f"next: delivery resume {tmp_path / 'run'} publishes it" in result.err


def test_resume_after_a_dry_run_publishes_what_was_shown(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    paused = start(tmp_path, fake_github_env, TWO_REPO_FLOW, *REPO_OPTIONS)
    assert paused.code == 3, paused.err
    code, out, err = invoke("resume", tmp_path / "run", "--json", cwd=tmp_path)
    assert code == 0, err
    assert json.loads(out)["status"] == "succeeded"  # the dry run is not kept
    for repository in TWO_REPOS.values():
        pr = fake_github_env.pull(repository, 1)
        assert pr.merged, repository  # published, probed and merged on the resume
    web = fake_github_env.repository("octo/web")
    assert read_file(web.path, "main", "app.py") == "print(1)\n"


TOKENED = flow("""
  add [type=worktree_add]
  change [shape=parallelogram, script="printf 'print(1)\\\\n' > web/app.py"]
  announce [shape=parallelogram, forge_token=true, script="touch announced"]
  start -> add -> change -> announce -> exit
""", graph={"folders": "web", "inputs": "ticket"})


def test_dry_run_pauses_before_a_script_given_the_forge_token(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    result = start(tmp_path, fake_github_env, TOKENED, "--repo", "web=octo/web")
    shown = outcome(result)
    assert result.code == 3, result.err
    assert shown["reason"] == "dry_run" and shown["path"][-1] == "change"
    assert not (tmp_path / "ws" / "announced").exists()
    assert "+print(1)" in shown["diffs"]["web"]


OBSERVE = flow("""
  add [type=worktree_add]
  look [type=probe, probe="pr"]
  start -> add -> look -> exit
""", graph={"folders": "web", "inputs": "ticket"})


def test_dry_run_pauses_before_a_probe_that_would_write_the_change_set_status(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/web", files={"app.py": "print(0)\n"})
    open_pr(fake_github_env, "octo/web", "delivery/T-1")  # a PR the probe would mark
    fake_github_env.clear_requests()
    result = start(tmp_path, fake_github_env, OBSERVE, "--repo", "web=octo/web",
                   "--branch", "delivery/T-1")
    shown = outcome(result)
    assert result.code == 3, result.err
    assert shown["reason"] == "dry_run" and shown["path"][-1] == "add"
    assert fake_github_env.write_requests() == []


def test_dry_run_with_a_state_repository_is_refused(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    code, out, err = start(tmp_path, fake_github_env, TWO_REPO_FLOW, *REPO_OPTIONS,
                           "--state", "git:octo/state")
    assert code == 2 and out == ""
    assert "refused: --dry-run" in err and "--state" in err
    assert fake_github_env.write_requests() == []


SECTION = flow("""
  add [type=worktree_add]
  fork [shape=component]
  change [shape=parallelogram, script="printf 'print(1)\\\\n' > web/app.py"]
  ship [type=publish]
  join [shape=tripleoctagon]
  start -> add -> fork
  fork -> change
  fork -> ship
  change -> join
  ship -> join
  join -> exit
""", graph={"folders": "web", "inputs": "ticket"})


def test_dry_run_pauses_before_a_parallel_section_that_holds_a_publish(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    result = start(tmp_path, fake_github_env, SECTION, "--repo", "web=octo/web")
    shown = outcome(result)
    assert result.code == 3, result.err
    assert shown["reason"] == "dry_run" and shown["path"] == ["start", "add"]
    assert "'fork'" in shown["failure_reason"]
    assert fake_github_env.write_requests() == []
