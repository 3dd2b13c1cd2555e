"""What `delivery run` says at its end: the PR table also when stdout is a pipe, and after
a failure what to do next — including when another ticket's worktrees hold the folders."""

from __future__ import annotations

import re
from pathlib import Path

from git_helpers import make_remote

from delivery.testing import flow
from delivery.testing.cli import invoke

FLOW = flow("""
add    [type=worktree_add]
change [shape=parallelogram, script="printf 'hello\\\\n' > web/hello.txt; %s"]
ship   [type=publish]
look   [type=probe]
start -> add -> change -> ship -> look -> exit
""", goal="Say hello", graph='inputs="ticket"')


def _run(tmp_path: Path, ticket: str, script_end: str = "true") -> tuple[int, str, str]:
    flow = tmp_path / "flow.dot"
    flow.write_text(FLOW % script_end)
    remotes = tmp_path / "remotes"
    if not remotes.exists():
        remotes.mkdir()
        make_remote(remotes, "web")
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return invoke("run", flow, "--input", f"ticket=https://tracker.example/{ticket}",
                  "--repo", f"web={remotes / 'web.git'}", "--workspace", workspace,
                  "--cache", tmp_path / "cache")


def test_the_pr_table_is_printed_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    code, out, err = _run(tmp_path, "T-1")
    assert code == 0, out + err
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split() == ["folder", "PR",
                                                                        "state", "link"])
    assert lines[header + 1].split()[:3] == ["web", "#1", "WAITING"]


def test_a_failed_run_says_what_to_do_next(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, "T-1", "exit 3")
    assert code == 1
    assert "run directory: " in out
    assert "  next: delivery inspect " in out
    assert "the same delivery run again goes on from the run's branch" in out


def test_another_tickets_worktree_in_the_workspace_is_named_with_how_to_free_it(
        tmp_path: Path) -> None:
    assert _run(tmp_path, "T-1", "exit 3")[0] == 1  # leaves ws/web on delivery/t-1-<hash>
    code, out, _ = _run(tmp_path, "T-2")
    assert code == 1
    folder = tmp_path / "ws" / "web"
    assert re.search(r"is another run's worktree \(on delivery/t-1-[0-9a-f]{6}\), not this "
                     r"run's on delivery/t-2-[0-9a-f]{6}", out), out
    assert f"git -C {folder} worktree remove {folder}" in out
    assert "or run this ticket in its own --workspace" in out
