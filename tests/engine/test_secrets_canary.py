"""CANARY (SPEC §14): secrets from the environment and from an input never land anywhere a
run writes, prints or sends.

A workflow with an agent stage, script stages in a parallel section and a failing stage
runs with `GITHUB_TOKEN=ghp_<random>` and `MY_SERVICE_PASSWORD=<random>` in the
environment and both in an input; the agent echoes them back and the scripts print them
to stdout, stderr and the facts file. Then every file of the run directories and the
workspace, the output of `run --json`, `inspect` and `inspect --json`, and every message
the agent backend received are searched for them. The password is also given
multi-line (searched for line by line) and padded with whitespace (searched for trimmed).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import cli, reply, write_flow

from delivery.agents.base import AgentSession, SessionRequest, TurnSink
from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run
from delivery.testing import flow

ALNUM = string.ascii_letters + string.digits


class RecordingBackend:
    """A real backend (replay) that keeps every message exactly as it was sent to it."""

    name = "recording"

    def __init__(self, inner: ReplayBackend) -> None:
        self.inner = inner
        self.sent: list[str] = []

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> AgentSession:
        session = self.inner.open_session(node_id, workspace=workspace, request=request)
        backend = self

        class Recording:
            def send(self, message: str, sink: TurnSink | None = None) -> str:
                backend.sent.append(message)
                return session.send(message, sink)

        return Recording()

    def save_state(self) -> dict[str, Any]:
        return self.inner.save_state()

    def restore_state(self, state: Mapping[str, Any]) -> None:
        self.inner.restore_state(state)


FLOW = """
// a token pasted into a comment: the run's copy of the workflow must not keep it: {ghp}
digraph Canary {{
  graph [goal="Ship it", inputs="notes"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  plan [prompt="Plan with these notes: {{{{ notes }}}}", outputs="plan:text"]
  fan [shape=component]
  left [shape=parallelogram, facts="leak", forge_token=true,
        script="echo out $GITHUB_TOKEN; echo err $MY_SERVICE_PASSWORD >&2; \\
echo leak=$GITHUB_TOKEN >> $DELIVERY_FACTS"]
  right [shape=parallelogram, script="echo {{{{ plan }}}} {{{{ notes }}}}"]
  join [shape=tripleoctagon]
  boom [shape=parallelogram, script="echo failing with $MY_SERVICE_PASSWORD >&2; exit 3"]
  start -> plan -> fan
  fan -> left -> join
  fan -> right -> join
  join -> boom
  boom -> exit [condition="outcome=failed"]
  boom -> exit [condition="outcome=succeeded"]
}}
"""


def _files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def _password(kind: str) -> tuple[str, list[str]]:
    """A password of this kind and the texts of it that must never be written: a
    multi-line one is printed line by line (the scripts' unquoted `$VAR` joins its lines
    with spaces), a padded one trimmed (`echo` drops the padding), as GitHub's runner
    masks them."""
    if kind == "plain":
        password = secrets.token_hex(12)
        return password, [password]
    if kind == "multi-line":
        lines = [secrets.token_hex(10) for _ in range(3)]
        return "-----BEGIN KEY-----\n" + "\r\n".join(lines) + "\n}\n", lines
    padded = secrets.token_hex(12)
    return f"  {padded}\t \n", [padded]


@pytest.mark.parametrize("kind", ["plain", "multi-line", "padded"])
def test_canary_secrets_reach_no_file_output_or_agent_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    token = "ghp_" + "".join(secrets.choice(ALNUM) for _ in range(36))
    password, password_canaries = _password(kind)
    canaries = [token, token[4:], *password_canaries]
    monkeypatch.setenv("GITHUB_TOKEN", token)
    monkeypatch.setenv("MY_SERVICE_PASSWORD", password)
    notes = f"deploy with {token} and {password}"
    source, workspace = tmp_path / "source", tmp_path / "workspace"
    source.mkdir()
    workspace.mkdir()
    workflow = write_flow(source, FLOW.format(ghp=token))
    echoed = reply({"plan": f"use {password} then {token}"}, prose=f"I was told {notes}")
    replies_path = source / "replies.json"
    replies_path.write_text(json.dumps({"plan": [echoed]}), encoding="utf-8")

    # the library, with a recording backend passed in through World
    recording = RecordingBackend(ReplayBackend({"plan": [echoed]}))
    outcome = start_run(RunRequest(workflow=workflow, inputs={"notes": notes},
                                   workspace=workspace), World(agent=recording))
    assert outcome.status == "failed" and "exited with code 3" in outcome.failure_reason
    assert outcome.path == ["start", "plan", "fan", "left", "right", "join", "boom", "exit"]
    assert recording.sent and "Plan with these notes" in recording.sent[0]
    # the secrets were really there to leak: the scripts saw them
    assert (outcome.run_dir / "left" / "1" / "stdout.txt").read_text().startswith("out ***")

    # the command line: run --json, inspect, inspect --json
    code, run_out, run_err = cli("run", workflow, "--input", f"notes={notes}", "--agent",
                                 f"replay:{replies_path}", "--workspace", workspace, "--json")
    assert code == 1, run_err
    run_dir = json.loads(run_out)["run_dir"]
    printed = [run_out, run_err, *cli("inspect", run_dir)[1:], *cli("inspect", run_dir,
                                                                     "--json")[1:]]
    assert "context" in printed[-2]

    files = _files(workspace)
    assert any(path.name == "facts.env" for path in files)
    assert any(path.name == "checkpoint.json" for path in files)
    for canary in canaries:
        for path in files:
            assert canary.encode() not in path.read_bytes(), f"{canary!r} leaked into {path}"
        for text in printed:
            assert canary not in text
        for message in recording.sent:
            assert canary not in message


def test_script_output_is_redacted_across_long_lines_and_chunks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    password = secrets.token_hex(12)
    monkeypatch.setenv("MY_SERVICE_PASSWORD", password)
    # 600 KB on one line, the secret every ~10 KB, then a last line without a newline
    flow = write_flow(tmp_path, """
    digraph S {
      start [shape=Mdiamond]
      exit [shape=Msquare]
      noisy [shape=parallelogram,
             script="for i in $(seq 60); do printf '%10000s %s ' x $MY_SERVICE_PASSWORD; \\
done; echo; printf end-$MY_SERVICE_PASSWORD"]
      start -> noisy -> exit
    }
    """)
    outcome = start_run(RunRequest(workflow=flow, goal="g", workspace=tmp_path), World())
    stdout = (outcome.run_dir / "noisy" / "1" / "stdout.txt").read_text(encoding="utf-8")
    assert password not in stdout
    assert stdout.count("***") == 61 and stdout.endswith("end-***")


def test_a_script_leaving_a_background_child_ends_without_waiting_for_it(
        tmp_path: Path) -> None:
    # The child holds the script's stdout pipe (which the redactor reads) for 20 s.
    workflow = write_flow(tmp_path, flow("""
    bg [shape=parallelogram, script="(sleep 20; touch late) & echo $! > child.pid; echo now"]
    start -> bg -> exit
    """, goal=None, name="B"))
    try:
        outcome = start_run(RunRequest(workflow=workflow, goal="g", workspace=tmp_path),
                            World())
        assert outcome.status == "succeeded"
        assert not (tmp_path / "late").exists()  # the run did not wait for the child
        assert (outcome.run_dir / "bg" / "1" / "stdout.txt").read_text() == "now\n"
    finally:
        pid = (tmp_path / "child.pid").read_text().strip()
        if pid:
            os.kill(int(pid), signal.SIGKILL)
