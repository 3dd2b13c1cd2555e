"""The docs' Action quick start (docs/github-action.md, "Setting it up") as a new user
follows it, in the simulated Actions world: an empty control repository, `delivery action
init` run in its checkout, then the steps it prints — the App's variable and secrets set,
the labels created, the relay copied into each target repository, the files pushed — and
the user's own choices (their workflow file, their agent profile, `max-runners`).

    world, printed = quick_start(github, tmp_path, targets, workflow=FLOW, toml=TOML,
                                 max_runners=3)
    world.label_issue(CONTROL, 1, title="Add a changelog line")
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from delivery.testing.actions import ActionsWorld
from delivery.testing.cli import invoke
from delivery.testing.github import CheckRule, FakeGitHub

ROOT = Path(__file__).resolve().parents[1]
CONTROL = "octo/control"
ACTION = f"octo/delivery@{'c' * 40}"  # the release the user vetted (read from this checkout)
CI_WORKFLOW = """name: ci
on: pull_request
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8
      - run: make test
"""
# the values a user pastes; the names come from what init prints
VALUES = {"DELIVERY_APP_ID": "12345",
          "DELIVERY_APP_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----fake",
          "ANTHROPIC_API_KEY": "sk-ant-fake-key-0123456789"}
_SETTING = re.compile(r"^\s+(variable|secret)\s+([A-Z_]+)\s", re.MULTILINE)
_RELAY = re.compile(r"Copy (\S+) to (\.github/workflows/[\w.-]+) in each target repository")


def agent_toml(delay: float, log: Path) -> str:
    """The control repository's delivery.toml: `claude` is the per-folder scripted agent."""
    command = (f"{sys.executable} -m delivery.testing.actions.folder_agent "
               f"--delay {delay} --log {log}")
    return f'[profiles.claude]\nbackend = "command"\ncommand = "{command}"\ntimeout = "2m"\n'


def quick_start(github: FakeGitHub, root: Path, targets: list[str], *, workflow: str,
                toml: str, max_runners: int, monkeypatch: pytest.MonkeyPatch,
                self_hosted: bool = False) -> tuple[ActionsWorld, str]:
    """The world after the quick start; what init printed."""
    world = ActionsWorld(github, root / "world", action_root=ROOT, self_hosted=self_hosted)
    # the repositories as they were: an empty control repository, targets with their CI
    world.add_repository(CONTROL, workflows={}, files={"README.md": "# control\n"},
                         collaborators={"alice": "write"})
    for target in targets:
        world.add_repository(target, workflows={"ci.yml": CI_WORKFLOW},
                             files={"README.md": f"# {target}\n", "Makefile": "test:\n\ttrue\n"},
                             check_rules=(CheckRule("test", predicate=lambda tree: True),))
    checkout = root / "control"
    checkout.mkdir()
    listing = root / "repos.txt"
    listing.write_text("".join(f"{target}\n" for target in targets), encoding="utf-8")
    for name, value in github.env().items():  # the user's own token, for the labels
        monkeypatch.setenv(name, value)
    done = invoke("action", "init", "--repos", listing, "--state-repo", CONTROL,
                  "--action", ACTION, "--create-labels", cwd=checkout)
    assert done.code == 0, done.err
    printed = done.out
    # step 3: the App's variable and secrets, by the names printed
    for kind, name in _SETTING.findall(printed):
        (world.variables if kind == "variable" else world.secrets)[name] = VALUES[name]
    # step 4: the relay, copied where the output says, in each target repository
    [(relay, there)] = _RELAY.findall(printed)
    for target in targets:
        world.push(target, {there: Path(relay if Path(relay).is_absolute() else
                                         checkout / relay).read_text(encoding="utf-8")})
    # the user's choices: their workflow and agent, and how many runners a stage may use
    control = checkout / ".github" / "workflows" / "delivery.yml"
    text = control.read_text(encoding="utf-8")
    assert "          max-runners: 20\n" in text
    control.write_text(text.replace("          max-runners: 20\n",
                                    f"          max-runners: {max_runners}\n"
                                    "          workflow: campaign.dot\n"), encoding="utf-8")
    (checkout / "campaign.dot").write_text(workflow, encoding="utf-8")
    (checkout / "delivery.toml").write_text(toml, encoding="utf-8")
    # step 6: commit and push (the relay's copy stays in the control repository too)
    world.push(CONTROL, {path.relative_to(checkout).as_posix(): path.read_text(encoding="utf-8")
                         for path in checkout.rglob("*") if path.is_file()})
    return world, printed
