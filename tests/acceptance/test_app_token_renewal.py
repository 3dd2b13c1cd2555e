"""Acceptance (issue 37 item 3): a run with GitHub App credentials whose installation
tokens the fake GitHub expires after three seconds — a run of several of their lifetimes
(publish, a second publish after a pause, probe, merge) — succeeds over several renewals,
and not one request (REST, GraphQL or git, pushes included: before and after a renewal)
is sent with an expired token."""

from __future__ import annotations

from pathlib import Path

import pytest
from github_helpers import TWO_REPO_FLOW

from delivery.testing.cli import invoke
from delivery.testing.github import FakeGitHub

LIFETIME = 3.0  # seconds; renewed when half of it is left
NAP = '  nap{n} [shape=parallelogram, script="sleep 1.6"]\n'
# a second change pushed after a nap: git, too, is given a token minted after the first
AGAIN = ("  again [shape=parallelogram, script=\"printf 'print(3)\\\\n' > web/app.py\"]\n"
         "  reship [type=publish]\n")
FLOW = TWO_REPO_FLOW.replace(
    "  remove [type=worktree_remove]\n",
    "  remove [type=worktree_remove]\n" + NAP.format(n=1) + NAP.format(n=2) + AGAIN).replace(
    "ship -> look -> land", "ship -> nap1 -> again -> reship -> nap2 -> look -> land")


def test_a_run_outlives_its_tokens_with_no_request_sent_late(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:  # real time: the tokens expire as the run goes on
        for name in ("octo/web", "octo/api"):
            github.create_repo(name, files={"app.py": "print(0)\n"})
        app = github.register_app(token_lifetime=LIFETIME)
        app.install("octo")
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        monkeypatch.delenv("GITHUB_TOKEN", raising=False)
        for key, value in github.app_env(app).items():
            monkeypatch.setenv(key, value)
        flow = tmp_path / "flow.dot"
        flow.write_text(FLOW)
        result = invoke("run", flow, "--input", "ticket=T-1", "--repo", "web=octo/web",
                        "--repo", "api=octo/api")
        assert result.code == 0, result.out + result.err
        assert github.pull("octo/web", 1).merged and github.pull("octo/api", 1).merged
        assert len(app.issued) >= 3  # renewed again and again
        with_tokens = [r for r in github.requests if r.token_expires_at is not None]
        assert {r.path.split("/")[1] for r in with_tokens} >= {"api", "octo"}  # API and git
        pushes = [r for r in github.requests if r.path.endswith("/git-receive-pack")]
        # pushes before and after a renewal, each with a token still valid
        assert len({r.token_expires_at for r in pushes}) >= 2
        late = [(r.method, r.path) for r in github.requests if r.expired]
        assert late == []
        assert all(r.authorized for r in github.requests)
