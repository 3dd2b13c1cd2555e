"""`delivery probe` and `delivery review` on the local forge (SPEC §12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli, write_flow
from git_helpers import commit_to, git, make_remote

from delivery.forges.local import LocalForge
from delivery.testing import flow
from probes.evidence import PrQuery, PullRequestSnapshot


@pytest.fixture
def remotes(tmp_path: Path) -> dict[str, Path]:
    web = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    api = make_remote(tmp_path, "api", {"app.txt": "one\n"})
    commit_to(web, "feature-w", {"w.txt": "w"})
    commit_to(api, "feature-a", {"broken.txt": "a"})
    forge = LocalForge()
    for remote, head in ((web, "feature-w"), (api, "feature-a")):
        forge.find_or_create_pull_request(str(remote), head=head, base="main", title="t",
                                          body="")
    return {"web": web, "api": api}


def test_probe_json_prints_flat_facts_per_folder_and_rolled_up(
        remotes: dict[str, Path]) -> None:
    code, out, err = cli("probe", "--repo", f"web={remotes['web']}#1",
                         "--repo", f"api={remotes['api']}@feature-a",
                         "--check", "api=test ! -f broken.txt", "--json")
    assert code == 0, err
    facts = json.loads(out)
    assert facts["web.pr.state"] == "WAITING" and facts["web.pr.number"] == 1
    assert facts["api.pr.state"] == "CI_FAILED"
    assert (facts["pr.state"], facts["pr.ready"], facts["threads.unresolved"]) == \
        ("CI_FAILED", False, 0)


def test_probe_text_lists_one_fact_per_line_roll_ups_last(remotes: dict[str, Path]) -> None:
    code, out, _ = cli("probe", "--repo", f"web={remotes['web']}#1")
    assert code == 0
    lines = out.splitlines()
    assert "web.pr.state = WAITING" in lines and "web.pr.ready = true" in lines
    assert lines[-3:] == ["pr.ready = true", "pr.state = WAITING", "threads.unresolved = 0"]


def test_probe_of_an_unreadable_folder_exits_1_naming_it_and_prints_the_rest(
        remotes: dict[str, Path], tmp_path: Path) -> None:
    code, out, err = cli("probe", "--repo", f"web={remotes['web']}#1",
                         "--repo", f"api={tmp_path / 'missing.git'}@x", "--json")
    assert code == 1
    assert "folder 'api'" in err and "not a git repository" in err
    assert json.loads(out)["web.pr.state"] == "WAITING"


def test_probe_of_a_working_tree_adds_its_worktree_and_diff_facts(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "web", {"app.txt": "one\n"})
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", str(remote), str(clone))
    git(clone, "checkout", "--quiet", "-b", "feature")
    (clone / "new.txt").write_text("a\nb\n")
    code, out, err = cli("probe", "--repo", f"web={clone}", "--json")
    assert code == 0, err
    facts = json.loads(out)
    assert facts["web.worktree.branch"] == "feature" and facts["web.worktree.dirty"] is True
    assert (facts["web.diff.files"], facts["web.diff.insertions"]) == (1, 2)
    assert facts["web.pr.state"] == "NONE"


def test_review_requests_changes_then_approves(remotes: dict[str, Path]) -> None:
    web = str(remotes["web"])
    code, out, _ = cli("review", f"{web}#1", "--request-changes", "Rename it", "--author", "ann")
    assert code == 0 and "changes requested" in out
    probed = json.loads(cli("probe", "--repo", f"web={web}#1", "--json")[1])
    assert probed["web.pr.state"] == "CHANGES_REQUIRED"
    assert json.loads(probed["web.pr.raw"])["reviews"][0]["body"] == "Rename it"
    assert cli("review", "web#1", "--repo", f"web={web}", "--approve", "--author", "ann")[0] == 0
    assert json.loads(cli("probe", "--repo", f"web={web}#1", "--json")[1])[
        "web.pr.state"] == "WAITING"


def test_review_threads_are_opened_and_resolved(remotes: dict[str, Path]) -> None:
    web = str(remotes["web"])
    code, out, _ = cli("review", f"{web}#1", "--comment", "Why?", "--path", "w.txt")
    assert code == 0 and "thread 1 opened" in out
    assert json.loads(cli("probe", "--repo", f"web={web}#1", "--json")[1])[
        "threads.unresolved"] == 1
    assert cli("review", f"{web}#1", "--resolve", "1")[0] == 0
    assert json.loads(cli("probe", "--repo", f"web={web}#1", "--json")[1])[
        "threads.unresolved"] == 0


def test_review_of_something_that_is_no_pr_is_refused(remotes: dict[str, Path]) -> None:
    code, _, err = cli("review", str(remotes["web"]), "--approve")
    assert code == 2 and "FOLDER#N" in err
    code, _, err = cli("review", f"{remotes['web']}#7", "--approve")
    assert code == 2 and "no pull request #7" in err


def test_run_takes_repos_checks_and_a_cache_and_records_them(tmp_path: Path,
                                                             remotes: dict[str, Path]) -> None:
    workflow = write_flow(tmp_path, flow("""
    add [type=worktree_add]
    look [type=probe]
    start -> add -> look -> exit
    """, graph='inputs="ticket"'))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "delivery.toml").write_text(
        '[forge.local]\nrequired_approvals = 1\n[forge.local.checks]\nweb = "true"\n')
    code, out, err = cli("run", workflow, "--repo", f"web={remotes['web']}",
                         "--repo", f"api={remotes['api']}", "--check", "api=false",
                         "--cache", tmp_path / "cache", "--workspace", workspace,
                         "--input", "ticket=https://github.com/octo/web/issues/12", "--json")
    assert code == 0, err
    result = json.loads(out)
    branch = result["context"]["web.worktree.branch"]
    assert branch.startswith("delivery/web-12-")  # the ticket's slug, its hash after it
    info = json.loads((Path(result["run_dir"]) / "run.json").read_text())
    assert info["forge"] == "local" and info["branch"] == branch
    assert info["checks"] == {"web": "true", "api": "false"}
    assert info["required_approvals"] == 1
    assert info["git_cache"] == str(tmp_path / "cache")
    assert (tmp_path / "cache" / "repos").is_dir()


def test_review_finds_the_folder_in_a_runs_repositories(tmp_path: Path,
                                                        remotes: dict[str, Path]) -> None:
    workflow = write_flow(tmp_path, flow("""
    look [type=probe, probe="pr"]
    start -> look -> exit
    """))
    code, _, err = cli("run", workflow, "--repo", f"web={remotes['web']}", "--json",
                         "--workspace", tmp_path, "--run-dir", tmp_path / "run")
    assert code == 0, err
    code, _, err = cli("review", "web#1", "--run", tmp_path / "run",
                         "--request-changes", "Split it", "--author", "ann")
    assert code == 0, err
    reviews = LocalForge().pull_requests([PrQuery("web", str(remotes["web"]), number=1)])
    snapshot = reviews["web"]
    assert isinstance(snapshot, PullRequestSnapshot)
    assert [(r.author, r.state, r.body) for r in snapshot.reviews] == \
        [("ann", "CHANGES_REQUESTED", "Split it")]
