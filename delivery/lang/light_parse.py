"""The tokenizer and parser of light_reads: the Jinja template subset the bundled workflows
use, into tuples (one allocation per node, no classes). See light_reads for the subset
and why; anything outside it answers None, and Jinja2 decides.
"""

from __future__ import annotations

import re

# Expression trees as tuples:
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


# -- parsing --------------------------------------------------------------------------------
class Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens: list[tuple[str, str]] = []
        self.i = 0
        self.line = 1
        self.end_pos = 0

    def template(self) -> Body | None:
        """The template's statements, or None when it is outside the subset (or too deeply
        nested to parse here)."""
        try:
            return self._template()
        except (_Unsupported, RecursionError):
            return None

    def _template(self) -> Body:
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
