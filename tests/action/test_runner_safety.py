"""Untrusted text never becomes a workflow command on the runner (SPEC §13, §14): what an
issue, a PR, an agent or a failing script writes is printed inert (inside stop-commands
and neutralised), and delivery's own commands carry their data escaped. The tests read
the Action's whole stdout as GitHub's runner would (`runner_commands`)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from action_helpers import Actions, runner_commands
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.cli.workflow_commands import ActionOutput, neutralised
from delivery.testing.github import FakeGitHub

REPO = "octo/app"
HOSTILE = ("::set-output name=status::succeeded\n  ::warning file=app.py,line=1::boom\n"
           "::add-mask::x\n##[set-output name=status;]succeeded")

FAILING = """
digraph F {
  graph [goal="Deliver", inputs="ticket,notes?", defaults="notes=''"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  say [shape=parallelogram, script="printf '%s\\\\n' {{ notes }} >&2; exit 1"]
  start -> say -> exit
}
"""


FAILING_ALONE = """
digraph F {
  graph [goal="Deliver"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  say [shape=parallelogram,
       script="printf '%s\\n' '::set-output name=x::y' '##[set-output name=y;]z' >&2; exit 1"]
  start -> say -> exit
}
"""


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.create_repo(REPO, files={"app.py": "print('v1')\n"},
                           collaborators={"alice": "write"})
        yield server


def labeled(body: str) -> dict[str, Any]:
    return {"action": "labeled", "label": {"name": "delivery"},
            "issue": {"number": 7, "title": "::error::a hostile title", "body": body,
                      "html_url": f"https://github.com/{REPO}/issues/7"},
            "sender": {"login": "alice", "type": "User"}, "repository": {"full_name": REPO}}


def test_issue_text_in_a_failure_reason_reaches_stdout_inert(tmp_path: Path,
                                                            fake: FakeGitHub) -> None:
    env = fake.env()
    env.pop("GITHUB_TOKEN")
    actions = Actions(tmp_path, env, REPO)
    (actions.workspace / "flow.dot").write_text(FAILING, encoding="utf-8")
    job = actions.job("issues", labeled(HOSTILE), {"workflow": "flow.dot",
                                                   "github-token": fake.token})
    assert job.outputs["status"] == "failed", job.stdout + job.stderr
    assert "set-output name=status;]succeeded" in job.stdout  # printed, as text
    commands = runner_commands(job.stdout + "\n" + job.stderr)
    assert commands == [f"::add-mask::{fake.token}"], commands


def test_annotations_and_warnings_are_the_only_commands_and_their_data_is_escaped() -> None:
    out = io.StringIO()
    with ActionOutput(out) as output:
        print(HOSTILE, file=output)
        output.command("warning", "reason:\n::set-output name=x::y", file="a,b:c")
        output.raw_command("::error file=flow.dot,line=3::bad\n::set-output name=x::y")
        print(HOSTILE, file=output)
    assert runner_commands(out.getvalue()) == [
        "::warning file=a%2Cb%3Ac::reason:%0A::set-output name=x::y",
        "::error file=flow.dot,line=3::bad"]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list(":#[]%\r\n ab\u2063")), max_size=60))
def test_no_text_printed_through_the_action_output_is_ever_a_command(text: str) -> None:
    out = io.StringIO()
    with ActionOutput(out) as output:
        print(text, file=output)
        output.command("error", text)
    [error] = runner_commands(out.getvalue())
    assert error.startswith("::error::")
    assert runner_commands(neutralised(text)) == []  # inert even without stop-commands


def test_the_cli_on_an_actions_runner_prints_a_failing_scripts_text_inert(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from delivery.cli.main import main

    flow = tmp_path / "flow.dot"
    flow.write_text(FAILING_ALONE, encoding="utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(flow), "--workspace", str(tmp_path)], out=out, err=err)
    assert code == 1, err.getvalue()
    printed = out.getvalue() + err.getvalue()
    assert "set-output name=y;]z" in printed
    assert out.getvalue().startswith("::stop-commands::")
    assert runner_commands(printed) == []
