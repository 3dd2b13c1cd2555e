"""The bundled review-prs.dot on the local forge: it finds the PRs of a head branch across
repositories, hands their evidence (here a failing check and a review thread) to the
reviewer, drafts answers to the unresolved threads and, once a person says so at its gate,
posts them in their threads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli
from git_helpers import commit_to, make_remote

from delivery.forges.local import LocalForge
from probes.evidence import PrQuery, PullRequestSnapshot

ROOT = Path(__file__).resolve().parents[2]


def test_review_prs_reviews_the_prs_of_a_branch_and_drafts_thread_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forge = LocalForge()
    remotes = {name: make_remote(tmp_path, name, {"app.txt": f"{name}\n"})
               for name in ("api", "web")}
    for name, remote in remotes.items():
        commit_to(remote, "feature/x", {"app.txt": f"{name} changed\n"})
        forge.find_or_create_pull_request(str(remote), head="feature/x", base="main",
                                          title="Feature X", body="")
    forge.comment(str(remotes["web"]), 1, "Why this name?", path="app.txt", line=1,
                  author="ada")
    replies = {
        "review": ['Web fails its check. {"context_updates": {"verdict": "blocked", '
                   '"summary": "api is fine; web fails its check"}}'],
        "answer": ['{"context_updates": {"answers": {"web:1": '
                   '{"reply": "It matches the API.", "resolve": false}}}}'],
    }
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("run", ROOT / "workflows" / "review-prs.dot",
                         "--repo", f"api={remotes['api']}", "--repo", f"web={remotes['web']}",
                         "--check", "web=false", "--branch", "feature/x",
                         "--agent", "replay:replies.json",
                         "--answer", "post=[P] Post the answers", "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["path"] == ["start", "observe", "found", "review", "answer", "post",
                              "reply", "exit"]
    assert report["context"]["web.pr.state"] == "CI_FAILED"
    assert report["context"]["threads.unresolved"] == 1
    assert report["context"]["verdict"] == "blocked"
    prompt = (Path(report["run_dir"]) / "review" / "1" / "prompt.md").read_text()
    assert "Why this name?" in prompt and "web: false" in prompt  # the evidence was given
    posted = forge.thread_replies(str(remotes["web"]), 1, "1")
    assert len(posted) == 1 and posted[0].startswith("It matches the API.")
    after = forge.pull_requests([PrQuery("web", str(remotes["web"]), number=1)])["web"]
    assert isinstance(after, PullRequestSnapshot)
    assert after.thread_ids == ("1",)  # left open: its answer did not resolve it
