"""`publish [draft=true]` through `delivery run` (SPEC §7.1): each new PR opens as a draft,
the probe marks it ready for review once its checks pass — the run's own change-set status
is not one of them — and a draft is never merged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli
from git_helpers import make_remote
from github_helpers import CI

from delivery.forges.change_set import CHANGE_SET_CONTEXT
from delivery.forges.github import READY_MUTATION
from delivery.testing import flow
from delivery.testing.github import FakeGitHub
from delivery.testing.github.graphql_api import validate_query


def drafting(api: str = "ok", merge: str = "") -> str:
    """Worktrees, a change in web and api (api's app.py says `api`), a draft publish, a
    probe, then the stages of `merge`."""
    tail = "look -> land -> exit" if merge else "look -> exit"
    return flow(f"""
    add [type=worktree_add]
    change [shape=parallelogram, script="echo ok > web/app.py; echo {api} > api/app.py"]
    ship [type=publish, draft=true]
    look [type=probe, probe="pr"]
    {f"land [type=merge, {merge}]" if merge else ""}
    start -> add -> change -> ship -> {tail}
    """, goal="Say hello", graph='inputs="ticket", folders="web,api"', name="D")


def _run(tmp_path: Path, dot: str, repos: dict[str, str],
         *more: str) -> tuple[int, dict[str, object], str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "flow.dot").write_text(dot)
    code, out, err = cli("run", workspace / "flow.dot", "--input",
                         "ticket=https://tracker.example/T-6", "--workspace", workspace,
                         "--cache", tmp_path / "cache", "--run-dir", tmp_path / "run", "--json",
                         *[arg for folder, where in repos.items()
                           for arg in ("--repo", f"{folder}={where}")], *more)
    return code, json.loads(out) if out.strip().startswith("{") else {}, err


def _pull(remote: Path) -> dict[str, object]:
    [pull] = json.loads((remote / "delivery" / "pulls.json").read_text())["pulls"]
    return dict(pull)


@pytest.fixture
def remotes(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "remotes"
    root.mkdir()
    return {name: str(make_remote(root, name, {"app.py": "print(0)\n"}))
            for name in ("web", "api")}


def test_a_draft_whose_checks_pass_is_marked_ready_by_the_probe_and_merged(
        tmp_path: Path, remotes: dict[str, str]) -> None:
    code, report, err = _run(tmp_path, drafting(merge='order="web,api"'), remotes,
                             "--check", "web=grep -q ok app.py")
    assert code == 0, err
    for name in ("web", "api"):  # api has no check: none to wait for
        pull = _pull(Path(remotes[name]))
        assert (pull["draft"], pull["state"]) == (False, "merged")
    events = (Path(str(report["run_dir"])) / "events.jsonl").read_text()
    assert events.count('"pr_ready_for_review"') == 2


def test_a_draft_whose_checks_fail_stays_a_draft_and_the_probe_says_so(
        tmp_path: Path, remotes: dict[str, str]) -> None:
    code, report, err = _run(tmp_path, drafting(api="BUG"), remotes,
                             "--check", "api=! grep -q BUG app.py")
    assert code == 0, err
    assert _pull(Path(remotes["api"]))["draft"] is True
    assert _pull(Path(remotes["web"]))["draft"] is False
    context = report["context"]
    assert isinstance(context, dict)
    assert json.loads(context["api.pr.raw"])["draft"] is True
    assert json.loads(context["web.pr.raw"])["draft"] is False
    assert (context["web.pr.ready"], context["api.pr.ready"]) == (True, False)


def test_a_draft_is_never_merged(tmp_path: Path, remotes: dict[str, str]) -> None:
    code, _, _ = _run(tmp_path, drafting(api="BUG", merge='policy="each"'), remotes,
                           "--check", "api=! grep -q BUG app.py")
    assert code == 0
    assert _pull(Path(remotes["web"]))["state"] == "merged"
    assert (_pull(Path(remotes["api"]))["state"], _pull(Path(remotes["api"]))["draft"]) == \
        ("open", True)


def test_on_github_drafts_open_as_drafts_and_are_marked_ready_despite_the_pending_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:
        for name, value in github.env().items():
            monkeypatch.setenv(name, value)
        for name in ("web", "api"):
            github.create_repo(f"octo/{name}", files={"app.py": "print(0)\n"},
                               check_rules=(CI,))
            github.protect(f"octo/{name}", required_contexts=("ci", CHANGE_SET_CONTEXT))
        code, _, err = _run(tmp_path, drafting(api="BUG"),
                            {"web": "octo/web", "api": "octo/api"})
        assert code == 0, err
        created = [r for r in github.requests if r.method == "POST"
                   and r.path.endswith("/pulls")]
        assert [json.loads(r.body)["draft"] for r in created] == [True, True]
        # web's ci passed: ready, although the set's status (api fails) is pending on it
        web = github.pull("octo/web", 1)
        assert not web.draft
        assert github.status_of("octo/web", web.last_head_sha, CHANGE_SET_CONTEXT) == (
            "PENDING", "waiting for the rest of the change set")
        assert github.pull("octo/api", 1).draft


def test_the_ready_for_review_mutation_is_valid_against_githubs_schema() -> None:
    assert validate_query(READY_MUTATION) == []
