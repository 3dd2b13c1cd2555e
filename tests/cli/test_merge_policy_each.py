"""`merge [policy=each]` through `delivery run` (SPEC §7.1, campaigns): every PR that is
ready now is merged, the others are left open for a later probe and the stage succeeds; it
fails only when a ready PR cannot be merged. The change-set status guards nothing then and
is never written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli
from git_helpers import make_remote
from github_helpers import CI

from delivery.forges.change_set import CHANGE_SET_CONTEXT
from delivery.testing import flow
from delivery.testing.github import FakeGitHub, faults

FOLDERS = ("web", "api", "docs")


def campaign(merge: str = 'policy="each"') -> str:
    """Worktrees, a change in every folder (api's says BUG), publish, probe, the merge
    (`merge`: its attributes), a probe after it."""
    return flow(f"""
    add [type=worktree_add]
    change [shape=parallelogram,
            script="for f in web docs; do echo ok > $f/app.py; done; echo BUG > api/app.py"]
    ship [type=publish]
    look [type=probe, probe="pr"]
    land [type=merge, {merge}]
    after [type=probe, probe="pr"]
    start -> add -> change -> ship -> look -> land -> after -> exit
    """, goal="Say hello", graph=f'inputs="ticket", folders="{",".join(FOLDERS)}"', name="C")


def _run(tmp_path: Path, dot: str, repos: dict[str, str],
         *more: str) -> tuple[int, dict[str, object], str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "flow.dot").write_text(dot)
    run_dir = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    code, out, err = cli("run", workspace / "flow.dot", "--input",
                         "ticket=https://tracker.example/T-5", "--workspace", workspace,
                         "--cache", tmp_path / "cache", "--run-dir", run_dir, "--json",
                         *[arg for folder, where in repos.items()
                           for arg in ("--repo", f"{folder}={where}")], *more)
    report = json.loads(out) if out.strip().startswith("{") else {}
    return code, report, err


def _pulls(remote: Path) -> list[dict[str, object]]:
    return list(json.loads((remote / "delivery" / "pulls.json").read_text())["pulls"])


@pytest.fixture
def remotes(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "remotes"
    root.mkdir()
    return {name: make_remote(root, name, {"app.py": "print(0)\n"}) for name in FOLDERS}


def test_each_merges_the_ready_prs_leaves_the_failing_one_open_and_succeeds(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    code, report, err = _run(tmp_path, campaign(), {k: str(v) for k, v in remotes.items()},
                             "--check", "api=! grep -q BUG app.py")
    assert code == 0, err
    context = report["context"]
    assert isinstance(context, dict)
    assert (context["web.pr.state"], context["docs.pr.state"]) == ("MERGED", "MERGED")
    assert context["api.pr.state"] == "CI_FAILED"
    assert [p["state"] for p in _pulls(remotes["api"])] == ["open"]  # probed again later


def test_the_default_policy_still_stops_at_the_first_pr_that_is_not_ready(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    code, report, _ = _run(tmp_path, campaign('order="api,web"'),
                           {k: str(v) for k, v in remotes.items()},
                           "--check", "api=! grep -q BUG app.py")
    assert code == 1
    assert "folder 'api'" in str(report["failure_reason"])
    assert [p["state"] for p in _pulls(remotes["web"])] == ["open"]


def test_each_keeps_order_and_a_second_merge_counts_merged_prs_as_done(
        tmp_path: Path, remotes: dict[str, Path]) -> None:
    dot = campaign('policy="each", order="docs,web"').replace(
        "land -> after", "land -> again -> after").replace(
        "after [type=probe", 'again [type=merge, policy="each"]\n    after [type=probe')
    code, report, err = _run(tmp_path, dot, {k: str(v) for k, v in remotes.items()},
                             "--check", "api=! grep -q BUG app.py")
    assert code == 0, err
    run_dir = Path(str(report["run_dir"]))
    merged = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
              if '"pr_merged"' in line]
    # docs before web, as order= says; the second merge stage merges nothing again
    assert [(e["node"], e["folder"]) for e in merged] == [("land", "docs"), ("land", "web")]


def _github_repos(github: FakeGitHub) -> dict[str, str]:
    repos = {}
    for name in FOLDERS:
        github.create_repo(f"octo/{name}", files={"app.py": "print(0)\n"}, check_rules=(CI,))
        github.protect(f"octo/{name}", required_contexts=("ci",))
        repos[name] = f"octo/{name}"
    return repos


def test_on_github_each_writes_no_change_set_status_and_merges_the_ready_prs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:
        for name, value in github.env().items():
            monkeypatch.setenv(name, value)
        code, _, err = _run(tmp_path, campaign(), _github_repos(github))
        assert code == 0, err
        assert github.pull("octo/web", 1).merged and github.pull("octo/docs", 1).merged
        assert not github.pull("octo/api", 1).merged
        for name in FOLDERS:  # no head of the set carries the status: it would guard nothing
            pr = github.pull(f"octo/{name}", 1)
            assert github.status_of(f"octo/{name}", pr.last_head_sha,
                                    CHANGE_SET_CONTEXT) is None
        assert not [r for r in github.requests if "/statuses/" in r.path]


def test_on_github_each_fails_only_for_a_ready_pr_that_cannot_be_merged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:
        for name, value in github.env().items():
            monkeypatch.setenv(name, value)
        repos = _github_repos(github)
        # once docs is merged, web's repository stops allowing merge commits: web is
        # ready, yet its merge is refused (preflight saw it allowed)
        github.inject(faults.between(lambda: github.allow_merge_methods("octo/web", "squash"),
                                     method="PUT", path="/api/v3/repos/octo/docs/pulls/1/merge"))
        code, report, _ = _run(tmp_path, campaign('policy="each", order="docs,api,web"'), repos)
        assert code == 1
        reason = str(report["failure_reason"])
        assert "folder 'web'" in reason and "api" not in reason
        assert github.pull("octo/docs", 1).merged  # the rest went on
        assert not github.pull("octo/web", 1).merged


def test_validate_refuses_an_unknown_policy_with_its_fix(tmp_path: Path) -> None:
    path = tmp_path / "flow.dot"
    path.write_text(campaign('policy="every"'))
    code, out, _ = cli("validate", path)
    assert code == 1
    assert "merge_policy" in out and "policy='every' is not one of all, each" in out
    assert "write policy=each" in out
