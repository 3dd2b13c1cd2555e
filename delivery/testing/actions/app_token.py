"""`actions/create-github-app-token` in the simulated Actions world: an installation token
minted on the fake GitHub with the step's inputs, as the action asks GitHub for one —
`owner` (default: the job's repository's), `repositories` (comma or newline separated;
with neither input, only the job's repository) and each `permission-<name>` input (none:
all the installation's). The fake then refuses what the token may not do, so a workflow
file asking for too little is seen failing in the world, not only in the field.

The App is the one registered on the fake with the step's `app-id` (one is registered
and installed, with the docs' permissions, on the owner when none is yet).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from delivery.testing.github import FakeGitHub
from delivery.testing.github.apps import FakeApp, Installation

_DEFAULT_APP_ID = 4242


def step(github: FakeGitHub, given: Mapping[str, str], repository: str,
         steps: list[str]) -> str | None:
    """The step's token, its scope recorded in `steps` (the private key left out); None,
    with the reason recorded, when the step fails as the action would."""
    if not given.get("app-id") or not given.get("private-key"):
        steps.append("failed: the App's id or private key is not set")
        return None
    scope = {key: value for key, value in given.items() if key != "private-key"}
    steps.append(f"app token: {json.dumps(scope, sort_keys=True)}")
    try:
        return mint(github, given, repository)
    except ValueError as error:  # GitHub's 422: more than the installation may give
        steps.append(f"failed: {error}")
        return None


def mint(github: FakeGitHub, given: Mapping[str, str], repository: str) -> str:
    """The token the step outputs; ValueError (GitHub's 422 message) when the request
    asks for more than the App's installation may give."""
    app = _app(github, given.get("app-id", ""))
    job_owner, _, job_name = repository.partition("/")
    owner = given.get("owner") or job_owner
    installation = _installation(app, owner)
    names = tuple(name.strip() for name in
                  given.get("repositories", "").replace("\n", ",").split(",") if name.strip())
    if not names and not given.get("owner"):
        names = (job_name,)
    permissions = {key.removeprefix("permission-").replace("-", "_"): value.strip()
                   for key, value in given.items() if key.startswith("permission-")}
    issued = github.apps.mint(app, installation, permissions=permissions or None,
                              repositories=names or None)
    return issued.token


def _app(github: FakeGitHub, app_id: str) -> FakeApp:
    number = int(app_id) if app_id.strip().isdigit() else _DEFAULT_APP_ID
    found = github.apps.apps.get(number)
    return found if found is not None else github.register_app(number)


def _installation(app: FakeApp, owner: str) -> Installation:
    found = next((i for i in app.installations.values()
                  if i.owner.lower() == owner.lower()), None)
    return found if found is not None else app.install(owner)
