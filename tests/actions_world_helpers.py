"""The simulated Actions world of the acceptance tests: the docs' workflow files copied
literally into a control repository (`octo/control`) and two target repositories
(`octo/api`, `octo/web`, the demo's samples with a CI that runs their tests), the demo's
scripted agent standing in for `claude` (the control repository's delivery.toml), and a
reviewer who asks for a change on web once and approves the commit that answers it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from delivery.cli.demo_files import REVIEW_TEXT, REVIEWER, SAMPLES
from delivery.testing.actions import ActionsWorld, Job
from delivery.testing.github import FakeGitHub
from delivery.testing.two_repos import ci_rule

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "workflows"
CONTROL, API, WEB = "octo/control", "octo/api", "octo/web"
TARGETS = (API, WEB)
# the target repositories' own CI; the relay listens for its name (`workflows: [ci]`)
CI_WORKFLOW = """name: ci
on: pull_request
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8
      - run: python -m unittest
"""
# `claude` in the control repository's profiles: the demo's scripted agent as a command
DELIVERY_TOML = f"""[profiles.claude]
backend = "command"
command = "{sys.executable} -m delivery.testing.actions.agent"
timeout = "2m"
"""
# the docs' control workflow checks with `make test`, run in each target repository's
# worktree (SPEC §8.1): each has its own Makefile
MAKEFILE = f"test:\n\t{sys.executable} -m compileall -q .\n"
# what `delivery action init` writes for the two targets: the action reads the folders here
DELIVERY_REPOS = "api=octo/api\nweb=octo/web\n"
SECRETS = {"DELIVERY_APP_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----fake",
           "ANTHROPIC_API_KEY": "sk-ant-fake-key-0123456789"}
VARIABLES = {"DELIVERY_APP_ID": "12345"}


def doc_workflow(name: str, edit: Callable[[str], str] | None = None) -> str:
    text = (DOCS / name).read_text(encoding="utf-8")
    return text if edit is None else edit(text)


def build_world(github: FakeGitHub, root: Path, *, relays: bool = True,
                self_hosted: bool = False,
                edit: Callable[[str], str] | None = None) -> ActionsWorld:
    """The three repositories with the docs' files; `relays=False` leaves the target
    repositories without the relay (only the control repository's schedule moves runs);
    `edit` changes the control repository's copies (a mistake a test makes on purpose)."""
    world = ActionsWorld(github, root, action_root=ROOT, self_hosted=self_hosted,
                         secrets=SECRETS, variables=VARIABLES)
    world.add_repository(CONTROL, workflows={"delivery.yml": doc_workflow("delivery.yml", edit),
                                             "delivery-work.yml": doc_workflow(
                                                 "delivery-work.yml", edit)},
                         files={"README.md": "# control\n", "delivery.toml": DELIVERY_TOML,
                                ".github/delivery-repos": DELIVERY_REPOS},
                         collaborators={"alice": "write", REVIEWER: "write"})
    for repository in TARGETS:
        workflows = {"ci.yml": CI_WORKFLOW}
        if relays:
            workflows["delivery.yml"] = doc_workflow("delivery-relay.yml")
        world.add_repository(repository, workflows=workflows,
                             files={**SAMPLES[repository.split("/")[1]], "Makefile": MAKEFILE},
                             check_rules=(ci_rule(),), collaborators={REVIEWER: "write"})
    world.people.append(reviewer)
    return world


def reviewer(world: ActionsWorld) -> None:
    """After each job: asks for a change on web's open PR once, and approves once a new
    commit answers it."""
    repo = world.github.repository(WEB)
    for number, pr in repo.pulls.items():
        if pr.state != "open":
            continue
        mine = [review for review in pr.reviews if review.author == REVIEWER]
        if not mine:
            world.review(WEB, number, by=REVIEWER, state="CHANGES_REQUESTED",
                         body=REVIEW_TEXT)
        elif mine[-1].state == "CHANGES_REQUESTED" and \
                world.github.state.head_sha(repo, pr) != mine[-1].commit_sha:
            world.review(WEB, number, by=REVIEWER, state="APPROVED", body="Thanks.")


def merge_order(github: FakeGitHub) -> list[str]:
    """The repositories whose PRs were merged, in the order the merges were asked for."""
    order = []
    for request in github.requests:
        if request.method == "PUT" and request.path.endswith("/merge") and \
                request.status == 200:
            order.append("/".join(request.path.split("/repos/", 1)[1].split("/")[:2]))
    return order


def describe(jobs: list[Job]) -> str:
    """One line per job, for assertion messages."""
    return "\n".join(f"#{job.number} {job.repository} {job.event} {job.state} "
                     f"{job.outputs.get('status', '')} {job.steps[-1:]} "
                     f"{job.stdout[-300:]!r} {job.stderr[-300:]!r}" for job in jobs)
