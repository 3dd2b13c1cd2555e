"""What publish refuses to push (SPEC §14 "No secret in a change", "Branches are the run's
own"), on the local forge and on the fake GitHub: a known secret value or a token-shaped
string in a folder's change, a nested git repository an agent made inside a worktree, and a
branch a person deleted after closing its PR. Each fails the folder naming what is wrong
(never a secret's value) and pushes nothing."""

from __future__ import annotations

import pytest
from people_helpers import BRANCH, Between, Place
from people_helpers import place as place  # the fixture, for every test here

from delivery.testing.person import delete_branch

FLOW = """
digraph D {{
  graph [goal="Say hello", inputs="ticket", folders="web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram, script="{change}"]
  ship [type=publish]
  start -> add -> change -> ship -> exit
}}
"""

SECRET = "s3cr3t-value-from-the-environment"
# a token shape whatever its source (not any variable's value)
TOKEN_SHAPED = "ghp_" + "A1b2C3d4E5" * 4


def test_a_known_secret_value_in_a_change_stops_publish_naming_the_file(
        place: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_API_KEY", SECRET)
    write = ("printf 'ok\\\\n' > web/readme.txt; "
             "printf \\\"key = $DEMO_API_KEY\\\\n\\\" > web/config.py")
    ran = place.run(FLOW.format(change=write))
    assert ran.status == "failed"
    assert "folder 'web'" in ran.failure_reason and "config.py" in ran.failure_reason
    assert "readme.txt" not in ran.failure_reason  # only the file that holds it
    assert SECRET not in ran.failure_reason
    assert place.head("web") == ""  # nothing pushed
    assert place.pulls("web") == []
    kept = (place.root / "ws" / "web" / "config.py").read_text(encoding="utf-8")
    assert kept == f"key = {SECRET}\n"  # the work stays in the worktree, for a person


def test_a_token_shaped_string_in_a_change_stops_publish(place: Place) -> None:
    # put together by the script (the run's copy of a workflow holds no token shape)
    write = f"printf 'token: ghp_%s\\\\n' {TOKEN_SHAPED[4:]} > web/notes.md"
    ran = place.run(FLOW.format(change=write))
    assert ran.status == "failed"
    assert "notes.md" in ran.failure_reason and TOKEN_SHAPED not in ran.failure_reason
    assert place.head("web") == ""


def test_code_that_reads_an_authorization_header_is_no_secret(place: Place) -> None:
    write = "printf 'auth = headers[\\\\\\\"Authorization\\\\\\\"]\\\\n' > web/auth.py"
    ran = place.run(FLOW.format(change=write))
    assert ran.status == "succeeded", ran.failure_reason
    assert place.read("web", "auth.py") == 'auth = headers["Authorization"]\n'


def test_a_nested_repository_in_a_worktree_fails_publish_naming_it(place: Place) -> None:
    nested = ("mkdir -p web/vendor/lib && git -C web/vendor/lib init -q && printf 'x\\\\n' > "
              "web/vendor/lib/lib.py && printf 'y\\\\n' > web/app2.py")
    ran = place.run(FLOW.format(change=nested))
    assert ran.status == "failed"
    assert "folder 'web'" in ran.failure_reason
    assert "vendor/lib" in ran.failure_reason and "nested git repository" in ran.failure_reason
    assert place.head("web") == ""  # no dangling gitlink pushed
    assert (place.root / "ws" / "web" / "vendor" / "lib" / "lib.py").is_file()


AGAIN = """
digraph D {
  graph [goal="Say hello", inputs="ticket", folders="web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  first [shape=parallelogram, script="printf 'leak\\\\n' > web/leak.txt"]
  ship [type=publish]
  second [shape=parallelogram, script="printf 'more\\\\n' > web/more.txt"]
  ship_again [type=publish]
  start -> add -> first -> ship -> second -> ship_again -> exit
}
"""


def test_a_branch_a_person_deleted_after_closing_its_pr_is_not_pushed_again(
        place: Place) -> None:
    def take_it_down() -> None:
        place.people.close(place.repos["web"], 1)
        delete_branch(place.git_dir("web"), BRANCH)

    ran = place.run(AGAIN, observer=Between({"ship": take_it_down}))
    assert ran.status == "failed"
    assert "folder 'web'" in ran.failure_reason and "deleted" in ran.failure_reason
    assert "PR #1" in ran.failure_reason
    assert place.head("web") == ""  # the leaked file is not pushed back
    assert place.pulls("web") == [(1, "closed")]
