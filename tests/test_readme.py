"""The documented code works as written, read out of the pages with a Markdown parser: the
library example of docs/library.md runs (from a copy of the repository's shipped examples),
and docs/workflows.md's campaign command runs on four local repositories. The README's walk
on one's own repositories is tests/cli/test_newcomer_campaign.py."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from git_helpers import git, make_remote
from markdown_it import MarkdownIt

from delivery.engine.runner import RunRequest, start_run
from delivery.errors import RunRefused
from delivery.testing.cli import invoke

ROOT = Path(__file__).resolve().parents[1]


def code_blocks(language: str, page: str) -> list[str]:
    tokens = MarkdownIt().parse((ROOT / page).read_text(encoding="utf-8"))
    return [t.content for t in tokens if t.type == "fence" and t.info.strip() == language]


def library_example() -> str:
    (block,) = [b for b in code_blocks("python", "docs/library.md") if "start_run(" in b]
    return block


def test_the_library_example_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")  # the run writes beside them
    printed = io.StringIO()
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(library_example(), "docs/library.md", "exec"), {})
    finally:
        os.chdir(before)
    status, _, path = printed.getvalue().strip().partition(" ")
    assert status == "succeeded"
    assert path.startswith("['start', 'plan'") and path.endswith("'exit']")


def test_a_library_refusal_names_the_requests_fields_not_cli_options(tmp_path: Path) -> None:
    with pytest.raises(RunRefused) as refused:
        start_run(RunRequest(workflow=ROOT / "examples" / "review" / "review.dot",
                             workspace=tmp_path))
    assert "RunRequest(inputs={'ticket': ...})" in str(refused.value)
    assert "--input" not in str(refused.value)


def test_the_command_line_refusal_names_its_option(tmp_path: Path) -> None:
    code, _, err = invoke("run", ROOT / "examples" / "review" / "review.dot",
                          "--workspace", tmp_path)
    assert code == 2
    assert "pass --input ticket=VALUE" in err


CAMPAIGN_AGENT = """import json, pathlib, sys
prompt = sys.stdin.read()
if "decide what change it asks for" in prompt:
    print(json.dumps({"context_updates": {"scope": {"type": "goal", "goal": "value is 2"}}}))
else:  # implement, in the folder's worktree (its current directory)
    pathlib.Path("lib.py").write_text("VALUE = 2\\n")
    pathlib.Path("test_lib.py").write_text(
        "import unittest\\nimport lib\\n\\n\\nclass T(unittest.TestCase):\\n"
        "    def test_value(self):\\n        self.assertEqual(lib.VALUE, 2)\\n")
    print(json.dumps({"context_updates": {"summary": "VALUE is 2"}}))
"""


def campaign_command() -> list[str]:
    (block,) = [b for b in code_blocks("sh", "docs/workflows.md")
                if "workflows/campaign.dot" in b]
    return shlex.split(block.replace("\\\n", " "))


def test_the_documented_campaign_command_runs_as_written_on_four_local_repositories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = campaign_command()
    assert argv[:3] == ["delivery", "run", "workflows/campaign.dot"]
    checkout = tmp_path / "delivery"  # the command runs from a checkout of this repository
    shutil.copytree(ROOT / "workflows", checkout / "workflows")
    repos = [value.split("=", 1)[0] for option, value in itertools.pairwise(argv)
             if option == "--repo"]
    assert repos == ["a", "b", "c", "d"]
    for name in repos:
        make_remote(tmp_path, name, {"lib.py": "VALUE = 1\n"})
    (tmp_path / "agent.py").write_text(CAMPAIGN_AGENT, encoding="utf-8")
    # the one change: a scripted agent (as a command) instead of the reader's profile
    agent = argv.index("--agent")
    argv[agent + 1] = f"command:{shlex.quote(sys.executable)} {tmp_path / 'agent.py'}"
    monkeypatch.chdir(checkout)
    code, out, err = invoke(*argv[1:])
    assert code == 0, out + err
    for name in repos:
        assert git(tmp_path / f"{name}.git", "show", "main:lib.py") == "VALUE = 2", name
    (run,) = (checkout / ".delivery" / "runs").iterdir()
    report = (run / "report" / "1" / "stdout.txt").read_text(encoding="utf-8")
    assert "merged (4): a b c d" in report


def readme_action_init() -> list[str]:
    """The `delivery action init …` command of the README's "The Action in five steps"."""
    tokens = MarkdownIt().parse((ROOT / "README.md").read_text(encoding="utf-8"))
    commands = [c.content for t in tokens for c in t.children or []
                if c.type == "code_inline" and c.content.startswith("delivery action init ")]
    assert len(commands) == 1, commands
    return shlex.split(commands[0])[1:]


def test_the_readmes_action_init_runs_on_the_list_it_says_to_write(tmp_path: Path) -> None:
    listed = tmp_path / ".github" / "delivery-repos"
    listed.parent.mkdir()
    listed.write_text("octo/api\nocto/web\n", encoding="utf-8")  # step 1's list
    result = invoke(*readme_action_init(), cwd=tmp_path)
    assert result.code == 0, result.err
    assert listed.read_text(encoding="utf-8") == "api=octo/api\nweb=octo/web\n"
    relay = tmp_path / ".github" / "workflows" / "relay" / "delivery.yml"
    assert relay.exists()  # the file step 5 says to copy
    assert str(relay.relative_to(tmp_path)) in (ROOT / "README.md").read_text(encoding="utf-8")
