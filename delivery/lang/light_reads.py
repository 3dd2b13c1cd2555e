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

The answer mirrors jinja_reads exactly: Jinja2's own scope rules (jinja2/idtracking.py:
a name is read from outside when it is loaded before any store in its frame, a `for` body is
a frame of its own analysed after its parent, a name stored in only some branches of an
`{% if %}` is read from outside), then the same walk over the expressions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from delivery.lang.template_reads import TemplateRead, _record

# Expression trees as tuples (one allocation per node, no classes):
#   ("name", id)  ("getattr", node, attr)  ("getitem", node, arg)  ("const", value)
#   ("list", items)  ("call", func, args, kwargs)  ("filter", node, name, args, kwargs)
#   ("test", node, name)  ("op", left, right)  ("not", node)  ("and", l, r)  ("or", l, r)
#   ("kw", key, value)  ("concat", items)  ("compare", first, operands)
# Statements:
#   ("output", exprs, line)  ("set", target, expr, line)  ("for", target, iter, body, line)
#   ("if", test, body, elifs, else_, line)  where target is ("name", id) or ("nsref", ns, attr)
# A tag never spans lines (one that does is left to Jinja2), so the line of a statement is
# the line of every read in it.
Expr = tuple[object, ...]
Stmt = tuple[object, ...]
Body = list[Stmt]
Const = str | int | bool | None


class _Unsupported(Exception):
    """Outside the subset (or not valid Jinja): Jinja2 decides."""


# Jinja2's DEFAULT_FILTERS and the tests handled here (tests/lang checks them against
# Jinja2's environment): an unknown filter is an error Jinja2's compiler reports.
FILTERS = frozenset({
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e",
    "escape", "filesizeformat", "first", "float", "forceescape", "format", "groupby",
    "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min",
    "pprint", "random", "reject", "rejectattr", "replace", "reverse", "round", "safe",
    "select", "selectattr", "slice", "sort", "string", "striptags", "sum", "title", "tojson",
    "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap",
    "xmlattr"})
TESTS = frozenset({"defined", "undefined", "none"})
GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace"})
# Words Jinja2 gives a meaning (or this module does not model): never taken as a plain name.
_RESERVED = frozenset({
    "and", "or", "not", "in", "is", "if", "else", "elif", "endif", "for", "endfor", "set",
    "endset", "recursive", "loop", "self", "super", "caller", "varargs", "kwargs", "block",
    "endblock", "macro", "endmacro", "call", "endcall", "filter", "endfilter", "with",
    "endwith", "raw", "endraw", "include", "import", "from", "extends", "as", "do", "break",
    "continue", "autoescape", "endautoescape", "trans", "endtrans", "pluralize", "ignore",
    "true", "false", "none", "True", "False", "None"})
_CONSTANTS: dict[str, Const] = {"true": True, "True": True, "false": False, "False": False,
                                "none": None, "None": None}

_OPEN = re.compile(r"\{[{%#]")
_TOKEN = re.compile(r"""
    [ \t]*(?:
      (?P<end>-?[}%]\})
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<int>[0-9]+(?![0-9.A-Za-z_]))
    | (?P<str>'[^'\\\n]*'|"[^"\\\n]*")
    | (?P<op>==|!=|<=|>=|//|[~+\-*/%<>()\[\],.|=])
    )""", re.VERBOSE)


def light_reads(source: str) -> list[TemplateRead] | None:
    """What Jinja2's analysis (jinja_reads) would answer, or None outside the subset."""
    if "\r" in source or "{{{" in source:
        return None
    try:
        body = _Parser(source).template()
        roots = _roots(body)
        reads: list[TemplateRead] = []
        _walk_body(body, roots, reads)
    except (_Unsupported, RecursionError):
        return None
    return reads


# -- parsing --------------------------------------------------------------------------------
class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens: list[tuple[str, str]] = []
        self.i = 0
        self.line = 1
        self.end_pos = 0

    def template(self) -> Body:
        source, pos, counted = self.source, 0, 0
        # a stack of open blocks: (kind, body being filled, the statement's parts)
        root: Body = []
        stack: list[tuple[str, Body, list[object]]] = [("template", root, [])]
        while True:
            m = _OPEN.search(source, pos)
            if m is None:
                break
            start = m.start()
            if source[m.end():m.end() + 1] == "+":
                raise _Unsupported
            if m.group() == "{#":
                close = source.find("#}", m.end())
                if close < 0:
                    raise _Unsupported
                pos = close + 2
                continue
            self.line += source.count("\n", counted, start)
            counted = start
            end = self._tokenize(m.end() + (source[m.end():m.end() + 1] == "-"))
            self.tokens = self.tokens[:-1]  # the end marker, checked by _tokenize
            self.i = 0
            if m.group() == "{{":
                if end[-2:] != "}}":
                    raise _Unsupported
                expr = self.expression()
                self._done()
                stack[-1][1].append(("output", [expr], self.line))
            else:
                if end[-2:] != "%}":
                    raise _Unsupported
                self._statement(stack)
            pos = self.end_pos
        if len(stack) != 1:
            raise _Unsupported
        return root

    def _tokenize(self, pos: int) -> str:
        """Tokens of one tag from `pos` up to its end marker (returned); a tag spanning
        lines, or any character outside the token set, is unsupported."""
        tokens: list[tuple[str, str]] = []
        source = self.source
        while True:
            m = _TOKEN.match(source, pos)
            if m is None:
                raise _Unsupported
            kind = m.lastgroup
            assert kind is not None
            text = m.group(kind)
            tokens.append((kind, text))
            pos = m.end()
            if kind == "end":
                self.tokens = tokens
                self.end_pos = pos
                return text

    # -- statements --
    def _statement(self, stack: list[tuple[str, Body, list[object]]]) -> None:
        word = self._name()
        body = stack[-1][1]
        if word == "set":
            target = self._target(namespace=True)
            self._expect("op", "=")
            body.append(("set", target, self.expression(), self.line))
        elif word == "for":
            target = self._target(namespace=False)
            if self._name() != "in":
                raise _Unsupported
            iterable = self.expression()
            inner: Body = []
            body.append(("for", target, iterable, inner, self.line))
            stack.append(("for", inner, []))
        elif word == "endfor":
            if stack[-1][0] != "for":
                raise _Unsupported
            stack.pop()
        elif word == "if":
            test = self.expression()
            inner = []
            statement: Stmt = ("if", test, inner, [], [], self.line)
            body.append(statement)
            stack.append(("if", inner, [statement]))
        elif word in ("elif", "else"):
            kind, _, parts = stack[-1]
            if kind != "if" or parts[-1] == "else":
                raise _Unsupported
            stack.pop()
            first = parts[0]
            assert isinstance(first, tuple)
            if word == "elif":
                test = self.expression()
                inner = []
                elifs = first[3]
                assert isinstance(elifs, list)
                elifs.append(("if", test, inner, [], [], self.line))
                stack.append(("if", inner, [first, "elif"]))
            else:
                else_ = first[4]
                assert isinstance(else_, list)
                stack.append(("if", else_, [first, "else"]))
        elif word == "endif":
            if stack[-1][0] != "if":
                raise _Unsupported
            stack.pop()
        else:
            raise _Unsupported
        self._done()

    def _target(self, *, namespace: bool) -> Expr:
        name = self._plain_name()
        if namespace and self._peek() == ("op", "."):
            self.i += 1
            return ("nsref", name, self._plain_name())
        if self._peek() == ("op", ","):
            raise _Unsupported  # tuple unpacking
        return ("name", name)

    # -- expressions (Jinja2's precedence: or < and < not < compare < +,- < ~ < *,/ ...) --
    def expression(self) -> Expr:
        expr = self._or()
        if self._peek() == ("name", "if"):
            raise _Unsupported  # conditional expressions and the for-loop filter
        return expr

    def _or(self) -> Expr:
        left = self._and()
        while self._peek() == ("name", "or"):
            self.i += 1
            left = ("or", left, self._and())
        return left

    def _and(self) -> Expr:
        left = self._not()
        while self._peek() == ("name", "and"):
            self.i += 1
            left = ("and", left, self._not())
        return left

    def _not(self) -> Expr:
        if self._peek() == ("name", "not"):
            self.i += 1
            return ("not", self._not())
        return self._compare()

    def _compare(self) -> Expr:
        first = self._math1()
        operands: list[Expr] = []
        while True:
            token = self._peek()
            if token == ("name", "in") or (
                    token[0] == "op" and token[1] in ("==", "!=", "<", ">", "<=", ">=")):
                self.i += 1
            elif token == ("name", "not") and self._peek(1) == ("name", "in"):
                self.i += 2
            else:
                break
            operands.append(self._math1())
        return ("compare", first, operands) if operands else first

    def _math1(self) -> Expr:
        left = self._concat()
        while self._peek() in (("op", "+"), ("op", "-")):
            self.i += 1
            left = ("op", left, self._concat())
        return left

    def _concat(self) -> Expr:
        items = [self._math2()]
        while self._peek() == ("op", "~"):
            self.i += 1
            items.append(self._math2())
        return items[0] if len(items) == 1 else ("concat", items)

    def _math2(self) -> Expr:
        left = self._unary()
        while self._peek() in (("op", "*"), ("op", "/"), ("op", "//"), ("op", "%")):
            self.i += 1
            left = ("op", left, self._unary())
        return left

    def _unary(self) -> Expr:
        node = self._postfix(self._primary())
        while True:  # Jinja2's parse_filter_expr
            token = self._peek()
            if token == ("op", "|"):
                self.i += 1
                name = self._name()
                if name not in FILTERS or self._peek() == ("op", "."):
                    raise _Unsupported
                args: list[Expr] = []
                kwargs: list[Expr] = []
                if self._peek() == ("op", "("):
                    args, kwargs = self._arguments()
                node = ("filter", node, name, args, kwargs)
            elif token == ("name", "is"):
                self.i += 1
                if self._peek() == ("name", "not"):
                    raise _Unsupported  # Jinja2 wraps it in a Not: kept out for simplicity
                name = self._name()
                after = self._peek()
                if name not in TESTS or after[0] in ("str", "int") or after in (
                        ("op", "("), ("op", "["), ("op", ".")) or (
                        after[0] == "name" and after[1] not in ("else", "or", "and")):
                    raise _Unsupported
                node = ("test", node, name)
            elif token == ("op", "("):
                args, kwargs = self._arguments()
                node = ("call", node, args, kwargs)
            else:
                return node

    def _primary(self) -> Expr:
        kind, text = self._next()
        if kind == "name":
            if text in _CONSTANTS:
                return ("const", _CONSTANTS[text])
            if text in _RESERVED:
                raise _Unsupported
            return ("name", text)
        if kind == "str":
            return ("const", text[1:-1])
        if kind == "int":
            return ("const", int(text))
        if (kind, text) == ("op", "("):
            inner = self.expression()
            self._expect("op", ")")
            return inner
        if (kind, text) == ("op", "["):
            items: list[Expr] = []
            while self._peek() != ("op", "]"):
                if items:
                    self._expect("op", ",")
                    if self._peek() == ("op", "]"):
                        break
                items.append(self.expression())
            self.i += 1
            return ("list", items)
        raise _Unsupported

    def _postfix(self, node: Expr) -> Expr:
        while True:
            token = self._peek()
            if token == ("op", "."):
                self.i += 1
                kind, text = self._next()
                if kind != "name":
                    raise _Unsupported
                node = ("getattr", node, text)
            elif token == ("op", "["):
                self.i += 1
                arg = self.expression()
                self._expect("op", "]")
                node = ("getitem", node, arg)
            elif token == ("op", "("):
                args, kwargs = self._arguments()
                node = ("call", node, args, kwargs)
            else:
                return node

    def _arguments(self) -> tuple[list[Expr], list[Expr]]:
        self._expect("op", "(")
        args: list[Expr] = []
        kwargs: list[Expr] = []
        while self._peek() != ("op", ")"):
            if args or kwargs:
                self._expect("op", ",")
                if self._peek() == ("op", ")"):
                    break
            token = self._peek()
            if token[0] == "name" and self._peek(1) == ("op", "="):
                if token[1] in _RESERVED:
                    raise _Unsupported
                self.i += 2
                kwargs.append(("kw", token[1], self.expression()))
            elif kwargs:
                raise _Unsupported  # a positional argument after a keyword one
            else:
                args.append(self.expression())
        self.i += 1
        return args, kwargs

    # -- tokens --
    def _peek(self, ahead: int = 0) -> tuple[str, str]:
        index = self.i + ahead
        return self.tokens[index] if index < len(self.tokens) else ("eof", "")

    def _next(self) -> tuple[str, str]:
        token = self._peek()
        if token[0] == "eof":
            raise _Unsupported
        self.i += 1
        return token

    def _expect(self, kind: str, text: str) -> None:
        if self._next() != (kind, text):
            raise _Unsupported

    def _name(self) -> str:
        kind, text = self._next()
        if kind != "name":
            raise _Unsupported
        return text

    def _plain_name(self) -> str:
        name = self._name()
        if name in _RESERVED:
            raise _Unsupported
        return name

    def _done(self) -> None:
        if self.i != len(self.tokens):
            raise _Unsupported


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
            _record(chain[0], chain[1], 1, found)
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
            _record(target[0], target[1], line, reads)
            for child in (*_exprs(node[2]), *_exprs(node[3])):
                _walk(child, roots, reads, line)
            return
    if kind in ("getattr", "getitem", "name"):
        chain = _chain(node)
        if chain is not None:
            if chain[0] in roots:
                _record(chain[0], chain[1], line, reads)
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
