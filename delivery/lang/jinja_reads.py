"""The Jinja2 half of template_reads: templates beyond plain `{{ dotted.name }}`, read with
Jinja2's own parser and scope analysis. A module of its own so that importing
template_reads (and so `delivery validate`) does not import Jinja2 unless a template needs it.
"""

from __future__ import annotations

from typing import Any

from jinja2 import TemplateSyntaxError, meta, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.sandbox import ImmutableSandboxedEnvironment

from delivery.errors import TemplateProblem
from delivery.lang.read_paths import TemplateRead, record_read


class _ParseEnvironment(ImmutableSandboxedEnvironment):
    # No operator is folded at compile time: `{{ 9**(9**9) }}` or `{{ 'a' * 10**10 }}`
    # must not be computed while validating (SPEC §14).
    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})
    intercepted_unops = frozenset({"+", "-"})


class _ScopeTracker(meta.TrackingCodeGenerator):
    """Jinja's own scope analysis (which names a template reads from outside), with the
    optimizer off and no constant output folded: nothing of the template is evaluated."""

    def __init__(self, environment: Any) -> None:
        CodeGenerator.__init__(self, environment, "<introspection>", "<introspection>",
                               optimized=False)
        self.undeclared_identifiers: set[str] = set()

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
        if isinstance(node, nodes.TemplateData):
            return str(node.data)
        raise nodes.Impossible()


_PARSE_ENV = _ParseEnvironment()


def is_jinja(source: str) -> bool:
    """Whether `source` parses as a Jinja2 template."""
    try:
        _PARSE_ENV.parse(source)
    except TemplateSyntaxError:
        return False
    return True


def jinja_reads(source: str) -> list[TemplateRead]:
    try:
        ast = _PARSE_ENV.parse(source)
        tracker = _ScopeTracker(_PARSE_ENV)
        tracker.visit(ast)
        roots = tracker.undeclared_identifiers
        reads: list[TemplateRead] = []
        _visit(ast, roots, reads)
    except TemplateSyntaxError as err:
        raise TemplateProblem(err.message or "template syntax error", err.lineno or 1) from None
    except RecursionError:
        raise TemplateProblem("the template is nested too deeply to check", 1) from None
    return reads


def _chain(node: nodes.Node) -> tuple[str, list[str]] | None:
    """('root', [segments]) for Name.attr['key'].attr chains with constant subscripts."""
    segments: list[str] = []
    while True:
        if isinstance(node, nodes.Getattr):
            segments.append(node.attr)
            node = node.node
        elif isinstance(node, nodes.Getitem):
            arg = node.arg
            if not isinstance(arg, nodes.Const) or not isinstance(arg.value, (str, int)):
                return None
            segments.append(str(arg.value))
            node = node.node
        elif isinstance(node, nodes.Name):
            return node.name, list(reversed(segments))
        else:
            return None


def _is_guarded(node: nodes.Node) -> bool:
    if isinstance(node, nodes.Filter) and node.name in ("default", "d"):
        return True
    return isinstance(node, nodes.Test) and node.name in ("defined", "undefined")


def _defined_keys(test: nodes.Node, roots: set[str]) -> list[str]:
    """Keys an `{% if %}` test proves present: `x is defined` (alone or joined by `and`)."""
    if isinstance(test, nodes.And):
        return _defined_keys(test.left, roots) + _defined_keys(test.right, roots)
    if isinstance(test, nodes.Test) and test.name == "defined":
        chain = _chain(test.node)
        if chain is not None and chain[0] in roots:
            found: list[TemplateRead] = []
            record_read(chain[0], chain[1], test.lineno, found)
            return [read.key for read in found]
    return []


def _visit(node: nodes.Node, roots: set[str], reads: list[TemplateRead]) -> None:
    if _is_guarded(node):
        return
    if isinstance(node, nodes.If):
        guarded = _defined_keys(node.test, roots)
        if guarded:
            # {% if x is defined %}{{ x }}{% endif %}: the body's reads of x are guarded
            inner: list[TemplateRead] = []
            for child in node.body:
                _visit(child, roots, inner)
            reads.extend(r for r in inner if not any(
                r.key == key or r.key.startswith(key + ".") for key in guarded))
            for child in (node.test, *node.elif_, *node.else_):
                _visit(child, roots, reads)
            return
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
        # x.items() reads x, not a key named 'items'
        target = _chain(node.node.node)
        if target is not None and target[0] in roots:
            record_read(target[0], target[1], node.lineno, reads)
            for child in node.iter_child_nodes(exclude=("node",)):
                _visit(child, roots, reads)
            return
    if isinstance(node, (nodes.Getattr, nodes.Getitem, nodes.Name)):
        if isinstance(node, nodes.Name) and node.ctx != "load":
            return
        chain = _chain(node)
        if chain is not None:
            if chain[0] in roots:
                record_read(chain[0], chain[1], node.lineno, reads)
            return
        if isinstance(node, nodes.Getitem):
            # dynamic subscript: x[i] reads x (and whatever i reads)
            _visit(node.node, roots, reads)
            _visit(node.arg, roots, reads)
            return
    for child in node.iter_child_nodes():
        _visit(child, roots, reads)
