"""The state remote's token (an `http.extraHeader`) reaches git through the environment of
the one git process, never on its command line where other users could read it; and
what a run saves on the state ref holds no secret, not even one line of a multi-line one
or one printed trimmed of its padding."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from delivery.engine.runner import RunRequest, World, start_run
from delivery.errors import GitError
from delivery.git.runref import RunRef
from delivery.state.remote import RemoteState, StateRunStores

SECRET = "c2VjcmV0LXRva2VuLXZhbHVl"


def test_a_state_remote_token_never_reaches_git_argv(tmp_path: Path) -> None:
    state = tmp_path / "state.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(state)], check=True)
    real_git = shutil.which("git")
    assert real_git is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_log, env_log = tmp_path / "argv.log", tmp_path / "env.log"
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{argv_log}"\n'
                       f'env | grep "^GIT_CONFIG_VALUE" >> "{env_log}"\n'
                       f'exec "{real_git}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    environ = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    ref = RunRef(str(state), tmp_path / "scratch.git",
                 headers=(f"Authorization: Basic {SECRET}",), environ=environ)

    assert ref.list_runs() == {}

    assert argv_log.read_text(encoding="utf-8")  # the wrapper did run
    assert SECRET not in argv_log.read_text(encoding="utf-8")
    assert f"Authorization: Basic {SECRET}" in env_log.read_text(encoding="utf-8")


def test_a_failing_git_that_echoes_the_header_leaves_no_token_in_the_error(
        tmp_path: Path) -> None:
    real_git = shutil.which("git")
    assert real_git is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    # `init` (no header) works; any network call fails, printing what it was given
    wrapper.write_text('#!/bin/sh\nif [ -n "$GIT_CONFIG_VALUE_0" ]; then\n'
                       '  echo "fatal: refused $GIT_CONFIG_VALUE_0" >&2; exit 128\nfi\n'
                       f'exec "{real_git}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith("GIT_CONFIG")}
    environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    ref = RunRef(str(tmp_path / "state.git"), tmp_path / "scratch.git",
                 headers=(f"Authorization: Basic {SECRET}",), environ=environ)

    with pytest.raises(GitError) as caught:
        ref.list_runs()

    assert "fatal: refused" in str(caught.value)
    assert SECRET not in str(caught.value)


LEAKY = """
digraph L {
  graph [goal="leak"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  leak [shape=parallelogram, facts="said",
        script="echo $DEPLOY_KEY; echo $MY_SERVICE_PASSWORD >&2; \\
echo said=$MY_SERVICE_PASSWORD >> $DELIVERY_FACTS"]
  start -> leak -> exit
}
"""


def test_a_run_saved_on_the_state_ref_holds_no_line_of_a_secret_nor_a_trimmed_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [secrets.token_hex(10) for _ in range(3)]
    padded = secrets.token_hex(12)
    # printed unquoted: the lines joined by spaces, the padding dropped
    monkeypatch.setenv("DEPLOY_KEY", "-----BEGIN KEY-----\n" + "\n".join(lines) + "\n}\n")
    monkeypatch.setenv("MY_SERVICE_PASSWORD", f"\t{padded}  \n")
    state_repo = tmp_path / "state.git"
    subprocess.run(["git", "init", "-q", "--bare", str(state_repo)], check=True)
    (tmp_path / "ws").mkdir()
    flow = tmp_path / "leak.dot"
    flow.write_text(LEAKY, encoding="utf-8")
    state = RemoteState.open(str(state_repo), tmp_path / "cache", {})
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path / "ws"),
                        World(stores=StateRunStores(state.session("", "job-1"))))
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.context["said"].strip() == "***"  # `said= <value>`: word splitting

    stored = subprocess.run(["git", "-C", str(state_repo), "cat-file", "--batch-all-objects",
                             "--batch"], check=True, capture_output=True).stdout
    assert b"stdout.txt" in stored and b"checkpoint.json" in stored  # the run was pushed
    for canary in [*lines, padded]:
        assert canary.encode() not in stored, f"{canary} is on the state ref"
        for path in (tmp_path / "ws").rglob("*"):
            assert not path.is_file() or canary.encode() not in path.read_bytes(), path
