"""Acceptance: the bundled deliver.dot against the fake GitHub (REST, GraphQL and real git
over HTTP) with two repositories — a CI failure is repaired, a reviewer's requested change
is made and approved, both PRs merge in order, the worktrees are removed — within a stated
request budget."""

from __future__ import annotations

from pathlib import Path

from delivery.testing.github import FakeGitHub
from delivery.testing.two_repos import (
    BRANCH,
    GitHubReviewer,
    RequestMeter,
    create_repos,
    deliver,
)

# The request budget of this delivery (2 repositories; 3 publishes, 4 probe rounds, 1 merge
# stage), measured (45 in all before publish fetched first; the fetch adds about 8) and
# stated with a little room: a probe round is exactly one GraphQL request; a publish costs
# per folder a fetch of the PR branch before committing (info/refs, plus upload-pack when
# the remote moved: people on the branch win, SPEC §7.1), the git push (info/refs, plus
# receive-pack when there is something to push) and the PR lookup by head branch, the
# first time also the create, a PR read and a body update; a merge one GraphQL read and
# per PR a PR read and the merge PUT (5); worktrees a fetch (3 git requests) and a
# repository read per folder to add, a fetch per folder to remove (14). Each publish also
# observes the set once (one GraphQL request) for the `delivery/change-set` status, written
# (one POST per PR head) only where it changed: 7 in this delivery; the sticky comments,
# where the table changed, a look for the marker and a create or edit each (16); the merge
# reads each PR once more right before merging it (one GraphQL request each).
BUDGET = {"probe": 4, "publish": 40, "merge": 8, "worktrees": 14, "change_set": 24}
TOTAL = 90


def test_ci_failure_then_review_then_ordered_merge_on_github(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        repos = create_repos(github)
        reviewer = GitHubReviewer(github)
        meter = RequestMeter(github, reviewer=reviewer)
        outcome = deliver(github, repos, tmp_path, progress=meter)
        assert outcome.status == "succeeded", outcome.failure_reason
        path = outcome.path
        # CI failure first (api), then the review (web), then the merge
        assert path.count("repair") == 2 and path.count("land") == 1
        assert path.index("feedback") > path.index("repair")
        assert reviewer.actions == ["changes requested on web#1", "approved web#1"]
        api, web = github.pull("octo/api", 1), github.pull("octo/web", 1)
        assert api.merged and web.merged
        assert len(github.repository("octo/api").pulls) == 1
        assert len(github.repository("octo/web").pulls) == 1
        assert (api.merged_at or "") <= (web.merged_at or "")
        merges = [r.path for r in github.requests if r.method == "PUT"]
        assert merges == ["/api/v3/repos/octo/api/pulls/1/merge",
                          "/api/v3/repos/octo/web/pulls/1/merge"]
        # the repairs are on the default branch
        from delivery.testing.github import gitops

        api_main = gitops.read_file(github.repository("octo/api").path, "main", "greeting.py")
        web_main = gitops.read_file(github.repository("octo/web").path, "main", "page.py")
        assert 'f"Hello, {name}!"' in (api_main or "")
        assert "html.escape(name)" in (web_main or "")
        assert outcome.context["worktree.status"] == "api: removed; web: removed"
        assert BRANCH in (github.pull("octo/web", 1).head,)
        for phase, limit in BUDGET.items():
            assert meter.phases[phase] <= limit, (phase, dict(meter.phases))
        assert meter.probe_rounds == [1, 1, 1, 1]
        assert sum(meter.phases.values()) <= TOTAL, dict(meter.phases)
        assert meter.phases["other"] == 0  # agents, scripts and routing send nothing
