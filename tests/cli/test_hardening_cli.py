"""What a careless user meets on the command line (SPEC §12, §14): replies and replay files
that cannot be stored or parsed, repeated options, GitHub annotations of odd file names,
options without help."""

from __future__ import annotations

import argparse
from pathlib import Path

from bounded import run_cli
from engine_helpers import cli, reply, run_flow, stage_file, write_flow

from delivery.cli.main import _build_parser
from delivery.lang.diagnostics import Diagnostic
from delivery.testing import flow

FLOW = flow("""
plan [prompt="Plan {{ ticket }}", outputs="plan:text"]
build [prompt="Build {{ plan }}"]
check [shape=parallelogram, script="echo {{ plan }}"]
start -> plan -> build -> check -> exit
""", goal="Ship it", graph='inputs="ticket"')


def test_replies_with_nul_or_lone_surrogates_are_stored_safely_and_the_run_goes_on(
        tmp_path: Path) -> None:
    bad = "a\x00b\ud800c"
    ran = run_flow(tmp_path, FLOW, inputs={"ticket": "T-1"},
                   replies={"plan": [reply({"plan": bad}, prose=f"Plan: {bad}")],
                            "build": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["plan"] == "a\ufffdb\ufffdc"
    assert "\x00" not in ran.context["response.plan"]
    assert "Build a\ufffdb\ufffdc" in ran.prompts_of("build")[0]
    response = stage_file(ran.outcome, "plan", "response.md").read_text(encoding="utf-8")
    assert "a\ufffdb\ufffdc" in response
    # a later script gets the value on its command line (a NUL there was an internal error)
    assert stage_file(ran.outcome, "check", "stdout.txt").read_text() == "a\ufffdb\ufffdc\n"


def test_replay_file_with_100k_nested_arrays_is_refused_in_one_line(tmp_path: Path) -> None:
    workflow = write_flow(tmp_path, FLOW)
    replies = tmp_path / "replies.json"
    replies.write_text('{"plan": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    done = run_cli("run", workflow, "--input", "ticket=T", "--agent", f"replay:{replies}",
                   "--workspace", tmp_path)
    assert done.code == 2 and done.one_line_error, done.stderr
    assert "nest too deeply at line 1 column" in done.stderr


def test_repeated_input_is_refused_naming_the_key(tmp_path: Path) -> None:
    workflow = write_flow(tmp_path, FLOW)
    code, out, err = cli("run", workflow, "--input", "ticket=T-1", "--input", "ticket=T-2",
                         "--agent", "replay:none.json", "--workspace", tmp_path)
    assert code == 2 and out == ""
    assert "--input ticket=: is given twice" in err
    assert not (tmp_path / ".delivery").exists()


def test_github_format_escapes_percent_newlines_and_property_separators() -> None:
    diagnostic = Diagnostic("syntax", "error", "100% wrong\r\nsee: a, b", "dir,x/a:b%\n.dot",
                            3, 4, fix="fix it")
    assert diagnostic.format_github() == (
        "::error file=dir%2Cx/a%3Ab%25%0A.dot,line=3,col=4::"
        "[syntax] 100%25 wrong%0D%0Asee: a, b Fix: fix it")


def test_github_format_of_a_real_file_with_a_percent_in_its_name(tmp_path: Path) -> None:
    path = tmp_path / "50%,off.dot"
    path.write_text("digraph { start -> }", encoding="utf-8")
    code, out, _ = cli("validate", path, "--format", "github")
    assert code == 1
    assert out.startswith(f"::error file={str(tmp_path).replace(':', '%3A')}/50%25%2Coff.dot,")


def _options(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.Action]]:
    found: list[tuple[str, argparse.Action]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _options(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((path, action))
    return found


def test_every_cli_option_and_argument_has_help_text() -> None:
    missing = [f"{path} {action.option_strings or action.dest}"
               for path, action in _options(_build_parser(), "delivery")
               if not action.help or action.help == argparse.SUPPRESS]
    assert missing == []


def test_a_workflow_whose_secret_cannot_be_masked_without_breaking_it_is_refused(
        tmp_path: Path) -> None:
    token = "ghp_" + "A1b2C3d4E5" * 4
    workflow = write_flow(tmp_path, FLOW.replace('goal="Ship it"', f"goal={token}"))
    replies = tmp_path / "replies.json"
    replies.write_text('{"plan": []}', encoding="utf-8")
    code, out, err = cli("run", workflow, "--input", "ticket=T", "--agent", f"replay:{replies}",
                         "--workspace", tmp_path)
    assert code == 2 and out == ""
    assert "holds a secret value" in err and token not in err
    assert not (tmp_path / ".delivery").exists()  # refused before any run directory
