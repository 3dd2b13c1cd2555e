"""The people soak (issue 19): the bundled deliver.dot on two repositories while a scripted
person (`delivery.testing.person.ScriptedPerson`) acts between stages at random — pushes a
commit, force-pushes a rewrite that drops a file, resolves a thread and opens another,
requests changes, closes and reopens a PR (now and then closes one for good), moves the
base. 20 seeds in CI (seed 0 on the fake GitHub, the others on the local forge), 100
with --long. Whatever the person did:

- nothing the person pushed is lost, nothing the person removed comes back;
- no PR is merged while a thread is unresolved or changes are requested;
- never two PRs for one branch, never a reply posted twice in a thread;
- the run ends merged, failed with a reason naming the PR, or paused — never a traceback.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from people_helpers import BRANCH, TICKET, RepairingAgent, bundled_deliver, make_place

from delivery.testing.person import ScriptedPerson

pytestmark = pytest.mark.slow  # a soak: whole deliveries shared with a scripted person

NAMES_A_PR = re.compile(r"#\d+|/pull/\d+")
GITHUB_EVERY = 20  # seed 0 on the fake GitHub in CI; 0, 20, 40… with --long (slower)


def test_a_delivery_shared_with_a_person_keeps_their_work_and_ends_cleanly(
        people_seed: int, tmp_path: Path) -> None:
    kind = "github" if people_seed % GITHUB_EVERY == 0 else "local"
    for place in make_place(kind, tmp_path, folders=("api", "web")):
        person = ScriptedPerson(place.people, place.repos, BRANCH, seed=people_seed)
        ran = place.run("", workflow=bundled_deliver(), agent=RepairingAgent(),
                        observer=person, inputs={"ticket": TICKET, "max_repairs": "12"})
        story = f"{kind} seed {people_seed}: {person.actions} -> {ran.status}: " \
                f"{ran.failure_reason}"
        assert ran.status in ("succeeded", "failed", "paused"), story
        assert "Traceback" not in (ran.failure_reason or ""), story
        if ran.status == "succeeded":
            assert all(place.pulls(folder) == [(1, "merged")] for folder in place.repos), story
        if ran.status == "failed":
            assert NAMES_A_PR.search(ran.failure_reason), story
        assert person.lost() == [], story
        assert person.returned() == [], story
        assert person.blocked_merges == [], story
        for folder, repository in place.repos.items():
            assert len(place.pulls(folder)) <= 1, story
            for pr, _ in place.pulls(folder):
                replies = Counter(place.people.bot_replies(repository, pr))
                assert all(count == 1 for count in replies.values()), story
        print(story)
