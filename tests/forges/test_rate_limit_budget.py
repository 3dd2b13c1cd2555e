"""GitHub's limits as a budget (SPEC §7.1; issue 37 item 2), on the GitHub forge against
the fake GitHub with its secondary limits on: writes are counted per token in GitHub's
windows; a write that fits after a short wait waits, one that would not fit within the
stage's patience (the retry budget's 300 s) — or a `Retry-After` or primary reset longer
than that — raises RateLimitPause saying in UTC when the run may go on, and sends nothing
GitHub would refuse. The windows survive a save and restore (another process or job)."""

from __future__ import annotations

import pytest
from github_helpers import ManualClock

from delivery.errors import PauseReason
from delivery.forges.github import GitHubForge
from delivery.forges.pacing import Pacer
from delivery.forges.write_budget import RateLimitPause, WriteBudget, utc_text
from delivery.testing.github import FakeGitHub, faults
from probes.github import RetryBudget
from probes.retry import RetryNotice, announcing

BRANCH = "delivery/T-1"
MARKER = "<!-- m -->"


def forge_on(fake: FakeGitHub, clock: ManualClock, budget: WriteBudget | None = None,
             saved: object = None) -> GitHubForge:
    """A forge as a run opens it (a new one per process), its windows restored."""
    pacer = Pacer(clock=clock, sleep=clock.sleep, write_spacing=0,
                  budget=budget or WriteBudget())
    if saved is not None:
        pacer.restore(saved)
    return GitHubForge.from_environment(fake.env(), sleep=clock.sleep, clock=clock,
                                        budget=RetryBudget(attempts=4, wait_seconds=300),
                                        pacer=pacer)


@pytest.fixture
def number(fake: FakeGitHub) -> int:
    fake.create_repo("octo/web", files={"app.py": "v1\n"})
    fake.push_files("octo/web", BRANCH, {"app.py": "v2\n"})
    return fake.open_pull("octo/web", BRANCH, title="T-1")


def statuses(forge: GitHubForge, fake: FakeGitHub, number: int, count: int) -> None:
    sha = fake.state.head_sha(fake.repository("octo/web"), fake.pull("octo/web", number))
    for n in range(count):
        forge.set_commit_status("octo/web", sha, context="ci", state="pending",
                                description=str(n))


def test_a_write_past_the_minutes_limit_waits_for_room_and_github_refuses_nothing(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    limits = fake.enforce_secondary_limits(per_minute=80)
    forge = forge_on(fake, clock)
    statuses(forge, fake, number, 81)
    assert limits.refused == 0
    assert len(fake.write_requests()) == 81
    assert forge.pacer.waited == pytest.approx(60.0)  # the 81st waited for the first


def test_the_write_past_the_hours_limit_pauses_until_it_fits_and_sends_nothing(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    limits = fake.enforce_secondary_limits(per_minute=80, per_hour=12)
    forge = forge_on(fake, clock, WriteBudget(per_minute=80, per_hour=12))
    first = clock()
    statuses(forge, fake, number, 12)
    sent = len(fake.write_requests())
    with pytest.raises(RateLimitPause) as paused:
        forge.upsert_comment("octo/web", number, MARKER, f"{MARKER} hello")
    assert paused.value.reason is PauseReason.RATE_LIMIT
    assert paused.value.until == pytest.approx(first + 3600)
    assert utc_text(first + 3600) in str(paused.value)
    assert "12 content-creating requests in the last hour" in str(paused.value)
    assert len(fake.write_requests()) == sent and limits.refused == 0


def test_the_windows_travel_with_the_run_to_the_next_process(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    before = forge_on(fake, clock, WriteBudget(per_hour=5))
    statuses(before, fake, number, 5)
    saved = before.pacer.saved()
    assert saved is not None and before.pacer.saved() is None  # taken once, until it changes
    clock.advance(600)
    after = forge_on(fake, clock, WriteBudget(per_hour=5), saved=saved)
    with pytest.raises(RateLimitPause):
        statuses(after, fake, number, 1)
    clock.advance(3000)  # the first write's hour is over
    statuses(after, fake, number, 1)
    assert len(fake.write_requests()) == 6


def test_a_retry_after_longer_than_the_patience_pauses_and_the_resumed_write_is_not_doubled(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    forge = forge_on(fake, clock)
    fake.inject(faults.secondary_rate_limit(
        900, method="POST", path=f"/api/v3/repos/octo/web/issues/{number}/comments"))
    asked = clock()
    with pytest.raises(RateLimitPause) as paused:
        forge.upsert_comment("octo/web", number, MARKER, f"{MARKER} hello")
    assert paused.value.until == pytest.approx(asked + 900)
    assert "secondary rate limit" in str(paused.value)
    clock.advance(900)
    forge_on(fake, clock).upsert_comment("octo/web", number, MARKER, f"{MARKER} hello")
    assert [c.body for c in fake.repository("octo/web").comments.values()] == [
        f"{MARKER} hello"]


def test_a_primary_limit_spent_until_a_later_reset_pauses_the_run(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    forge = forge_on(fake, clock)
    fake.inject(faults.primary_rate_limit(1800, method="PATCH",
                                          path=f"/api/v3/repos/octo/web/pulls/{number}"))
    with pytest.raises(RateLimitPause) as paused:
        forge.update_pull_request_body("octo/web", number, "new body")
    assert paused.value.until == pytest.approx(clock() + 1801, abs=2)


def test_an_answer_saying_the_primary_limit_is_spent_holds_the_next_write() -> None:
    clock = ManualClock()
    pacer = Pacer(clock=clock, sleep=clock.sleep, write_spacing=0)
    reset = int(clock()) + 1200
    pacer.note_answer("", {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
    with pytest.raises(RateLimitPause) as paused, pacer.write("", patience=300):
        pass
    assert paused.value.until == pytest.approx(reset)
    assert "primary rate limit" in str(paused.value)
    pacer.note_answer("", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset),
                           "x-ratelimit-resource": "graphql"})  # another pool: ignored
    clock.advance(1200)
    with pacer.write("", patience=300):  # the reset has come: the write goes
        pass
    assert pacer.writes == 1


def test_a_wait_for_room_under_the_limits_is_said_before_it_starts(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    forge = forge_on(fake, clock)
    told: list[RetryNotice] = []
    with announcing(told.append):
        statuses(forge, fake, number, 81)
    [notice] = told
    assert notice.wait == pytest.approx(60.0)
    assert notice.line().startswith("GitHub: the next write: 80 content-creating requests "
                                    "in the last minute")
    assert notice.line().endswith("; waiting 60s")
