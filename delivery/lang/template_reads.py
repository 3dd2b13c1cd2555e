"""Which context keys a prompt or script template reads: plain `{{ x.y }}` text here, the
subset the bundled workflows use in light_reads, anything else with Jinja2's own parser.

A read is a dotted path: `{{ context.pr.state }}` and `{{ pr.state }}` both read
`pr.state`; `{{ parallel.results['0'].context.x }}` reads `parallel.results.0.context.x`.
Reads guarded by `| default(...)` or `is defined` are not reported: the template
handles their absence itself.
"""

from __future__ import annotations

import re

from delivery.errors import TemplateProblem as TemplateProblem
from delivery.lang.read_paths import TemplateRead as TemplateRead

DOLLAR_GOAL = re.compile(r"\$goal\b")


_new = tuple.__new__  # builds a TemplateRead in C (its own __new__ is Python code)


# The common case, `{{ name.name }}` substitutions in plain text, is read without Jinja2
# (parsing and scope analysis cost ~1 ms a template); anything else takes the full path.
_SIMPLE_BLOCK = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}")
_JINJA_WORDS = frozenset({"true", "false", "none", "True", "False", "None", "not", "and", "or",
                          "in", "is", "if", "else"})


def _simple_reads(source: str) -> list[TemplateRead] | None:
    """The reads of a template made only of plain text and `{{ dotted.name }}`; None when
    the template uses anything more (blocks, filters, subscripts...)."""
    if "{%" in source or "{#" in source or "{{{" in source or "\r" in source:
        return None
    reads: list[TemplateRead] = []
    append, new, read_type, count = reads.append, _new, TemplateRead, source.count
    blocks = 0
    line, counted = 1, 0
    for m in _SIMPLE_BLOCK.finditer(source):
        blocks += 1
        key = m.group(1)
        start = m.start(1)
        # _record, inlined (this runs once per name of every template of a file)
        dot = key.find(".")
        root = key if dot < 0 else key[:dot]
        if root in _JINJA_WORDS:
            return None
        line += count("\n", counted, start)
        counted = start
        if root == "context":
            if dot < 0:
                continue  # `{{ context }}` alone reads no key
            key = key[dot + 1:]
        append(new(read_type, (key, line)))
    if blocks != count("{{"):
        return None
    return reads


def template_reads(source: str) -> list[TemplateRead]:
    """Every context path the template reads; raises TemplateProblem on a syntax error."""
    reads = _simple_reads(source)
    if reads is None:
        # Jinja2 only when a template needs it: `validate` of the bundled workflows then
        # never imports it (issue 23: start-up imports only what a command uses). Neither
        # reader imports this module (TemplateRead lives in read_paths): no cycle.
        from delivery.lang.light_reads import light_reads
        reads = light_reads(source)
    if reads is None:
        from delivery.lang.jinja_reads import jinja_reads
        reads = jinja_reads(source)
    if "$goal" in source:  # what DOLLAR_GOAL needs: most templates are not searched
        for m in DOLLAR_GOAL.finditer(source):
            reads.append(TemplateRead("goal", source.count("\n", 0, m.start()) + 1))
    return reads


def is_jinja(source: str) -> bool:
    """Whether `source` parses as a Jinja2 template."""
    if _simple_reads(source) is not None:
        return True  # plain `{{ x.y }}` text: no need to load Jinja2 to know
    from delivery.lang.light_reads import light_reads
    if light_reads(source) is not None:
        return True  # the subset light_reads reads is valid Jinja2
    from delivery.lang.jinja_reads import is_jinja as parses
    return parses(source)

