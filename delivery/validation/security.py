"""Validator rules of SPEC §14: node ids the run directory or Windows would misread, and
script substitutions whose shell quoting the author's own quotes defeat.

`node_id_reserved` (error): a stage folder is named after its node, so a node id may not
be one of the run directory's own names (`run`, `artifacts`, `events`, `checkpoint`) or
a device name Windows reserves (`CON`, `PRN`, `AUX`, `NUL`, `COM0`-`COM9`,
`LPT0`-`LPT9`), in any case.

`script_quoting` (warning): every `{{ … }}` in a `script=` is shell-quoted as one word,
`'like this'`. Inside the author's own quotes that quoting is undone: in `"…{{ v }}…"`
the value's single quotes are literal and a `$(…)` in it runs; in `'…{{ v }}…'` the
value's first quote closes the author's. An unquoted heredoc (`<<EOF`) expands `$(…)`
in its body whatever the quotes. The safe patterns: the substitution as a bare word
(`echo {{ v }}`, `grep -- {{ v }} file`), or a heredoc with a quoted delimiter
(`<<'EOF'`), whose body the shell never expands.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, Literal

from delivery.lang.attr_values import value_position
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import NodeType, Workflow

RESERVED_NODE_IDS: Final = frozenset(
    {"run", "artifacts", "events", "checkpoint", "con", "prn", "aux", "nul"}
    | {f"{device}{n}" for device in ("com", "lpt") for n in range(10)}
)

Where = Literal["double quotes", "single quotes", "an unquoted heredoc"]
_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([A-Za-z0-9_]+))")
_JINJA_END: Final = {"{{": "}}", "{%": "%}", "{#": "#}"}


def check(workflow: Workflow) -> list[Diagnostic]:
    return [*_reserved_ids(workflow), *_script_quoting(workflow)]


def _reserved_ids(workflow: Workflow) -> Iterator[Diagnostic]:
    for node in workflow.nodes.values():
        if node.id.lower() in RESERVED_NODE_IDS:
            yield Diagnostic(
                "node_id_reserved", "error", f"node id '{node.id}' is a name the run directory "
                "uses itself or a device name Windows reserves; its stage folder cannot take it",
                workflow.file, node.line, node.column, node=node.id,
                fix=f"rename it, e.g. '{node.id}_stage'")


def _script_quoting(workflow: Workflow) -> Iterator[Diagnostic]:
    for node in workflow.nodes.values():
        if node.type is not NodeType.SCRIPT:
            continue
        attr = node.script_attr
        if attr is None:
            continue
        for offset, where in defeated_substitutions(attr.text):
            line, column = value_position(attr.value, offset)
            yield Diagnostic(
                "script_quoting", "warning", f"a {{{{ }}}} substitution in the script of "
                f"'{node.id}' sits inside {where}, which undoes its shell quoting: a value "
                "holding $(...) or a backquote would run as a command", workflow.file, line,
                column, node=node.id,
                fix="write the substitution as a bare word (echo {{ value }}: it is quoted as "
                "one word), or use a heredoc with a quoted delimiter (<<'EOF')")


def defeated_substitutions(script: str) -> list[tuple[int, Where]]:
    """(offset, where) of every `{{` that sits inside quotes or an unquoted heredoc body.

    A small shell scanner: quotes, backslashes, `$(…)` (quoting starts afresh inside
    it), comments and heredocs. Jinja tags are skipped as units.
    """
    if "'" not in script and '"' not in script and "<<" not in script:
        return []  # no quotes and no heredoc for a substitution to sit in (most scripts)
    return _scan(script)


def _scan(script: str) -> list[tuple[int, Where]]:
    """defeated_substitutions' scanner, for any script."""
    found: list[tuple[int, Where]] = []
    # the stack of open contexts: "top" (unquoted), "'" , '"', or "(" for $( … )
    stack: list[str] = ["top"]
    heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, expands) pending
    i, n = 0, len(script)
    at_word_start = True
    while i < n:
        two = script[i:i + 2]
        if two in _JINJA_END:
            if two == "{{":
                state = stack[-1]
                if state in ("'", '"'):
                    found.append((i, "double quotes" if state == '"' else "single quotes"))
            end = script.find(_JINJA_END[two], i + 2)
            i = n if end == -1 else end + 2
            at_word_start = False
            continue
        ch = script[i]
        state = stack[-1]
        if state == "'":
            if ch == "'":
                stack.pop()
            i += 1
            continue
        if ch == "\\":
            i += 2
            continue
        if state == '"':
            if ch == '"':
                stack.pop()
            elif two == "$(":
                stack.append("(")
                i += 1
            i += 1
            continue
        # unquoted, at the top or inside $( … )
        if ch in ("'", '"'):
            stack.append(ch)
        elif two == "$(":
            stack.append("(")
            i += 1
        elif ch == ")" and state == "(":
            stack.pop()
        elif ch == "#" and at_word_start:
            end = script.find("\n", i)
            i = n if end == -1 else end
            continue
        elif script.startswith("<<<", i):
            i += 3  # a here-string: its word is quoted like any other
            continue
        elif two == "<<":
            m = _HEREDOC.match(script, i)
            if m is not None:
                # <<'EOF', <<"EOF" and <<\EOF are quoted: their bodies are not expanded
                quoted = m.group(4) is None or script[m.start(4) - 1] == "\\"
                delimiter = m.group(2) or m.group(3) or m.group(4) or ""
                heredocs.append((delimiter, m.group(1) == "-", not quoted))
                i = m.end()
                at_word_start = False
                continue
        elif ch == "\n" and heredocs:
            i = _skip_heredoc_bodies(script, i + 1, heredocs, found)
            heredocs = []
            at_word_start = True
            continue
        at_word_start = ch in " \t\n;&|("
        i += 1
    return found


def _skip_heredoc_bodies(script: str, i: int, heredocs: list[tuple[str, bool, bool]],
                         found: list[tuple[int, Where]]) -> int:
    """Skip the bodies of the pending heredocs, recording substitutions in expanding ones;
    returns the offset after the last body."""
    for delimiter, strip_tabs, expands in heredocs:
        while i < len(script):
            end = script.find("\n", i)
            end = len(script) if end == -1 else end
            line = script[i:end]
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                i = end + 1
                break
            if expands:
                at = line.find("{{")
                while at != -1:
                    found.append((i + at, "an unquoted heredoc"))
                    at = line.find("{{", at + 2)
            i = end + 1
    return i
