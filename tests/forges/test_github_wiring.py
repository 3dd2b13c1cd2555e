"""`--forge github` / `--repo owner/name` in `delivery probe` and `delivery run`, against
the fake GitHub: the environment names the API and the token, as inside Actions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import FakeClock, cli, write_flow
from github_helpers import CI, open_pr

from delivery.agents.replay import ReplayBackend
from delivery.engine.run_inputs import ticket_slug
from delivery.engine.runner import RunRequest, World, start_run
from delivery.testing.github import FakeGitHub, faults

TICKET = "https://tracker.example/browse/T-7"
BRANCH = f"delivery/{ticket_slug(TICKET)}"  # the branch the ticket names


def test_probe_reads_github_prs_by_number_and_branch(fake_github_env: FakeGitHub) -> None:
    fake = fake_github_env
    fake.create_repo("octo/web", check_rules=(CI,))
    fake.create_repo("octo/api", check_rules=(CI,))
    web = open_pr(fake, "octo/web")
    open_pr(fake, "octo/api", "feature-x", files={"app.py": "BUG\n"})
    fake.clear_requests()
    code, out, err = cli("probe", "--repo", f"web=octo/web#{web}",
                         "--repo", "api=octo/api@feature-x", "--json")
    assert code == 0, err
    facts = json.loads(out)
    assert (facts["web.pr.state"], facts["web.pr.ready"]) == ("WAITING", True)
    assert facts["api.pr.state"] == "CI_FAILED" and facts["pr.state"] == "CI_FAILED"
    assert [r.path for r in fake.requests] == ["/api/graphql"]
    assert fake.token not in out + err


def test_probe_of_github_without_a_token_is_refused_naming_it(
        fake_github_env: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    code, _, err = cli("probe", "--repo", "web=octo/web#1", "--forge", "github")
    assert code != 0 and "GITHUB_TOKEN" in err and "Traceback" not in err


def test_a_run_clones_over_http_probes_github_and_routes(fake: FakeGitHub,
                                                         tmp_path: Path) -> None:
    fake.create_repo("octo/web", check_rules=(CI,))
    fake.create_repo("octo/api", check_rules=(CI,))
    open_pr(fake, "octo/web", BRANCH)
    open_pr(fake, "octo/api", BRANCH, files={"app.py": "BUG\n"})
    dot = """
    digraph F {
      graph [goal="g", inputs="ticket", folders="web,api"]
      start [shape=Mdiamond]
      exit [shape=Msquare]
      add [type=worktree_add]
      look [type=probe]
      repair [shape=parallelogram, script="true"]
      start -> add -> look
      look -> repair [condition="pr.state=CI_FAILED"]
      look -> exit
      repair -> exit
    }
    """
    workspace = tmp_path / "ws"
    workspace.mkdir()
    request = RunRequest(workflow=write_flow(tmp_path, dot), inputs={"ticket": TICKET},
                         workspace=workspace, repos={"web": "octo/web", "api": "octo/api"},
                         forge="github")
    ran = start_run(request, World(agent=ReplayBackend({}), clock=FakeClock(),
                                   git_cache=tmp_path / "cache", environ=fake.env()))
    assert ran.status == "succeeded", ran.failure_reason
    assert ran.path == ["start", "add", "look", "repair", "exit"]
    ctx = ran.context
    assert ctx["web.worktree.branch"] == BRANCH
    assert (workspace / "api" / "app.py").read_text() == "BUG\n"  # the PR's branch, cloned
    assert ctx["api.pr.state"] == "CI_FAILED" and ctx["web.pr.state"] == "WAITING"
    failing = json.loads(ctx["api.pr.raw"])["failing_checks"][0]
    assert failing["name"] == "ci" and "BUG found" in failing["summary"]
    run_files = [p for p in ran.run_dir.rglob("*") if p.is_file()]
    assert not any(fake.token in p.read_text(errors="replace") for p in run_files)


DELIVERY = """
digraph D {
  graph [goal="Say hello", inputs="ticket", folders="web,api,docs"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram,
          script="printf 'print(1)\\n' > web/app.py; printf 'print(2)\\n' > api/app.py"]
  ship [type=publish]
  ship_again [type=publish]
  look [type=probe, probe="pr,threads"]
  land [type=merge, order="api,web"]
  after [type=probe, probe="pr"]
  remove [type=worktree_remove]
  start -> add -> change -> ship -> ship_again -> look -> land -> after -> remove -> exit
}
"""


def test_a_delivery_on_github_publishes_one_pr_per_changed_folder_and_merges_in_order(
        fake: FakeGitHub, tmp_path: Path) -> None:
    for name in ("octo/web", "octo/api", "octo/docs"):
        fake.create_repo(name, files={"app.py": "print(0)\n"}, check_rules=(CI,))
    fake.inject(faults.drop_after_apply(method="POST", path="/api/v3/repos/octo/web/pulls"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    request = RunRequest(workflow=write_flow(tmp_path, DELIVERY), inputs={"ticket": TICKET},
                         workspace=workspace,
                         repos={"web": "octo/web", "api": "octo/api", "docs": "octo/docs"})
    ran = start_run(request, World(agent=ReplayBackend({}), clock=FakeClock(),
                                   git_cache=tmp_path / "cache", environ=fake.env()))
    assert ran.status == "succeeded", ran.failure_reason
    ctx = ran.context
    assert ctx["pr.state"] == "MERGED" and ctx["docs.pr.state"] == "NONE"
    assert ctx["worktree.clean"] is True
    web, api = fake.pull("octo/web", 1), fake.pull("octo/api", 1)
    assert web.merged and api.merged and not fake.repository("octo/docs").pulls
    assert len(fake.repository("octo/web").pulls) == 1  # the lost answer made no second PR
    assert f"{fake.server_url}/octo/api/pull/1" in web.body and TICKET in web.body
    merges = [r.path for r in fake.requests if r.method == "PUT"]
    assert merges == ["/api/v3/repos/octo/api/pulls/1/merge",
                      "/api/v3/repos/octo/web/pulls/1/merge"]
    repo = fake.repository("octo/web")
    from delivery.testing.github import gitops
    assert gitops.read_file(repo.path, "main", "app.py") == "print(1)\n"
    # The request budget of this delivery (3 folders, 2 changed), stated so it cannot grow
    # unnoticed: git over HTTP, REST writes and reads, and GraphQL probes.
    graphql = fake.count("POST", "/api/graphql")
    # Measured: 9 GraphQL requests (preflight's one query before the first write,
    # publish's look for the change-set status, probe, the merge's read and its re-read of
    # each PR right before merging it, probe, and once who the token is, so only its own
    # sticky comments are edited) and 3 reads of the delivery:stop label (before ship,
    # ship_again and land: one each, whatever the number of folders); the change set's
    # statuses and sticky comments are counted apart.
    assert graphql <= 12, graphql
    change_set = [r for r in fake.requests if "/statuses/" in r.path or "/comments" in r.path]
    assert len(change_set) <= 24, [(r.method, r.path) for r in change_set]
    # everything else: git, REST and the GraphQL requests above (the stop reads among them)
    assert len(fake.requests) - len(change_set) <= 65, [(r.method, r.path)
                                                        for r in fake.requests]
