"""The README's code blocks work as written: its library example runs (from a copy of the
repository's shipped examples), read out of the README with a Markdown parser."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from delivery.engine.runner import RunRequest, start_run
from delivery.errors import RunRefused
from delivery.testing.cli import invoke

ROOT = Path(__file__).resolve().parents[1]


def code_blocks(language: str) -> list[str]:
    tokens = MarkdownIt().parse((ROOT / "README.md").read_text(encoding="utf-8"))
    return [t.content for t in tokens if t.type == "fence" and t.info.strip() == language]


def library_example() -> str:
    (block,) = [b for b in code_blocks("python") if "start_run(" in b]
    return block


def test_the_library_example_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")  # the run writes beside them
    printed = io.StringIO()
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(library_example(), "README.md", "exec"), {})
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
