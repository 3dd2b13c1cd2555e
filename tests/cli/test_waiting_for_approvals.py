"""What a run waits for names the missing approvals (SPEC §7.1 `wait`; issue 37 item 5),
through the command line against the fake GitHub: a PR whose base branch requires two
approvals and has one is shown as `web (approval: 1 of 2)` by `inspect` and `runs`; where
the token cannot read the branch protection, as `web (approval)`. The probe reads both
from its one GraphQL request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import cli

from delivery.testing import flow
from delivery.testing.github import FakeGitHub

BRANCH = "delivery/t-3"
FLOW = flow("""
look [type=probe, probe="pr"]
gate [shape=hexagon, label="Go on?"]
start -> look -> gate
gate -> exit [label="[Y] Yes"]
""", goal="Watch", graph='inputs="ticket", folders="web"', name="A")


def paused_at_the_gate(tmp_path: Path, github: FakeGitHub) -> Path:
    """A run whose probe saw web's PR waiting for reviews, paused at its gate."""
    (tmp_path / "flow.dot").write_text(FLOW)
    code, out, err = cli("run", tmp_path / "flow.dot", "--input", "ticket=T-3", "--branch",
                         BRANCH, "--repo", "web=octo/web", "--workspace", tmp_path,
                         "--gates", "pause", "--json")
    assert code == 3, err
    return Path(json.loads(out)["run_dir"])


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    with FakeGitHub() as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        fake.create_repo("octo/web", files={"app.py": "print(0)\n"}, required_approvals=2)
        fake.push_files("octo/web", BRANCH, {"app.py": "print(1)\n"})
        number = fake.open_pull("octo/web", BRANCH)
        fake.add_review("octo/web", number, "alice", "APPROVED", "lgtm")
        yield fake


def test_inspect_and_runs_say_how_many_approvals_are_missing(
        tmp_path: Path, github: FakeGitHub) -> None:
    run_dir = paused_at_the_gate(tmp_path, github)
    code, out, err = cli("inspect", run_dir, "--json")
    assert code == 0, err
    assert json.loads(out)["waiting_for"] == {"web": "approval: 1 of 2"}
    code, out, err = cli("runs", "--workspace", tmp_path)
    assert code == 0, err
    assert out.strip().endswith("— waiting: web (approval: 1 of 2)")


def test_without_the_protection_readable_the_wait_still_names_the_approval(
        tmp_path: Path, github: FakeGitHub) -> None:
    github.hide_branch_protection("octo/web")
    run_dir = paused_at_the_gate(tmp_path, github)
    code, out, err = cli("inspect", run_dir, "--json")
    assert code == 0, err
    assert json.loads(out)["waiting_for"] == {"web": "approval"}
