"""Test harness shipped with delivery, for our tests and for people embedding delivery.

Import what you need from the submodules (nothing is imported eagerly here, so importing
`delivery.testing` stays cheap and never pulls in a fake server you do not use):

    delivery.testing.clock    FakeClock: sleeps are recorded and return at once
    delivery.testing.flows    flow(): the DOT text of a small workflow from its body
                              (digraph, goal, start and exit written around it)
    delivery.testing.runs     run a DOT string with scripted agent replies
    delivery.testing.cli      run the `delivery` command line in-process
    delivery.testing.github   a fake GitHub on 127.0.0.1 (REST, GraphQL, git over HTTP)
    delivery.testing.model_servers
                              scripted Anthropic Messages / OpenAI Responses servers on
                              127.0.0.1, for the real Claude Code and Codex CLIs offline
    delivery.testing.actions  a simulated GitHub Actions world over it (workflow files,
                              events, runners) that runs the Action's step
    delivery.testing.fleet    N repositories (local or fake GitHub) with CI failing once
                              in some, and an agent taking a time per folder it edits
                              (the campaign benchmark and chaos suite)
    ScriptedAgent             a scripted editing agent (`delivery demo` uses it)
    flow                      delivery.testing.flows.flow (cheap: text only)
"""

from delivery.agents.scripted import ScriptedAgent, ScriptedSession, ScriptedTurn
from delivery.testing.flows import flow

__all__ = ["ScriptedAgent", "ScriptedSession", "ScriptedTurn", "flow"]
