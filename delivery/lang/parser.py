"""Recursive-descent parser for the DOT subset of SPEC §1.

    graph      := 'digraph' NAME? '{' statement* '}'
    statement  := ('graph'|'node'|'edge') attrs | 'subgraph' NAME? '{' statement* '}'
                | ID '=' value | ID ('->' ID)* attrs?          (each optionally ended by ';')
    attrs      := ('[' (KEY '=' value (','|';')?)* ']')+
    value      := STRING | NUMBER | DURATION | ID

The first error stops the parse: no partial graph is ever returned.

Two paths, one result (tests/lang/test_dot_golden.py holds both to the golden files of
tests/golden/dot, fast-path cases included). The bulk of a large file is one-line node and edge
statements between plain ids: one compiled regular expression matches such a statement
whole at its start offset and the syntax tree is built from the match (an attribute is one
more match), with no token in between. Anything else, or anything unusual in one (an
escape or newline in a string, a comment inside, a keyword, a second attribute block), is
lexed token by token from the statement's start and parsed by the general methods, which
alone raise the errors. Tokens are lexed lazily, so none outlive their statement.
"""

from __future__ import annotations

import re
from typing import Literal

from delivery.errors import Position, WorkflowSyntaxError
from delivery.lang.lexer import Tok, Token, next_token, skip_first_hash_line
from delivery.lang.syntax import (
    AttrAssign,
    DefaultsStmt,
    DotGraph,
    EdgeStmt,
    GraphAttrStmt,
    NodeStmt,
    Statement,
    SubgraphStmt,
    Value,
)

NODE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEYWORDS = {"graph", "node", "edge", "subgraph", "digraph", "strict"}
# Subgraphs nest at most this deep: the parser and the builder recurse per level.
MAX_SUBGRAPH_DEPTH = 100

# -- the fast path ----------------------------------------------------------------------
# Each token below is an atomic group written as the lexer's own pattern for it, so it
# matches exactly the text the lexer's token would (the lexer, too, takes the first
# alternative that matches and never gives back what it took). A statement that the fast
# pattern does not match whole is left to the general path.
_BLANK = r"[ \t\r\f\v]*+"
_PLAIN_ID = r"(?>[A-Za-z_][A-Za-z0-9_]*+)(?!\.[A-Za-z_])"  # a dotted id is the general path's
_ID = r"(?>[A-Za-z_][A-Za-z0-9_]*+(?:\.[A-Za-z_][A-Za-z0-9_]*+)*+)"


def _value(capture: bool, suffix: str = "") -> str:
    """A value token; `capture` names its kind's group (s, d, n or w, then `suffix`)."""
    def group(name: str, pattern: str) -> str:
        return f"(?P<{name}{suffix}>{pattern})" if capture else f"(?:{pattern})"
    return ("(?>" + group("s", r'"[^"\\\n]*+"')  # a string without escapes or newlines
            + "|" + group("d", r"[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h|d)(?![A-Za-z0-9_])")
            + "|" + group("n", r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?![A-Za-z_])")
            + "|" + group("w", _ID) + ")")


_ATTR = rf"(?P<k>{_ID}){_BLANK}={_BLANK}{_value(capture=True)}"
_SLOTS = 4


def _slots(count: int) -> str:
    """`count` attributes, each optional after the one before, with its key in k<i> and its
    value in s<i>, d<i>, n<i> or w<i>; then the rest in `more` (each is followed by blanks
    and at most one ',' or ';', as the general path reads an attribute list)."""
    def item(i: int | None) -> str:
        key = f"(?P<k{i}>{_ID})" if i is not None else _ID
        return (rf"{key}{_BLANK}={_BLANK}{_value(i is not None, str(i))}{_BLANK}"
                rf"(?:[,;]{_BLANK})?")
    pattern = rf"(?P<more>(?:{item(None)})*+)"
    for i in reversed(range(count)):
        pattern = rf"(?:{item(i)}{pattern})?"
    return pattern


# What may separate statements: blanks, newlines (a '#' line after one is a comment),
# comments and ';' (the general loop skips ';' tokens the same way).
_GAP = r"(?:[ \t\r\f\v]++|\n(?:[ \t]*\#[^\n]*)?|//[^\n]*|/\*.*?\*/)*+"
_SKIP = r"(?:[ \t\r\f\v]++|\n(?:[ \t]*\#[^\n]*)?|//[^\n]*|/\*.*?\*/|;)*+"
_STATEMENT = (
    rf"(?P<head>{_PLAIN_ID})"
    # the first target has a group of its own: most chains are `a -> b`, read without a scan
    rf"(?P<chain>(?:{_BLANK}->{_BLANK}(?P<to>{_PLAIN_ID})(?:{_BLANK}->{_BLANK}{_PLAIN_ID})*+)?+)"
    rf"{_BLANK}"
    # the first _SLOTS attributes each in groups of their own (read from this match, with no
    # match per attribute), any more in the group `more` (read by _ATTR_ITEM)
    rf"(?:\[(?P<attrs>{_BLANK}(?>{_slots(_SLOTS)}))\])?"
    # the statement ends here only if what follows cannot continue it (newlines do not end
    # a statement: `a` then `[x=1]` on the next line is one node statement)
    rf"(?={_GAP}(?![\[=\-]))"
)
_GAPPED_STATEMENT = re.compile(_SKIP + _STATEMENT, re.DOTALL)
# its groups by number (a name is one more dict lookup per use, several per statement)
_HEAD, _CHAIN, _TO, _ATTRS, _MORE = (_GAPPED_STATEMENT.groupindex[name]
                                      for name in ("head", "chain", "to", "attrs", "more"))
# per slot, the group numbers of its key and of its value as a string, word, number and
# duration (match.groups() holds group n at n - 1)
_SLOT_GROUPS = tuple(tuple(_GAPPED_STATEMENT.groupindex[f"{kind}{i}"] for kind in "ksnwd")
                     for i in range(_SLOTS))
_ATTR_ITEM = re.compile(_ATTR)
# _ATTR's groups by number: the key, then the value as a string, duration, number or word
_S, _D, _N, _W = (_ATTR_ITEM.groupindex[name] for name in ("s", "d", "n", "w"))
assert _ATTR_ITEM.groupindex["k"] == 1 and (_S, _D, _N, _W) == (2, 3, 4, 5)
_CHAIN_ID = re.compile(_PLAIN_ID)
_SKIP_RE = re.compile(_SKIP, re.DOTALL)


def parse_dot(source: str, file: str = "<workflow>") -> DotGraph:
    """Parse DOT text into a syntax tree, or raise WorkflowSyntaxError naming file:line:col."""
    # a UTF-8 byte order mark some editors write is not part of the text
    return _Parser(source.removeprefix("\ufeff"), file).parse()


class _Parser:
    def __init__(self, source: str, file: str) -> None:
        self.source = source
        self.file = file
        self.depth = 0
        # the lexer's state: the offset it reads from next, the line there and where that
        # line starts (columns are offsets from it)
        self.pos = skip_first_hash_line(source)
        self.line = 1
        self.line_start = 0
        # tokens lexed and not yet dropped (at most a statement's), with their offsets
        self.tokens: list[Token] = []
        self.offsets: list[int] = []
        self.i = 0

    def parse(self) -> DotGraph:
        try:
            return self.parse_graph()
        except WorkflowSyntaxError:
            # The earlier parser lexed the whole file first, so a character that starts no
            # token, anywhere, was the error reported: finish lexing to find one.
            self._lex_rest()
            raise

    def _lex_rest(self) -> None:
        pos, line, line_start = self.pos, self.line, self.line_start
        while True:
            tok, _, pos, line, line_start = next_token(self.source, pos, line, line_start,
                                                       self.file)
            if tok.kind is Tok.EOF:
                return

    # -- helpers ---------------------------------------------------------------
    def _fill(self, index: int) -> None:
        tokens = self.tokens
        while len(tokens) <= index:
            if tokens and tokens[-1].kind is Tok.EOF:
                return
            tok, start, self.pos, self.line, self.line_start = next_token(
                self.source, self.pos, self.line, self.line_start, self.file)
            tokens.append(tok)
            self.offsets.append(start)

    def peek(self, ahead: int = 0) -> Token:
        index = self.i + ahead
        if index >= len(self.tokens):
            self._fill(index)
            if index >= len(self.tokens):
                return self.tokens[-1]
        return self.tokens[index]

    def advance(self) -> Token:
        tok = self.peek()
        if tok.kind is not Tok.EOF:
            self.i += 1
        return tok

    def _resync(self) -> None:
        """Drop the tokens consumed and any looked ahead at: the lexer goes back to the
        first unconsumed one, where the fast path may take over."""
        if self.i < len(self.tokens):
            tok = self.tokens[self.i]
            start = self.offsets[self.i]
            self.pos, self.line, self.line_start = start, tok.line, start - tok.column + 1
        self.tokens.clear()
        self.offsets.clear()
        self.i = 0

    def error(self, tok: Token, expected: str, fix: str = "") -> WorkflowSyntaxError:
        return WorkflowSyntaxError(
            Position(self.file, tok.line, tok.column), expected, tok.describe(), fix
        )

    def expect(self, kind: Tok, expected: str | None = None, fix: str = "") -> Token:
        tok = self.peek()
        if tok.kind is not kind:
            raise self.error(tok, expected or kind.value, fix)
        return self.advance()

    @staticmethod
    def is_keyword(tok: Token, word: str) -> bool:
        return tok.kind is Tok.ID and tok.text.lower() == word

    # -- grammar ---------------------------------------------------------------
    def parse_graph(self) -> DotGraph:
        tok = self.peek()
        if self.is_keyword(tok, "strict"):
            raise self.error(tok, "'digraph'", "'strict' graphs are not supported; remove it")
        if self.is_keyword(tok, "graph"):
            raise self.error(
                tok, "'digraph'", "undirected graphs are not supported; write 'digraph NAME {'"
            )
        if not self.is_keyword(tok, "digraph"):
            raise self.error(tok, "'digraph'", "a workflow starts with 'digraph NAME {'")
        self.advance()
        name = ""
        if self.peek().kind in (Tok.ID, Tok.STRING):
            name = self.advance().text
        self.expect(Tok.LBRACE, "'{'", "write 'digraph NAME {'")
        body = self.parse_statements()
        self.expect(Tok.RBRACE, "'}' or a statement")
        end = self.peek()
        if end.kind is not Tok.EOF:
            raise self.error(end, "end of file", "a file holds exactly one digraph")
        return DotGraph(name, self.file, tok.line, tok.column, body)

    def parse_statements(self) -> list[Statement]:
        body: list[Statement] = []
        append = body.append
        source = self.source
        gapped, skip = _GAPPED_STATEMENT.match, _SKIP_RE.match
        fast = self._fast_statement
        while True:
            if self.tokens:
                self._resync()
            pos = self.pos
            # the common case in one match: what separates statements, then a fast one
            m = gapped(source, pos)
            end = m.start(_HEAD) if m is not None else -1
            if m is None:
                gap = skip(source, pos)  # the pattern matches the empty string: never None
                end = gap.end() if gap is not None else pos
            if end != pos:
                newlines = source.count("\n", pos, end)
                if newlines:
                    self.line += newlines
                    self.line_start = source.rfind("\n", pos, end) + 1
                self.pos = end
            if m is not None:
                stmt = fast(m)
                if stmt is not None:
                    append(stmt)
                    continue
            kind = self.peek().kind
            if kind is Tok.RBRACE or kind is Tok.EOF:
                return body
            if kind is Tok.SEMI:
                self.advance()
                continue
            append(self.parse_statement())

    def _fast_statement(self, m: re.Match[str]) -> Statement | None:
        """The statement `m` matched (a one-line node or edge statement the fast pattern
        matches whole), at the lexer's offset; None for a keyword, left to the general
        path (nothing consumed)."""
        head = m.group(_HEAD)
        if head.lower() in _KEYWORDS:
            return None
        line, line_start = self.line, self.line_start
        head_column = m.start(_HEAD) - line_start + 1
        chain_start, chain_end = m.span(_CHAIN)
        chain: list[tuple[str, int, int]] | None = None
        if chain_start != chain_end:
            to_start, to_end = m.span(_TO)
            if to_end == chain_end:  # a -> b, the common edge: its target is the group's
                to = m.group(_TO)
                if to.lower() in _KEYWORDS:
                    return None
                chain = [(head, line, head_column), (to, line, to_start - line_start + 1)]
            else:
                chain = [(head, line, head_column)]
                for target in _CHAIN_ID.finditer(self.source, chain_start, chain_end):
                    name = target.group()
                    if name.lower() in _KEYWORDS:
                        return None
                    chain.append((name, line, target.start() - line_start + 1))
        attrs: list[AttrAssign] = []
        if m.start(_ATTRS) >= 0:
            append = attrs.append
            # Value and Attribute are named tuples: tuple.__new__ builds them in C
            new, value_type, attr_type = tuple.__new__, Value, AttrAssign
            start = m.start
            groups = m.groups()
            for k, s, n, w, d in _SLOT_GROUPS:
                key = groups[k - 1]
                if key is None:
                    break  # fewer attributes than slots
                # the value's kind: the one of its groups that matched
                raw = groups[s - 1]
                if raw is not None:
                    value = new(value_type, ("string", raw[1:-1], line,
                                             start(s) - line_start + 1, raw))
                elif (raw := groups[w - 1]) is not None:
                    value = new(value_type, ("bool" if raw in ("true", "false") else "word",
                                             raw, line, start(w) - line_start + 1, raw))
                elif (raw := groups[n - 1]) is not None:
                    value = new(value_type, ("float" if "." in raw else "int", raw, line,
                                             start(n) - line_start + 1, raw))
                else:
                    raw = groups[d - 1]
                    value = new(value_type, ("duration", raw, line,
                                             start(d) - line_start + 1, raw))
                append(new(attr_type, (key, value, line, start(k) - line_start + 1, False)))
            else:
                more_start, more_end = m.span(_MORE)
                if more_start != more_end:
                    self._more_attributes(more_start, more_end, line, line_start, attrs)
        self.pos = m.end()
        if chain is not None:
            return EdgeStmt(chain, attrs, line, head_column)
        return NodeStmt(head, line, head_column, attrs)

    def _more_attributes(self, start: int, end: int, line: int, line_start: int,
                         attrs: list[AttrAssign]) -> None:
        """The attributes of a fast statement beyond its slots, one match each."""
        append = attrs.append
        new, value_type, attr_type = tuple.__new__, Value, AttrAssign
        for item in _ATTR_ITEM.finditer(self.source, start, end):
            # the value's group by number: 2 s, 3 d, 4 n, 5 w (one always matched)
            group = item.lastindex or _W
            raw = item.group(group)
            column = item.start(group) - line_start + 1
            if group == _S:
                value = new(value_type, ("string", raw[1:-1], line, column, raw))
            elif group == _W:
                value = new(value_type, ("bool" if raw in ("true", "false") else "word",
                                         raw, line, column, raw))
            elif group == _N:
                value = new(value_type, ("float" if "." in raw else "int", raw, line,
                                         column, raw))
            else:
                value = new(value_type, ("duration", raw, line, column, raw))
            append(new(attr_type, (item.group(1), value, line,
                                   item.start() - line_start + 1, False)))

    # -- the general path --------------------------------------------------------
    def parse_statement(self) -> Statement:
        tok = self.peek()
        if tok.kind is Tok.LBRACE:
            return self.parse_subgraph(anonymous=True)
        if tok.kind is not Tok.ID:
            if tok.kind is Tok.STRING or tok.kind is Tok.NUMBER:
                raise self.error(
                    tok, "a node id", "node ids are identifiers: [A-Za-z_][A-Za-z0-9_]*, unquoted"
                )
            raise self.error(tok, "a statement")
        word = tok.text.lower()
        if word in ("graph", "node", "edge") and self.peek(1).kind is Tok.LBRACKET:
            self.advance()
            target: Literal["graph", "node", "edge"] = (
                "graph" if word == "graph" else "node" if word == "node" else "edge")
            return DefaultsStmt(target, self.parse_attr_blocks(), tok.line, tok.column)
        if word == "subgraph":
            return self.parse_subgraph(anonymous=False)
        if word in _KEYWORDS:
            raise self.error(
                self.peek(1), "'['" if word != "digraph" else "a statement",
                f"'{tok.text}' is a keyword and cannot be a node id",
            )
        if self.peek(1).kind is Tok.EQUALS:
            key = self.advance()
            self.advance()
            value = self.parse_value()
            return GraphAttrStmt(AttrAssign(key.text, value, key.line, key.column))
        first = self.parse_node_id()
        if self.peek().kind is Tok.ARROW:
            chain = [first]
            while self.peek().kind is Tok.ARROW:
                self.advance()
                if self.peek().kind is Tok.LBRACE:
                    raise self.error(
                        self.peek(), "a node id", "edges to subgraphs are not supported"
                    )
                chain.append(self.parse_node_id())
            attrs = self.parse_attr_blocks() if self.peek().kind is Tok.LBRACKET else []
            return EdgeStmt(chain, attrs, tok.line, tok.column)
        attrs = self.parse_attr_blocks() if self.peek().kind is Tok.LBRACKET else []
        return NodeStmt(first[0], first[1], first[2], attrs)

    def parse_node_id(self) -> tuple[str, int, int]:
        tok = self.peek()
        if tok.kind is not Tok.ID:
            raise self.error(
                tok, "a node id", "node ids are identifiers: [A-Za-z_][A-Za-z0-9_]*, unquoted"
            )
        if not NODE_ID.match(tok.text):
            raise self.error(tok, "a node id", "node ids cannot contain '.'; use '_'")
        if tok.text.lower() in _KEYWORDS:
            raise self.error(tok, "a node id", f"'{tok.text}' is a keyword")
        self.advance()
        return (tok.text, tok.line, tok.column)

    def parse_subgraph(self, *, anonymous: bool) -> SubgraphStmt:
        if self.depth >= MAX_SUBGRAPH_DEPTH:
            raise self.error(self.peek(), f"at most {MAX_SUBGRAPH_DEPTH} nested subgraphs",
                             "flatten the subgraphs: nesting only scopes node and edge defaults")
        start = self.advance()  # 'subgraph' or '{'
        name: str | None = None
        if not anonymous:
            if self.peek().kind in (Tok.ID, Tok.STRING):
                name = self.advance().text
            self.expect(Tok.LBRACE, "'{'", "write 'subgraph NAME { ... }'")
        self.depth += 1
        body = self.parse_statements()
        self.depth -= 1
        self.expect(Tok.RBRACE, "'}' or a statement", "close the subgraph")
        return SubgraphStmt(name, start.line, start.column, body)

    def parse_attr_blocks(self) -> list[AttrAssign]:
        attrs: list[AttrAssign] = []
        self.expect(Tok.LBRACKET, "'['")
        while True:
            tok = self.peek()
            if tok.kind is Tok.RBRACKET:
                self.advance()
                if self.peek().kind is Tok.LBRACKET:
                    self.advance()
                    continue
                return attrs
            if tok.kind is not Tok.ID:
                if tok.kind is Tok.EOF:
                    raise self.error(tok, "']'", "close the attribute list")
                raise self.error(tok, "an attribute name or ']'")
            self.advance()
            eq = self.peek()
            if eq.kind is not Tok.EQUALS:
                raise self.error(eq, "'='", f"write {tok.text}=VALUE")
            self.advance()
            attrs.append(AttrAssign(tok.text, self.parse_value(), tok.line, tok.column))
            if self.peek().kind in (Tok.COMMA, Tok.SEMI):
                self.advance()

    def parse_value(self) -> Value:
        tok = self.peek()
        kind = tok.kind
        if kind is Tok.STRING:
            self.advance()
            return Value("string", tok.text, tok.line, tok.column, tok.raw)
        if kind is Tok.NUMBER:
            self.advance()
            is_float = "." in tok.text
            return Value("float" if is_float else "int", tok.text, tok.line, tok.column, tok.raw)
        if kind is Tok.DURATION:
            self.advance()
            return Value("duration", tok.text, tok.line, tok.column, tok.raw)
        if kind is Tok.ID:
            self.advance()
            if tok.text in ("true", "false"):
                return Value("bool", tok.text, tok.line, tok.column, tok.raw)
            return Value("word", tok.text, tok.line, tok.column, tok.raw)
        raise self.error(tok, "a value", "quote values that contain spaces or punctuation")
