"""What an agent stage is told about the run so far (fidelity, SPEC §5).

`full` shares one session and needs no preamble (except once after a resume, when the
session is gone); `truncate` gives the goal only; `compact` and `summary:*` list the most
recently completed stages. The text comes from `templates/preamble.md.j2`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources

from jinja2 import StrictUndefined, Template
from jinja2.sandbox import ImmutableSandboxedEnvironment

from delivery.lang.model import NodeType, Workflow

RECENT_STAGES = 50
_SKIPPED = (NodeType.START, NodeType.CONDITIONAL, NodeType.EXIT)


@cache
def _template() -> Template:
    source = resources.files("delivery.bundled.templates").joinpath("preamble.md.j2")
    environment = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    return environment.from_string(source.read_text(encoding="utf-8"))


def recent_stages(workflow: Workflow, path: Sequence[str],
                  outcomes: Mapping[str, str]) -> list[tuple[str, str]]:
    """(node, outcome) of the last RECENT_STAGES completed stages, each once, oldest first.

    Walked from the end: the path grows with the run and this runs before every agent stage.
    """
    recent: dict[str, str] = {}
    for node_id in reversed(path):
        if len(recent) == RECENT_STAGES:
            break
        if node_id not in recent and node_id in outcomes and \
                workflow.nodes[node_id].type not in _SKIPPED:
            recent[node_id] = outcomes[node_id]
    return list(reversed(recent.items()))


def render_preamble(fidelity: str, goal: str, stages: Sequence[tuple[str, str]]) -> str:
    """Pairs, not dicts: the sandbox checks every attribute read, which cost five times as
    much as the rest of the rendering."""
    if fidelity == "full":
        return ""
    shown = [] if fidelity == "truncate" else list(stages)
    return _template().render(goal=goal, stages=shown).rstrip("\n")
