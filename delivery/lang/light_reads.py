"""The reads of a Jinja template in the subset the bundled workflows use, found without
importing Jinja2 (issue 23: `delivery validate` starts without loading Jinja2's environment,
~25 ms to import and ~50 ms to build its lexer).

The subset: text, `{# comments #}`, `{{ expr }}`, `{% set name = expr %}`,
`{% set ns.attr = expr %}`, `{% for name in expr %}...{% endfor %}` and
`{% if %}/{% elif %}/{% else %}/{% endif %}`; expressions of names, `.attr` and constant
`['key']` subscripts, dynamic `[expr]` subscripts, strings, integers, lists, calls with
positional then keyword arguments, filters and the `defined`/`undefined`/`none` tests,
`not`/`and`/`or`, comparisons (`in`, `not in` included) and the arithmetic and `~` operators.
Anything else — another tag, a tag spanning lines, a conditional expression, an escape in
a string, a name this module does not model (`loop`, `self`...) — answers None, and the
caller asks Jinja2 (jinja_reads), which stays the reference: tests/lang checks that the two
agree on generated templates.

Why a second reader is kept (benchmarks/template_reader.py, `delivery validate` as a whole
process, medians of 15 alternating runs on 2 shared cores): the bundled deliver.dot takes
99 ms with it and 125 ms with Jinja2's parse alone (1.26x, Jinja2's import and lexer); a
generated 1,000-node workflow whose prompts loop over the folders as deliver.dot's do takes
195 ms against 830 ms (4.3x; in process, with Jinja2 already loaded, 90 ms against 650 ms:
Jinja2's parse and scope analysis cost ~1 ms a template). That is a wait a person notices
on a large file, so the subset stays; Jinja2 remains the reference for everything else.

The answer mirrors jinja_reads exactly: Jinja2's own scope rules (jinja2/idtracking.py:
a name is read from outside when it is loaded before any store in its frame, a `for` body is
a frame of its own analysed after its parent, a name stored in only some branches of an
`{% if %}` is read from outside), then the same walk over the expressions.
"""

from __future__ import annotations

from collections.abc import Iterator

from delivery.lang.light_parse import (
    GLOBALS,
    Body,
    Expr,
    Parser,
    Stmt,
)
from delivery.lang.read_paths import TemplateRead, record_read


def light_reads(source: str) -> list[TemplateRead] | None:
    """What Jinja2's analysis (jinja_reads) would answer, or None outside the subset."""
    if "\r" in source or "{{{" in source:
        return None
    body = Parser(source).template()
    if body is None:
        return None
    try:
        roots = _roots(body)
        reads: list[TemplateRead] = []
        _walk_body(body, roots, reads)
    except RecursionError:  # nesting the parser took but the walk cannot: Jinja2 decides
        return None
    return reads


# -- scope: which names the template reads from outside (Jinja2's idtracking) -------------
class _Symbols:
    """jinja2.idtracking.Symbols, reduced to what the subset needs."""

    def __init__(self, parent: _Symbols | None = None) -> None:
        self.parent = parent
        self.level: int = 0 if parent is None else parent.level + 1
        self.refs: dict[str, str] = {}
        self.loads: dict[str, tuple[str, str | None]] = {}
        self.stores: set[str] = set()

    def copy(self) -> _Symbols:
        other = _Symbols(self.parent)
        other.level = self.level
        other.refs, other.loads, other.stores = dict(self.refs), dict(self.loads), set(
            self.stores)
        return other

    def find_ref(self, name: str) -> str | None:
        if name in self.refs:
            return self.refs[name]
        return self.parent.find_ref(name) if self.parent is not None else None

    def _define(self, name: str, load: tuple[str, str | None]) -> None:
        ident = f"l_{self.level}_{name}"
        self.refs[name] = ident
        self.loads[ident] = load

    def load(self, name: str) -> None:
        if self.find_ref(name) is None:
            self._define(name, ("resolve", name))

    def store(self, name: str) -> None:
        self.stores.add(name)
        if name not in self.refs:
            outer = self.parent.find_ref(name) if self.parent is not None else None
            self._define(name, ("alias", outer) if outer is not None else ("undefined", None))

    def parameter(self, name: str) -> None:
        self.stores.add(name)
        self._define(name, ("param", None))

    def branch_update(self, branches: list[_Symbols]) -> None:
        stores: set[str] = set()
        for branch in branches:
            stores.update(branch.stores)
        stores.difference_update(self.stores)
        for branch in branches:
            self.refs.update(branch.refs)
            self.loads.update(branch.loads)
            self.stores.update(branch.stores)
        for name in stores:
            target = self.find_ref(name)
            assert target is not None
            outer = self.parent.find_ref(name) if self.parent is not None else None
            self.loads[target] = ("alias", outer) if outer is not None else ("resolve", name)

    def undeclared(self) -> Iterator[str]:
        for action, param in self.loads.values():
            if action == "resolve" and param is not None and param not in GLOBALS:
                yield param


def _frame_visit(symbols: _Symbols, stmt: Stmt) -> _Symbols:
    """FrameSymbolVisitor on one statement; returns the symbols in use after it (an
    `{% if %}` works on copies and merges them)."""
    kind = stmt[0]
    if kind == "output":
        for expr in _exprs(stmt[1]):
            _load_names(symbols, expr)
    elif kind == "set":
        _load_names(symbols, _expr(stmt[2]))
        target = _expr(stmt[1])
        if target[0] == "nsref":
            symbols.load(str(target[1]))
        else:
            symbols.store(str(target[1]))
    elif kind == "for":
        _load_names(symbols, _expr(stmt[2]))
    else:  # if
        _load_names(symbols, _expr(stmt[1]))
        branches = []
        for part in (stmt[2], stmt[3], stmt[4]):
            branch = symbols.copy()
            for inner in _stmts(part):
                branch = _frame_visit(branch, inner)
            branches.append(branch)
        symbols.branch_update(branches)
    return symbols


def _load_names(symbols: _Symbols, expr: Expr) -> None:
    if expr[0] == "name":
        symbols.load(str(expr[1]))
        return
    for child in _children(expr):
        _load_names(symbols, child)


def _roots(body: Body) -> set[str]:
    """TrackingCodeGenerator's undeclared identifiers: every frame's unresolved loads."""
    root = _Symbols()
    for stmt in body:
        _frame_visit(root, stmt)
    found = set(root.undeclared())
    _loop_frames(body, root, found)
    return found


def _loop_frames(body: Body, symbols: _Symbols, found: set[str]) -> None:
    """The code generator's walk: each `for` body is a frame analysed after its parent."""
    for stmt in body:
        if stmt[0] == "for":
            frame = _Symbols(symbols)
            frame.parameter(str(_expr(stmt[1])[1]))
            for inner in _stmts(stmt[3]):
                _frame_visit(frame, inner)
            found.update(frame.undeclared())
            _loop_frames(_stmts(stmt[3]), frame, found)
        elif stmt[0] == "if":
            for part in (stmt[2], stmt[4]):
                _loop_frames(_stmts(part), symbols, found)
            for elif_ in _stmts(stmt[3]):
                _loop_frames([elif_], symbols, found)


# -- the walk of jinja_reads._visit -------------------------------------------------------
def _walk_body(body: Body, roots: set[str], reads: list[TemplateRead]) -> None:
    for stmt in body:
        _walk_stmt(stmt, roots, reads)


def _walk_stmt(stmt: Stmt, roots: set[str], reads: list[TemplateRead]) -> None:
    kind, line = stmt[0], stmt[-1]
    assert isinstance(line, int)
    if kind == "output":
        for expr in _exprs(stmt[1]):
            _walk(expr, roots, reads, line)
    elif kind == "set":
        _walk(_expr(stmt[2]), roots, reads, line)  # the target is a store (or an NSRef): no read
    elif kind == "for":
        _walk(_expr(stmt[2]), roots, reads, line)
        _walk_body(_stmts(stmt[3]), roots, reads)
    else:
        test = _expr(stmt[1])
        guarded = _defined_keys(test, roots)
        if guarded:
            inner: list[TemplateRead] = []
            _walk_body(_stmts(stmt[2]), roots, inner)
            reads.extend(r for r in inner if not any(
                r.key == key or r.key.startswith(key + ".") for key in guarded))
            _walk(test, roots, reads, line)
        else:
            _walk(test, roots, reads, line)
            _walk_body(_stmts(stmt[2]), roots, reads)
        for elif_ in _stmts(stmt[3]):
            _walk_stmt(elif_, roots, reads)
        _walk_body(_stmts(stmt[4]), roots, reads)


def _chain(node: Expr) -> tuple[str, list[str]] | None:
    segments: list[str] = []
    while True:
        kind = node[0]
        if kind == "getattr":
            segments.append(str(node[2]))
            node = _expr(node[1])
        elif kind == "getitem":
            arg = _expr(node[2])
            if arg[0] != "const" or not isinstance(arg[1], (str, int)):
                return None
            segments.append(str(arg[1]))
            node = _expr(node[1])
        elif kind == "name":
            return str(node[1]), list(reversed(segments))
        else:
            return None


def _defined_keys(test: Expr, roots: set[str]) -> list[str]:
    if test[0] == "and":
        return _defined_keys(_expr(test[1]), roots) + _defined_keys(_expr(test[2]), roots)
    if test[0] == "test" and test[2] == "defined":
        chain = _chain(_expr(test[1]))
        if chain is not None and chain[0] in roots:
            found: list[TemplateRead] = []
            record_read(chain[0], chain[1], 1, found)
            return [read.key for read in found]
    return []


def _walk(node: Expr, roots: set[str], reads: list[TemplateRead], line: int) -> None:
    kind = node[0]
    if (kind == "filter" and node[2] in ("default", "d")) or (
            kind == "test" and node[2] in ("defined", "undefined")):
        return
    if kind == "call" and _expr(node[1])[0] == "getattr":
        target = _chain(_expr(_expr(node[1])[1]))
        if target is not None and target[0] in roots:
            record_read(target[0], target[1], line, reads)
            for child in (*_exprs(node[2]), *_exprs(node[3])):
                _walk(child, roots, reads, line)
            return
    if kind in ("getattr", "getitem", "name"):
        chain = _chain(node)
        if chain is not None:
            if chain[0] in roots:
                record_read(chain[0], chain[1], line, reads)
            return
        if kind == "getitem":
            _walk(_expr(node[1]), roots, reads, line)
            _walk(_expr(node[2]), roots, reads, line)
            return
    for child in _children(node):
        _walk(child, roots, reads, line)


def _children(node: Expr) -> list[Expr]:
    """Sub-expressions in Jinja2's field order (which is the order they are written in)."""
    kind = node[0]
    if kind in ("name", "const", "nsref"):
        return []
    if kind in ("getattr", "not", "test"):
        return [_expr(node[1])]
    if kind == "kw":
        return [_expr(node[2])]
    if kind in ("getitem", "op", "and", "or"):
        return [_expr(node[1]), _expr(node[2])]
    if kind in ("list", "concat"):
        return _exprs(node[1])
    if kind == "compare":
        return [_expr(node[1]), *_exprs(node[2])]
    if kind == "call":
        return [_expr(node[1]), *_exprs(node[2]), *_exprs(node[3])]
    # filter: the filtered value, then the arguments
    return [_expr(node[1]), *_exprs(node[3]), *_exprs(node[4])]


# The tuples hold `object`s; these narrow them for the type checker without copying.
def _expr(value: object) -> Expr:
    assert isinstance(value, tuple)
    return value


def _exprs(value: object) -> list[Expr]:
    assert isinstance(value, list)
    return value


def _stmts(value: object) -> Body:
    assert isinstance(value, list)
    return value
