"""A prompt-injected agent against publish (SPEC §14 "No secret in a change"): the agent
runs any code in its worktree — here a script standing for it — and tries to get a secret
pushed past the change check. Each attempt fails the folder, names where the secret is
(never its value) and pushes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from people_helpers import Place, make_place

from delivery.engine.runner import RunOutcome

SECRET = "s3cr3t-value-from-the-environment"

FLOW = """
digraph D {
  graph [goal="Say hello", inputs="ticket", folders="web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  agent [shape=parallelogram, script="sh attack.sh"]
  ship [type=publish]
  start -> add -> agent -> ship -> exit
}
"""


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Place]:
    monkeypatch.setenv("DEMO_API_KEY", SECRET)
    yield from make_place("local", tmp_path / "local")


def attack(place: Place, script: str) -> RunOutcome:
    """A run whose agent runs `script` (sh, in the workspace; the worktree is `web`)."""
    workspace = place.root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "attack.sh").write_text("set -e\ncd web\n" + script, encoding="utf-8")
    return place.run(FLOW)


def assert_refused(place: Place, ran: RunOutcome, *named: str) -> None:
    assert ran.status == "failed", "published"
    assert ran.path[-1] == "ship"
    assert "holds a secret" in ran.failure_reason, ran.failure_reason
    for name in named:
        assert name in ran.failure_reason, ran.failure_reason
    assert SECRET not in ran.failure_reason
    assert place.head("web") == ""  # nothing pushed


def test_a_secret_committed_and_then_removed_is_not_pushed_in_the_history(
        place: Place) -> None:
    # the working tree is clean of it; the pushed history would not be
    ran = attack(place, 'echo "key=$DEMO_API_KEY" > leak.txt\ngit add leak.txt\n'
                        'git commit -qm "add config"\ngit rm -q leak.txt\n'
                        'git commit -qm "tidy"\necho hi > hello.txt\n')
    assert_refused(place, ran, "leak.txt", "commit ")


def test_a_secret_in_a_commit_message_is_not_pushed(place: Place) -> None:
    ran = attack(place, 'echo hi > hello.txt\ngit add hello.txt\n'
                        'git commit -qm "Say hello" -m "debug: $DEMO_API_KEY"\n')
    assert_refused(place, ran, "message of commit ")


def test_a_secret_in_a_file_name_is_not_pushed(place: Place) -> None:
    ran = attack(place, 'mkdir -p notes\necho hi > "notes/$DEMO_API_KEY.txt"\n')
    assert_refused(place, ran, "a file name under notes")


def test_a_textconv_driver_the_agent_configured_does_not_hide_a_secret(
        place: Place) -> None:
    # `git diff` shows a file through its textconv: one that prints nothing would blind
    # the scan to what is really committed
    ran = attack(place, 'git config diff.blank.textconv true\n'
                        'echo "*.cfg diff=blank" > .gitattributes\n'
                        'echo "key=$DEMO_API_KEY" > app.cfg\n')
    assert_refused(place, ran, "app.cfg")


HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout",
         "post-index-change", "reference-transaction", "post-rewrite", "pre-auto-gc")


def test_hooks_and_commands_the_agent_configured_do_not_run_in_deliverys_git_calls(
        place: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    # the worktree's repository is the clone cache's: an agent can write its hooks and its
    # configuration, which delivery's own git calls (status, add, commit, update-ref …)
    # would run — later, outside the agent's stage, with delivery's environment
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_" + "T0k3n" * 8)
    ran_log = place.root / "ran.log"
    spy = place.root / "spy.sh"
    spy.write_text(f'#!/bin/sh\necho "$0 $*" >> {ran_log}\ncat\n', encoding="utf-8")
    spy.chmod(0o755)
    common = 'C=$(git rev-parse --git-common-dir)\nmkdir -p "$C/hooks" hooks\n'
    hooks = "".join(f'cp {spy} "$C/hooks/{hook}"\ncp {spy} hooks/{hook}\n' for hook in HOOKS)
    config = (f"git config core.fsmonitor {spy}\n"
              f"git config filter.spy.clean {spy}\ngit config filter.spy.smudge {spy}\n"
              f"git config merge.spy.driver {spy}\ngit config diff.spy.textconv {spy}\n"
              f"git config gpg.program {spy}\ngit config commit.gpgSign true\n"
              'echo "* filter=spy merge=spy diff=spy" > .gitattributes\n'
              "echo hi > hello.txt\n")
    ran = attack(place, common + hooks + config)
    assert ran.status == "succeeded", ran.failure_reason
    assert not ran_log.exists(), ran_log.read_text(encoding="utf-8")
    assert place.read("web", "hello.txt") == "hi\n"


def test_a_hooks_path_the_agent_set_does_not_run_in_deliverys_git_calls(
        place: Place) -> None:
    ran_log = place.root / "ran.log"
    script = "".join(f'printf "#!/bin/sh\\necho {hook} >> {ran_log}\\n" > hooks/{hook}\n'
                     f"chmod +x hooks/{hook}\n" for hook in HOOKS)
    ran = attack(place, f"mkdir ../hooks && cd ..\n{script}cd web\n"
                        "git config core.hooksPath \"$PWD/../hooks\"\necho hi > hello.txt\n")
    assert ran.status == "succeeded", ran.failure_reason
    assert not ran_log.exists(), ran_log.read_text(encoding="utf-8")


def test_a_ref_the_agent_named_like_the_base_does_not_stand_for_it(place: Place) -> None:
    # `origin/main` is a tag or a branch of that name before it is the remote-tracking ref
    # (git's lookup order): the agent's tag would make its own commit the base
    workspace = place.root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "attack.sh").write_text(
        "set -e\ncd web\necho hi > hello.txt\ngit add hello.txt\ngit commit -qm hi\n"
        "git tag origin/main HEAD\ngit branch origin/main HEAD\n", encoding="utf-8")
    ran = place.run(FLOW.replace("ship [type=publish]", 'ship [type=probe, probe="diff"]'))
    assert ran.status == "succeeded", ran.failure_reason
    assert ran.context["web.diff.files"] == 1
