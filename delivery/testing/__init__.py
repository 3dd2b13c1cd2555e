"""The shipped test harness: the fake GitHub (`delivery.testing.github`) and a scripted
editing agent (`ScriptedAgent`, which `delivery demo` also uses), so that tests of
workflows built on delivery can run them end to end without a model or a network."""

from delivery.agents.scripted import ScriptedAgent, ScriptedSession, ScriptedTurn

__all__ = ["ScriptedAgent", "ScriptedSession", "ScriptedTurn"]
