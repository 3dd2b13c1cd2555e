"""`delivery resume RUN` takes everything the run started with from run.json — the agent
profile, the folders and their repositories, the forge with its check commands, the
branch and the clone cache — so it needs no option again, from any directory; GitHub's
token comes from the environment again and is refused by name when it is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli
from git_helpers import git, make_remote

from delivery.testing import flow
from delivery.testing.github import FakeGitHub

FLOW = flow("""
add [type=worktree_add]
change [prompt="Change it", outputs="summary:text"]
write [type=script, script="printf 'hello\\\\n' > api/hello.txt"]
gate [shape=hexagon, label="Publish?"]
ship [type=publish]
look [type=probe, probe="pr"]
land [type=merge]
start -> add -> change -> write -> gate
gate -> ship [label="yes"]
ship -> look -> land -> exit
""", goal="Say hello", graph='inputs="ticket"')


def test_a_paused_run_resumes_with_its_agent_forge_checks_branch_and_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = make_remote(tmp_path, "api", {"app.txt": "api\n"})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "flow.dot").write_text(FLOW)
    (workspace / "replies.json").write_text(json.dumps(
        {"change": ['{"context_updates": {"summary": "said hello"}}']}))
    monkeypatch.chdir(workspace)
    code, out, err = cli("run", "flow.dot", "--input", "ticket=https://x.example/T-3",
                         "--repo", f"api={remote}", "--check", "api=test -f hello.txt",
                         "--agent", "replay:replies.json", "--branch", "feature/hello",
                         "--cache", tmp_path / "cache", "--run-dir", tmp_path / "run",
                         "--gates", "pause")
    assert code == 3, out + err
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (info["agent"], info["forge"], info["branch"]) == \
        ("replay:replies.json", "local", "feature/hello")
    assert info["checks"] == {"api": "test -f hello.txt"}
    monkeypatch.chdir(tmp_path)  # elsewhere, and no option but the answer
    code, out, err = cli("resume", tmp_path / "run", "--answer", "gate=yes", "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["context"]["api.pr.state"] == "WAITING"  # the check ran and passed
    assert report["context"]["api.pr.ready"] is True
    assert git(remote, "show", "main:hello.txt") == "hello"
    assert git(remote, "log", "-1", "--format=%s", "feature/hello") == "Say hello"
    assert (tmp_path / "cache" / "repos").is_dir()  # the cache the run started with


def test_a_github_resume_without_a_token_is_refused_and_stays_resumable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:
        github.create_repo("octo/api", files={"app.txt": "api\n"})
        for name, value in github.env().items():
            monkeypatch.setenv(name, value)
        workspace = tmp_path / "ws"
        workspace.mkdir()
        (workspace / "flow.dot").write_text(FLOW)
        (workspace / "replies.json").write_text(json.dumps(
            {"change": ['{"context_updates": {"summary": "said hello"}}']}))
        monkeypatch.chdir(workspace)
        code, out, err = cli("run", "flow.dot", "--input", "ticket=https://x.example/T-4",
                             "--repo", "api=octo/api", "--agent", "replay:replies.json",
                             "--cache", tmp_path / "cache", "--run-dir", tmp_path / "run",
                             "--gates", "pause")
        assert code == 3, out + err
        assert github.token not in (tmp_path / "run" / "run.json").read_text()
        monkeypatch.delenv("GITHUB_TOKEN")
        code, out, err = cli("resume", tmp_path / "run", "--answer", "gate=yes")
        assert code == 2 and "GITHUB_TOKEN" in err and "Traceback" not in err
        monkeypatch.setenv("GITHUB_TOKEN", github.token)
        code, out, err = cli("resume", tmp_path / "run", "--answer", "gate=yes")
        assert code == 0, out + err
        assert github.pull("octo/api", 1).merged


ADD_ONLY = flow("""
add [type=worktree_add]
start -> add -> exit
""", graph='inputs="ticket"')


def test_max_parallel_is_kept_in_run_json_for_the_resumes(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "api", {"app.txt": "api\n"})
    (tmp_path / "flow.dot").write_text(ADD_ONLY)
    code, out, err = cli("run", tmp_path / "flow.dot", "--input", "ticket=T-5",
                         "--repo", f"api={remote}", "--cache", tmp_path / "cache",
                         "--workspace", tmp_path, "--run-dir", tmp_path / "run",
                         "--max-parallel", "3")
    assert code == 0, out + err
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["max_parallel"] == 3


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_a_max_parallel_below_one_is_refused_in_one_line_before_the_run(
        tmp_path: Path, value: str) -> None:
    (tmp_path / "flow.dot").write_text(ADD_ONLY)
    code, out, err = cli("run", tmp_path / "flow.dot", "--input", "ticket=T-6",
                         "--workspace", tmp_path, f"--max-parallel={value}")
    assert code == 2, out + err
    assert err.startswith(f"delivery run: refused: --max-parallel: {value!r} is not a whole "
                          "number of 1 or more")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / ".delivery").exists()
