"""Which attributes a workflow may carry, and what a near miss was meant to be.

An attribute that neither Attractor nor delivery defines is reported by name (a typo such
as `conditon=` must never silently turn an edge unconditional); Graphviz's presentation
attributes (colours, fonts, layout) are known too, since a workflow is also a drawing.
A graph can name more with `extra_attributes="team,owner"`.
"""

from __future__ import annotations

import difflib

# Graphviz's own attributes (presentation and layout): never reported.
GRAPHVIZ = frozenset({
    "URL", "arrowhead", "arrowsize", "arrowtail", "bb", "bgcolor", "center", "charset",
    "class", "clusterrank", "color", "colorscheme", "comment", "compound", "concentrate",
    "constraint", "decorate", "dir", "distortion", "dpi", "fillcolor", "fixedsize",
    "fontcolor", "fontname", "fontnames", "fontpath", "fontsize", "forcelabels",
    "gradientangle", "group", "headURL", "head_lp", "headclip", "headhref", "headlabel",
    "headport", "headtarget", "headtooltip", "height", "href", "id", "image", "imagepos",
    "imagescale", "label", "labelangle", "labeldistance", "labelfloat", "labelfontcolor",
    "labelfontname", "labelfontsize", "labelhref", "labeljust", "labelloc", "labeltarget",
    "labeltooltip", "landscape", "layer", "layers", "layout", "lhead", "lp", "ltail",
    "margin", "minlen", "newrank", "nodesep", "nojustify", "ordering", "orientation",
    "outputorder", "overlap", "pack", "packmode", "pad", "page", "pencolor", "penwidth",
    "peripheries", "pos", "quantum", "rank", "rankdir", "ranksep", "ratio", "regular",
    "remincross", "rotate", "samehead", "sametail", "searchsize", "shape", "showboxes",
    "sides", "size", "skew", "sortv", "splines", "style", "stylesheet", "tailURL",
    "tail_lp", "tailclip", "tailhref", "taillabel", "tailport", "tailtarget",
    "tailtooltip", "target", "tooltip", "truecolor", "viewport", "width", "xlabel", "xlp",
})

# Graphviz's node shapes: any of them runs as an agent unless it is in Attractor's table.
GRAPHVIZ_SHAPES = frozenset({
    "box", "polygon", "ellipse", "oval", "circle", "point", "egg", "triangle", "plaintext",
    "plain", "diamond", "trapezium", "parallelogram", "house", "pentagon", "hexagon",
    "septagon", "octagon", "doublecircle", "doubleoctagon", "tripleoctagon", "invtriangle",
    "invtrapezium", "invhouse", "Mdiamond", "Msquare", "Mcircle", "rect", "rectangle",
    "square", "star", "none", "underline", "cylinder", "note", "tab", "folder", "box3d",
    "component", "promoter", "cds", "terminator", "utr", "primersite", "restrictionsite",
    "fivepoverhang", "threepoverhang", "noverhang", "assembly", "signature", "insulator",
    "ribosite", "rnastab", "proteasesite", "proteinstab", "rpromoter", "rarrow", "larrow",
    "lpromoter", "record", "Mrecord",
})

# Attributes owned by the agent profile side (stylesheet, models, fidelity, threads).
AGENT_NODE = frozenset({"llm_model", "llm_provider", "reasoning_effort", "thread_id",
                        "fidelity", "agent", "timeout", "class"})

GRAPH = frozenset({
    "goal", "label", "inputs", "defaults", "folders", "default_max_retries",
    "default_max_retry", "retry_target", "fallback_retry_target", "default_fidelity",
    "model_stylesheet", "template", "extra_attributes",
    "stack.child_dotfile", "stack.child_workdir",  # the manager loop's child (Attractor §4.11)
    # the agent profile side (model choice applies to every node)
    "llm_model", "llm_provider", "reasoning_effort", "thread_id", "agent",
    # the change set (SPEC §7.1): `change_set=false` writes no delivery/change-set status
    "change_set",
    # the run's agent budget (SPEC §7.1): a pause before the next agent stage at 100%
    "budget_tokens", "budget_usd",
    # how many folders a foreach or folder stage works on at once (SPEC §8.1)
    "max_parallel",
    # `preflight=false`: no check of the token's permissions before the first write
    "preflight",
    # bot accounts whose reviews, threads and labels steer a run (SPEC §14)
    "trusted_bots",
})
NODE = frozenset({
    "label", "shape", "type", "prompt", "llm_prompt", "outputs", "facts", "max_retries",
    "retry_target", "fallback_retry_target", "goal_gate", "folder", "script", "tool_command",
    "probe", "order", "title", "interval", "backoff", "max_interval", "delegatable",
    "join_policy", "join", "max_parallel", "allow_partial", "auto_status", "template",
    # the manager loop (Attractor §4.11)
    "manager.poll_interval", "manager.max_cycles", "manager.stop_condition",
    "manager.actions", "stack.child_dotfile", "stack.child_workdir", "stack.child_autostart",
    "threads", "rollback",
    # the merge node's merge method (merge, squash, rebase), checked by preflight
    "method",
    # a script given the forge's token (SPEC §14: without it, scripts run without it)
    "forge_token",
    # one stage per folder (SPEC §8.1) and the folders it runs for
    "foreach", "only",
    # merge policy=each (campaigns) and publish draft=true (SPEC §7.1)
    "policy", "draft",
}) | AGENT_NODE
EDGE = frozenset({"condition", "label", "weight", "loop_restart", "fidelity", "thread_id"})

# Attractor attributes delivery accepts but does not act on: warned by name.
NOT_HONOURED: dict[str, str] = {
    "tool_hooks.pre": "tool call hooks are not run; the agent backend runs its own tools",
    "tool_hooks.post": "tool call hooks are not run; the agent backend runs its own tools",
    "human.default_choice": "an unanswered gate is denied (or pauses with --gates pause)",
    "error_policy": "every branch runs to its end (Attractor's `continue`)",
}

_NOT_HONOURED_PREFIXES = {
    "tool_hooks.": "tool call hooks are not run; the agent backend runs its own tools",
}


def not_honoured(name: str) -> str | None:
    """Why delivery does not act on an Attractor attribute, or None when it is not one."""
    if name in NOT_HONOURED:
        return NOT_HONOURED[name]
    for prefix, reason in _NOT_HONOURED_PREFIXES.items():
        if name.startswith(prefix):
            return reason
    return None


_SUGGESTABLE = sorted((GRAPH | NODE | EDGE) - {"class", "id"})


def did_you_mean(name: str) -> str | None:
    """The known attribute `name` most likely misspells, if any (`conditon` → `condition`)."""
    matches = difflib.get_close_matches(name, _SUGGESTABLE, n=1, cutoff=0.75)
    return matches[0] if matches else None


def unknown_attribute_fix(name: str, kind: str) -> str:
    """How to fix an unknown `kind` attribute: the name it misspells, the kind it belongs
    to, or how to keep it for another tool."""
    guess = did_you_mean(name)
    if guess is not None and guess != name:
        return f"did you mean {guess}=? (or list '{name}' in the graph's " \
               "extra_attributes= if it is meant for another tool)"
    elsewhere = [k for k in ("graph", "node", "edge")
                 if k != kind and is_known(name, k, frozenset())]
    if elsewhere:
        return f"'{name}' is a {' or '.join(elsewhere)} attribute; move it there"
    return f"remove it, or list '{name}' in the graph's extra_attributes=\"{name}\" if " \
           "another tool reads it"


# The attributes that route or decide what is sent (SPEC §12): an unknown one a typo away
# from them is an error, since running without it drops a route or asks differently.
ROUTING = ("condition", "prompt", "type", "shape", "outputs", "facts", "goal_gate",
           "loop_restart", "foreach", "only")
ROUTING_EDITS = 2


def routing_typo(name: str) -> str | None:
    """The routing attribute `name` is one or two edits away from (a letter added, dropped,
    changed, or two neighbours swapped), the nearest first; None when there is none."""
    best, best_edits = None, ROUTING_EDITS + 1
    for known in ROUTING:
        edits = _edits(name, known, best_edits)
        if 0 < edits < best_edits:
            best, best_edits = known, edits
    return best


def _edits(a: str, b: str, limit: int) -> int:
    """The optimal string alignment distance of `a` and `b`, or `limit` when it is not
    below it (names far apart in length are not compared letter by letter)."""
    if abs(len(a) - len(b)) >= limit:
        return limit
    before: list[int] | None = None
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cost = 0 if x == y else 1
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if before is not None and i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                row[j] = min(row[j], before[j - 2] + 1)
        before, previous = previous, row
    return min(previous[-1], limit)


def shape_suggestion(shape: str) -> str | None:
    matches = difflib.get_close_matches(shape, sorted(GRAPHVIZ_SHAPES), n=1, cutoff=0.6)
    return matches[0] if matches else None


def is_known(name: str, kind: str, extra: frozenset[str]) -> bool:
    """Whether `name` is a known attribute of a graph, node or edge (`kind`)."""
    if name in GRAPHVIZ or name in extra or not_honoured(name) is not None:
        return True
    table = GRAPH if kind == "graph" else NODE if kind == "node" else EDGE
    return name in table
