"""The README's "On your repositories" walked as a newcomer walks it (issue 39's acceptance):
every command exactly as the README shows it, read out of the README, in one shell's
environment (the setup block's `export` and `cd` carry over), each a `delivery` process of
its own with stderr going to a file. Three repositories made as the README makes them;
deliver.dot merges a change in all three; campaign.dot's dry run pauses showing the changes,
the resume publishes (progress lines in the file the README names), Ctrl-C stops it while
the PRs wait for a review, and `delivery close` closes them and cancels the run."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from git_helpers import IDENTITY, git
from markdown_it import MarkdownIt
from signal_helpers import poll

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # eight delivery processes and a run stopped mid-wait


def readme_walk() -> list[str]:
    """The shell blocks of the README's "On your repositories" section, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## On your repositories\n", 1)[1].split("\n## ", 1)[0]
    return [t.content for t in MarkdownIt().parse(section)
            if t.type == "fence" and t.info.strip() == "sh"]


def commands(block: str) -> list[str]:
    """A block's command lines, continued lines joined."""
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


class Shell:
    """One person's shell: the environment and folder the setup block leaves, in which
    each later command runs as its own process (`exec`, so a signal reaches delivery)."""

    def __init__(self, checkout: Path, logs: Path) -> None:
        self.cwd = checkout
        self.env = {**os.environ, **IDENTITY, "XDG_CACHE_HOME": str(logs / "cache")}
        self.env.pop("GITHUB_TOKEN", None)
        self.logs = logs
        self.count = 0

    def source(self, block: str) -> None:
        """Run a block as a script and keep the folder and environment it ends with."""
        state = self.logs / "state"
        script = f"set -e\n{block}\npwd > {state}.pwd\nenv -0 > {state}.env\n"
        with self.stderr_file().open("w") as err:
            subprocess.run(["bash", "-c", script], cwd=self.cwd, env=self.env, check=True,
                           stdout=subprocess.DEVNULL, stderr=err)
        self.cwd = Path(state.with_suffix(".pwd").read_text().strip())
        pairs = state.with_suffix(".env").read_text().split("\0")
        self.env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)

    def stderr_file(self) -> Path:
        self.count += 1
        return self.logs / f"stderr-{self.count}.log"

    def start(self, command: str) -> tuple[subprocess.Popen[str], Path]:
        err = self.stderr_file()
        with err.open("w") as handle:  # the command's own `2> FILE` wins over this one
            process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.cwd,
                                       env=self.env, stdout=subprocess.PIPE, stderr=handle,
                                       text=True)
        return process, err

    def run(self, command: str) -> tuple[int, str, str]:
        process, err = self.start(command)
        out, _ = process.communicate(timeout=300)
        return process.returncode, out, err.read_text()


def pulls(remote: Path, branch_prefix: str) -> list[dict[str, object]]:
    listed = json.loads((remote / "delivery" / "pulls.json").read_text())["pulls"]
    return [p for p in listed if str(p["head"]).startswith(branch_prefix)]


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 120) -> None:
    assert poll(condition, seconds, every=0.2), f"gave up waiting for {what}"


def test_a_newcomer_runs_both_workflows_on_three_repositories_of_their_own(
        tmp_path: Path) -> None:
    setup, deliver, campaign, publish, close = readme_walk()
    checkout = tmp_path / "delivery"  # a clone of this repository, its .venv installed
    for part in ("workflows", "examples"):
        shutil.copytree(ROOT / part, checkout / part)
    (checkout / ".venv").symlink_to(Path(sys.prefix))
    logs = tmp_path / "logs"
    logs.mkdir()
    shell = Shell(checkout, logs)

    shell.source(setup)
    try_dir = tmp_path / "try"
    assert shell.cwd == try_dir
    remotes = [try_dir / f"{name}.git" for name in ("a", "b", "c")]
    assert all(git(remote, "rev-parse", "--is-bare-repository") == "true"
               for remote in remotes)

    # the coupled workflow merges one change in all three, in order
    (command,) = commands(deliver)
    code, out, err = shell.run(command)
    assert code == 0, out + err
    assert len(re.findall(r"^\s+[abc]\s+#1\s+MERGED", out, re.MULTILINE)) == 3, out
    assert all(git(remote, "show", "main:settings.py") == "TIMEOUT = 30"
               for remote in remotes)

    # the campaign's dry run: implemented and checked, paused before any forge write
    toml, dry_run = commands(campaign)
    shell.source(toml)
    code, out, err = shell.run(dry_run)
    assert code == 3, out + err
    for name in ("a", "b", "c"):
        assert f"{name}: 2 files changed, 9 insertions(+), 1 deletion(-)" in err
    assert all(pulls(remote, "delivery/c-1") == [] for remote in remotes)
    code, out, _ = shell.run("delivery runs --json")
    listed = {r["status"]: r for r in json.loads(out)}
    assert listed["paused"]["reason"] == "dry_run"

    # resume publishes, progress in the file the README names; the PRs wait for a review
    (resume,) = commands(publish)
    process, _ = shell.start(resume)
    progress = shell.cwd / "progress.log"
    wait_for(lambda: all(pulls(remote, "delivery/c-1") for remote in remotes)
             and "route" in progress.read_text().split("publish succeeded", 1)[-1],
             "the three PRs and the first look at them")
    process.send_signal(signal.SIGINT)  # the reader's Ctrl-C
    assert process.wait(timeout=60) == 130
    logged = progress.read_text()
    assert re.search(r"^\s+✓ implement succeeded in", logged, re.MULTILINE) is None, \
        "the dry run's stages are not run again"
    assert re.search(r"^\s+✓ publish succeeded in", logged, re.MULTILINE), logged
    assert "is resumable: delivery resume" in logged
    assert all(pulls(remote, "delivery/c-1")[0]["state"] == "open" for remote in remotes)

    # close: the PRs closed, the branches gone, the run cancelled
    (command,) = commands(close)
    code, out, err = shell.run(command)
    assert code == 0, out + err
    for remote in remotes:
        (pull,) = pulls(remote, "delivery/c-1")
        assert pull["state"] == "closed"
        assert not git(remote, "branch", "--list", str(pull["head"]))
    code, out, _ = shell.run("delivery runs --json")
    assert sorted(r["status"] for r in json.loads(out)) == ["cancelled", "succeeded"]
