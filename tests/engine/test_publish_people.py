"""Publish against the PR head, with people on the branch (SPEC §7.1), on the local forge
and on the fake GitHub: what differs from the pushed head is pushed (a revert to the base
content included); a person's commits are kept and the run's work goes on top; a branch a
person rewrote is never merged with or pushed over; a conflict fails naming the folder and
files and keeps the run's work on a backup ref; a closed PR is neither reopened nor
replaced."""

from __future__ import annotations

import subprocess

from git_helpers import git
from people_helpers import BRANCH, FILES, Between, Place
from people_helpers import place as place  # the fixture, for every test here

from delivery.testing import flow
from delivery.testing.person import force_push_without, push_commit


def two_steps(first: str, second: str) -> str:
    return flow(f"""
    add [type=worktree_add]
    first [shape=parallelogram, script="{first}"]
    ship [type=publish]
    second [shape=parallelogram, script="{second}"]
    ship_again [type=publish]
    start -> add -> first -> ship -> second -> ship_again -> exit
    """, goal="Say hello", graph='inputs="ticket", folders="web"', name="D")


WRITE_APP = "printf 'print(1)\\\\n' > web/app.py"
WRITE_APP_AND_CREDS = WRITE_APP + "; printf 'token\\\\n' > web/creds.txt"
NOTES = "printf 'notes\\\\n' > web/notes.txt"


def test_a_repair_that_puts_a_file_back_to_its_base_content_is_pushed(place: Place) -> None:
    revert = "printf \\\"print('hello')\\\\n\\\" > web/app.py"
    ran = place.run(two_steps(WRITE_APP, revert))
    assert ran.status == "succeeded", ran.failure_reason
    assert place.read("web", "app.py") == FILES["app.py"]  # the PR head holds the repair
    assert place.pulls("web") == [(1, "open")]


def test_a_commit_a_person_pushed_is_kept_and_the_runs_work_goes_on_top(
        place: Place) -> None:
    pushed: list[str] = []

    def person() -> None:
        pushed.append(push_commit(place.git_dir("web"), BRANCH, {"person.txt": "mine\n"},
                                  "A person's fix"))

    ran = place.run(two_steps(WRITE_APP, NOTES), observer=Between({"ship": person}))
    assert ran.status == "succeeded", ran.failure_reason
    head = place.head("web")
    assert place.read("web", "person.txt") == "mine\n"
    assert place.read("web", "notes.txt") == "notes\n"
    # rebased: the run's commit sits right on the person's, no merge commit
    assert git(place.git_dir("web"), "rev-parse", f"{head}^") == pushed[0]
    assert git(place.git_dir("web"), "rev-list", "--count", "--merges", head) == "0"
    assert place.pulls("web") == [(1, "open")]


def test_a_file_a_person_removed_by_a_force_push_stays_removed(place: Place) -> None:
    before: list[str] = []

    def rewrite() -> None:
        before.append(place.head("web"))
        force_push_without(place.git_dir("web"), BRANCH, "main", "creds.txt")

    ran = place.run(two_steps(WRITE_APP_AND_CREDS, NOTES), observer=Between({"ship": rewrite}))
    assert ran.status == "succeeded", ran.failure_reason
    head = place.head("web")
    assert place.read("web", "creds.txt") is None
    assert place.read("web", "notes.txt") == "notes\n"  # the run's new work, re-applied
    assert place.read("web", "app.py") == "print(1)\n"
    # the run's old history is neither merged nor pushed again
    merged = subprocess.run(["git", "merge-base", "--is-ancestor", before[0], head],
                            cwd=place.git_dir("web"), check=False)
    assert merged.returncode == 1
    assert not (place.root / "ws" / "web" / "creds.txt").exists()


def test_a_conflict_with_a_persons_commit_fails_naming_the_folder_and_files(
        place: Place) -> None:
    theirs: list[str] = []

    def person() -> None:
        theirs.append(push_commit(place.git_dir("web"), BRANCH, {"app.py": "print(7)\n"},
                                  "A person's take"))

    ran = place.run(two_steps(WRITE_APP, "printf 'print(2)\\\\n' > web/app.py"),
                    observer=Between({"ship": person}))
    assert ran.status == "failed"
    reason = ran.failure_reason
    assert "folder 'web'" in reason and "app.py" in reason
    assert "refs/delivery/backup/" + BRANCH in reason
    assert place.head("web") == theirs[0]  # nothing pushed over the person's commit
    backup = git(place.root / "ws" / "web", "show", f"refs/delivery/backup/{BRANCH}:app.py")
    assert backup == "print(2)"  # the run's work is kept
    assert place.read("web", "app.py", f"refs/delivery/backup/{BRANCH}") == "print(2)\n"


def test_work_on_a_file_a_person_removed_fails_saying_the_branch_was_rewritten(
        place: Place) -> None:
    def rewrite() -> None:
        force_push_without(place.git_dir("web"), BRANCH, "main", "creds.txt")

    ran = place.run(two_steps(WRITE_APP_AND_CREDS, "printf 'other\\\\n' > web/creds.txt"),
                    observer=Between({"ship": rewrite}))
    assert ran.status == "failed"
    assert "rewritten" in ran.failure_reason and "creds.txt" in ran.failure_reason
    assert place.read("web", "creds.txt") is None


def test_a_pr_a_person_closed_is_neither_reopened_nor_replaced(place: Place) -> None:
    pushed: list[str] = []

    def close() -> None:
        pushed.append(place.head("web"))
        place.people.close(place.repos["web"], 1)

    ran = place.run(two_steps(WRITE_APP, NOTES), observer=Between({"ship": close}))
    assert ran.status == "failed"
    assert "PR #1" in ran.failure_reason and "closed" in ran.failure_reason
    assert place.pulls("web") == [(1, "closed")]
    assert place.head("web") == pushed[0]  # the run's new work was not pushed to it
    again = place.run(two_steps(WRITE_APP, NOTES))  # a second run on the same ticket
    assert again.status == "failed" and "PR #1" in again.failure_reason
    assert place.pulls("web") == [(1, "closed")]


MERGE_FLOW = flow("""
add [type=worktree_add]
change [shape=parallelogram, script="printf 'print(1)\\\\n' > web/app.py"]
ship [type=publish]
land [type=merge]
start -> add -> change -> ship -> land -> exit
""", goal="Say hello", graph='inputs="ticket", folders="web"', name="D")


def test_a_pr_with_an_unresolved_thread_is_not_merged(place: Place) -> None:
    def reviewer() -> None:
        place.people.open_thread(place.repos["web"], 1, "Do not merge yet.")

    ran = place.run(MERGE_FLOW, observer=Between({"ship": reviewer}))
    assert ran.status == "failed"
    assert "PR #1 has 1 unresolved review thread" in ran.failure_reason
    assert place.pulls("web") == [(1, "open")]
