"""Build the DOT text of a small workflow from its body: the `digraph`, the graph attributes
and the `start`/`exit` nodes every workflow needs are written around it.

    dot = flow('''
        a [type=prompt, prompt="Plan"]
        start -> a -> exit
    ''', graph={"inputs": "ticket"})

gives

    digraph F {
      graph [goal="g", inputs="ticket"]
      start [shape=Mdiamond]
      exit [shape=Msquare]
      a [type=prompt, prompt="Plan"]
      start -> a -> exit
    }

The body is dedented and indented under the scaffold, so it can be written at any
indentation in a triple-quoted string; a quoted value that spans lines is indented with it
(keep such a value on one line). A body that declares `start` or `exit` itself (with a
label, say), or needs `node [...]` defaults before them, is a workflow of its own: write it
whole instead.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Final

START: Final = "start [shape=Mdiamond]"
EXIT: Final = "exit [shape=Msquare]"


def quoted(value: str) -> str:
    """`value` as a DOT quoted string (backslashes and double quotes escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def flow(body: str, *, goal: str | None = "g", graph: Mapping[str, str] | str = "",
         name: str = "F") -> str:
    """The DOT text of `digraph NAME { graph [...]; start; exit; BODY }`.

    `goal` is the graph's `goal` attribute (None: no goal). `graph` adds graph attributes,
    either as a mapping of name to value (each value quoted) or as DOT attribute text written
    as is (`'inputs="n", max_restarts=2'`). Without a goal and other attributes there is no
    `graph [...]` line."""
    attributes = [f"goal={quoted(goal)}"] if goal is not None else []
    if isinstance(graph, str):
        if graph.strip():
            attributes.append(graph.strip())
    else:
        attributes.extend(f"{key}={quoted(value)}" for key, value in graph.items())
    lines = [f"digraph {name} {{"]
    if attributes:
        lines.append(f"  graph [{', '.join(attributes)}]")
    lines += [f"  {START}", f"  {EXIT}"]
    lines += [f"  {line}" if line.strip() else "" for line in _lines(body)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _lines(body: str) -> list[str]:
    """The body's lines, dedented, without the blank lines around them."""
    lines = textwrap.dedent(body).split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return [line.rstrip() for line in lines]
