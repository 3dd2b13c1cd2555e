"""A simulated GitHub Actions world over the fake GitHub (`delivery.testing.github`), for
testing the Action the way users run it: the workflow files they copy from
docs/workflows/, read literally, in a control repository and target repositories.

    with FakeGitHub() as github:
        world = ActionsWorld(github, tmp_path, action_root=REPO_ROOT,
                             secrets={"DELIVERY_APP_PRIVATE_KEY": "pem"},
                             variables={"DELIVERY_APP_ID": "1"})
        world.add_repository("octo/control", workflows={"delivery.yml": control_yml},
                             files={"delivery.toml": ...})
        world.add_repository("octo/api", workflows={"ci.yml": ci, "delivery.yml": relay},
                             check_rules=(CheckRule("tests", command=[...]),))
        world.label_issue("octo/control", 1, title="Greet people by name")
        jobs = world.settle()          # every job its events start (a matrix at once)
        world.tick()                   # the schedule, on demand

Each job runs on a fresh runner (empty HOME, workspace and clone cache), or with
`self_hosted=True` on one that keeps HOME and the clone cache and gives every job another
workspace. `world.py` describes GitHub's delivery rules the world applies; `agent.py` is
the demo's scripted agent as a command a job can run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delivery.testing.actions.world import ActionsWorld, Job, WorldError

__all__ = ["ActionsWorld", "Job", "WorldError"]


def __getattr__(name: str) -> Any:
    # loaded on first use: a job's agent (`python -m delivery.testing.actions.agent`) runs
    # once per turn and needs none of the world, the fake GitHub or YAML
    if name in __all__:
        from delivery.testing.actions import world

        return getattr(world, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
