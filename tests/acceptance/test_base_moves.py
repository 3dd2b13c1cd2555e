"""The base moves (issue 19, item 8): a commit on the base branch that conflicts with the
PR → the probe says CONFLICTS → the bundled deliver.dot repairs with the conflicting files
in the prompt → merged; on the fake GitHub and on the local forge."""

from __future__ import annotations

from people_helpers import TICKET, Between, Place, RepairingAgent, bundled_deliver
from people_helpers import place as place  # the fixture, for every test here

from delivery.testing.person import push_commit


def test_a_conflicting_commit_on_the_base_is_repaired_and_the_pr_merged(place: Place) -> None:
    agent = RepairingAgent()

    def move_base() -> None:
        push_commit(place.git_dir("web"), "main",
                    {"shared.txt": "greeting: hi there\n"}, "A person changes the base")

    ran = place.run("", workflow=bundled_deliver(), agent=agent,
                    inputs={"ticket": TICKET}, observer=Between({"publish": move_base}))
    assert ran.status == "succeeded", ran.failure_reason
    routes = [node for node in ran.path if node in ("repair", "land", "clean")]
    assert routes == ["repair", "land", "clean"]  # one repair, then merged
    repair_prompt = next(prompt for node, prompt in agent.prompts if node == "repair")
    assert "CONFLICTS" in repair_prompt
    assert '"conflicting_files": ["shared.txt"]' in repair_prompt
    main = place.read("web", "shared.txt", "refs/heads/main") or ""
    assert "greeting: hi there" in main and "greeting: hello, people" in main
    assert place.read("web", "app.py", "refs/heads/main") == "print('hello, people')\n"
    assert place.pulls("web") == [(1, "merged")]
