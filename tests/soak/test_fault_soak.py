"""A two-repository delivery (publish -> probe -> merge) against a GitHub that answers a
fifth of the API requests with a fault: 502, secondary rate limits with and without
Retry-After, GraphQL 200-with-errors, connections dropped after a write was applied.
Each PR is still created once and merged once, in order; when the faults never stop the
run fails within its retry budget, naming the fault."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow
from github_helpers import CI, TWO_REPO_FLOW, TWO_REPO_PATH, TWO_REPOS

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.errors import RunRefused
from delivery.forges.github import GitHubForge
from delivery.testing import two_repos
from delivery.testing.github import FakeGitHub, faults
from probes.retry import RetryBudget

pytestmark = pytest.mark.slow  # a soak: whole deliveries through injected faults

TICKET = "https://tracker.example/browse/T-9"
REPOS = TWO_REPOS
DELIVERY = TWO_REPO_FLOW
PATH = TWO_REPO_PATH


def deliver(fake: FakeGitHub, tmp_path: Path, clock: FakeClock,
            flow: str = DELIVERY) -> RunOutcome:
    for name in REPOS.values():
        fake.create_repo(name, files={"app.py": "print(0)\n"}, check_rules=(CI,))
    workspace = tmp_path / "ws"
    workspace.mkdir(parents=True)
    request = RunRequest(workflow=write_flow(tmp_path, flow), inputs={"ticket": TICKET},
                         workspace=workspace, repos=REPOS, forge="github")
    # The forge sleeps on the test's clock: retries wait at once, their waits are recorded.
    forge = GitHubForge.from_environment(fake.env(), sleep=clock.sleep, clock=clock.monotonic)
    return start_run(request, World(agent=ReplayBackend({}), clock=clock, forge=forge,
                                    git_cache=tmp_path / "cache", environ=fake.env()))


def applied_writes(fake: FakeGitHub, method: str, suffix: str) -> list[str]:
    """Paths of the writes the fake applied (answered 2xx, or dropped after applying)."""
    return [r.path for r in fake.requests if r.method == method and r.path.endswith(suffix)
            and (200 <= r.status < 300 or r.status == 0)]


def test_a_delivery_through_a_fifth_of_faulty_answers_creates_and_merges_each_pr_once(
        fake: FakeGitHub, tmp_path: Path, soak_seed: int) -> None:
    mix = faults.random_mix(seed=soak_seed, rate=0.2)
    fake.inject(mix)
    clock = FakeClock()
    ran = deliver(fake, tmp_path, clock)
    print(f"seed {soak_seed}: faults {dict(mix.injected)}, {len(fake.requests)} requests")
    assert ran.status == "succeeded", (soak_seed, ran.failure_reason)
    assert ran.path == PATH
    for name in REPOS.values():
        pulls = fake.repository(name).pulls
        assert len(pulls) == 1, (soak_seed, name, list(pulls))  # created once
        assert pulls[1].merged
    creates = applied_writes(fake, "POST", "/pulls")
    assert sorted(creates) == ["/api/v3/repos/octo/api/pulls", "/api/v3/repos/octo/web/pulls"]
    merges = applied_writes(fake, "PUT", "/merge")
    assert merges == ["/api/v3/repos/octo/api/pulls/1/merge",
                      "/api/v3/repos/octo/web/pulls/1/merge"]  # once each, api first
    assert ran.context["pr.state"] == "MERGED"


def test_the_soak_meets_every_kind_of_fault_across_its_seeds(
        tmp_path: Path) -> None:
    # deliveries at a higher rate until every kind has answered at least once (in a few)
    met: Counter[str] = Counter()
    for seed in range(4):
        mix = faults.random_mix(seed=seed, rate=0.35)
        with FakeGitHub() as fake:
            fake.inject(mix)
            ran = deliver(fake, tmp_path / str(seed), FakeClock())
            assert ran.status == "succeeded", (seed, ran.failure_reason)
            assert all(len(fake.repository(n).pulls) == 1 for n in REPOS.values())
        met.update(mix.injected)
        if set(met) == set(faults.MIX_KINDS):
            break
    assert set(met) == set(faults.MIX_KINDS), dict(met)


@pytest.mark.parametrize(("kind", "named"), [
    ("502", "HTTP 502"),
    ("secondary_rate_limit", "rate limited"),
    ("secondary_rate_limit_retry_after", "rate limited"),
])
def test_faults_that_never_stop_fail_the_run_within_its_retry_budget_naming_the_fault(
        fake: FakeGitHub, tmp_path: Path, kind: str, named: str) -> None:
    fake.inject(faults.random_mix(seed=1, rate=1.0, kinds=[kind]))
    clock = FakeClock()
    # the run's own stages meet the faults (preflight's refusal is the next test's)
    ran = deliver(fake, tmp_path, clock, flow=DELIVERY.replace(
        'folders="web,api"', 'folders="web,api", preflight=false'))
    if "rate_limit" in kind:  # GitHub's limits are a budget: the run pauses (SPEC §7.1)
        assert ran.status == "paused" and "rate limit" in ran.failure_reason
        assert not any(fake.repository(n).pulls for n in REPOS.values())
        return
    assert ran.status == "failed"
    assert named in ran.failure_reason, ran.failure_reason
    budget = RetryBudget()
    assert f"gave up after {budget.attempts} attempts" in ran.failure_reason
    assert "octo/web" in ran.failure_reason and "Traceback" not in ran.failure_reason
    # the folders' stages work at once (SPEC §8.1): each folder's request within its own
    # budget, their waits side by side (the fake clock adds up the threads' sleeps)
    assert sum(clock.sleeps) <= budget.wait_seconds * len(REPOS)
    api = [r for r in fake.requests if r.path.startswith("/api/")]
    assert 0 < len(api) <= budget.attempts * len(REPOS)
    assert not any(fake.repository(n).pulls for n in REPOS.values())


def test_faults_that_never_stop_refuse_the_run_at_preflight_within_the_budget_naming_them(
        fake: FakeGitHub, tmp_path: Path) -> None:
    fake.inject(faults.random_mix(seed=1, rate=1.0, kinds=["502"]))
    clock = FakeClock()
    with pytest.raises(RunRefused) as refused:
        deliver(fake, tmp_path, clock)
    reason = str(refused.value)
    budget = RetryBudget()
    assert "preflight: the token's permissions could not be read" in reason
    assert "HTTP 502" in reason and f"gave up after {budget.attempts} attempts" in reason
    assert "octo/web" in reason and sum(clock.sleeps) <= budget.wait_seconds
    assert fake.write_requests() == [] and not (tmp_path / "ws" / ".delivery").exists()


def test_the_bundled_deliver_workflow_through_faulty_answers_repairs_and_merges_once(
        tmp_path: Path) -> None:
    # deliver.dot itself: a CI failure repaired, a review answered, both merged in order
    mix = faults.random_mix(seed=3, rate=0.2)
    clock = FakeClock()
    with FakeGitHub() as github:
        repos = two_repos.create_repos(github)
        meter = two_repos.RequestMeter(github, reviewer=two_repos.GitHubReviewer(github))
        github.inject(mix)
        forge = GitHubForge.from_environment(github.env(), sleep=clock.sleep,
                                             clock=clock.monotonic)
        world = World(agent=two_repos.demo_agent(), clock=clock, forge=forge,
                      environ={**os.environ, **github.env()}, git_cache=tmp_path / "cache")
        ran = start_run(two_repos.request(tmp_path, repos), world, observer=meter)
        assert ran.status == "succeeded", (dict(mix.injected), ran.failure_reason)
        assert sum(mix.injected.values()) > 0
        assert ran.path.count("repair") == 2 and ran.path.count("land") == 1
        assert all(len(github.repository(n).pulls) == 1 for n in repos.values())
        assert applied_writes(github, "PUT", "/merge") == [
            "/api/v3/repos/octo/api/pulls/1/merge", "/api/v3/repos/octo/web/pulls/1/merge"]
