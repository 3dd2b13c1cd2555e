"""A fake GitHub over real HTTP on 127.0.0.1 for tests: REST under `/api/v3`, GraphQL at
`/api/graphql` (executed against GitHub's schema), git smart HTTP over real bare
repositories, fault injection and a record of every request.

    with FakeGitHub() as github:
        github.create_repo("octo/web", check_rules=(CheckRule("ci", predicate=...),))
        ...  # point clients at github.env()

pytest users get fixtures (`fake_github`, `fake_github_clock`, `fake_github_env`) with
`pytest_plugins = ["delivery.testing.github.pytest_plugin"]` in their conftest.py.
"""

from delivery.testing.github import faults
from delivery.testing.github.clock import EngineClock, ManualClock
from delivery.testing.github.faults import Fault
from delivery.testing.github.http import RecordedRequest
from delivery.testing.github.server import FakeGitHub, fake_github
from delivery.testing.github.state import CheckRule, Tree

__all__ = ["CheckRule", "EngineClock", "FakeGitHub", "Fault", "ManualClock", "RecordedRequest",
           "Tree", "fake_github", "faults"]
