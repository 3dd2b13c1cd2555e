"""The DOT lexer and parser as they were before issue 23's speed-ups, kept as the oracle
that tests/lang/test_dot_oracle.py compares the fast ones with. Not used by delivery."""
from __future__ import annotations

import re
from enum import Enum
from typing import Literal, NamedTuple, NoReturn

from delivery.errors import Position, WorkflowSyntaxError
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


class Tok(Enum):
    ID = "identifier"
    NUMBER = "number"
    DURATION = "duration"
    STRING = "string"
    LBRACE = "'{'"
    RBRACE = "'}'"
    LBRACKET = "'['"
    RBRACKET = "']'"
    EQUALS = "'='"
    SEMI = "';'"
    COMMA = "','"
    ARROW = "'->'"
    EOF = "end of file"


class Token(NamedTuple):
    kind: Tok
    text: str  # the token's value: for strings, unescaped
    line: int
    column: int
    raw: str  # the token exactly as written in the source

    def describe(self) -> str:
        if self.kind is Tok.EOF:
            return "end of file"
        if self.kind is Tok.STRING:
            return f"string {self.raw[:40]}"
        return f"{self.kind.value.strip(chr(39))} {self.raw!r}" if self.kind in (
            Tok.ID,
            Tok.NUMBER,
            Tok.DURATION,
        ) else f"'{self.raw}'"


# Blanks are skipped in front of every token, in the same match. A newline also swallows a
# following '#' line: such a line is a comment (DOT's C-preprocessor rule).
_MASTER = re.compile(
    r"""
    [ \t\r\f\v]*
    (?:
      (?P<nl>\n(?:[ \t]*\#[^\n]*)?)
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    | (?P<punct>[{}\[\]=;,])
    # possessive: a repeat that cannot backtrack keeps no state per character (a plain
    # (?:[^"\\]|\\.)* took ~230 bytes of memory per character of the string)
    | (?P<string>"[^"\\]*+(?:\\.[^"\\]*+)*+")
    | (?P<arrow>->)
    | (?P<line_comment>//[^\n]*)
    | (?P<block_comment>/\*.*?\*/)
    | (?P<duration>[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h|d)(?![A-Za-z0-9_]))
    | (?P<number>-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?![A-Za-z_]))
    | (?P<end>\Z)
    )
    """,
    re.VERBOSE | re.DOTALL,
)
_HASH_FIRST_LINE = re.compile(r"[ \t]*#[^\n]*")
_BLANKS = re.compile(r"[ \t\r\f\v]*")
_SIMPLE_KINDS = {"id": Tok.ID, "number": Tok.NUMBER, "duration": Tok.DURATION,
                 "arrow": Tok.ARROW}

_PUNCT = {
    "{": Tok.LBRACE,
    "}": Tok.RBRACE,
    "[": Tok.LBRACKET,
    "]": Tok.RBRACKET,
    "=": Tok.EQUALS,
    ";": Tok.SEMI,
    ",": Tok.COMMA,
}

_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "\n": ""}


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _unescape_one(m: re.Match[str]) -> str:
    escaped = _ESCAPES.get(m.group(1))
    return m.group(0) if escaped is None else escaped


def unescape(raw_body: str) -> str:
    """Resolve `\\"` `\\\\` `\\n` `\\t` and line continuations; other escapes stay as written
    (Graphviz's `\\l`, `\\N` ... keep their backslash)."""
    if "\\" not in raw_body:
        return raw_body
    return _ESCAPE.sub(_unescape_one, raw_body)


def tokenize(source: str, file: str = "<workflow>") -> list[Token]:
    """Split DOT text into tokens, ending with one EOF token.

    Raises WorkflowSyntaxError for a character that starts no token, an unterminated
    string or comment, an HTML string, or the undirected edge operator `--`.
    """
    tokens: list[Token] = []
    append = tokens.append
    match = _MASTER.match
    punct = _PUNCT
    simple = _SIMPLE_KINDS
    line = 1
    line_start = 0
    first = _HASH_FIRST_LINE.match(source)
    pos = first.end() if first else 0
    while True:
        m = match(source, pos)
        if m is None:
            blank = _BLANKS.match(source, pos)
            bad = blank.end() if blank else pos
            _raise_unexpected(source, bad, file, line, bad - line_start + 1)
        kind = m.lastgroup
        pos = m.end()
        if kind == "end" or kind is None:
            break
        text = m.group(kind)
        start = pos - len(text)
        if kind == "nl":
            line += 1
            line_start = start + 1
        elif kind == "id" or kind == "arrow" or kind == "number" or kind == "duration":
            append(Token(simple[kind], text, line, start - line_start + 1, text))
        elif kind == "punct":
            append(Token(punct[text], text, line, start - line_start + 1, text))
        elif kind == "line_comment":
            pass
        else:  # string or block comment: may span lines
            if kind == "string":
                append(Token(Tok.STRING, unescape(text[1:-1]), line, start - line_start + 1,
                             text))
            newlines = text.count("\n")
            if newlines:
                line += newlines
                line_start = start + text.rfind("\n") + 1
    append(Token(Tok.EOF, "", line, pos - line_start + 1, ""))
    return tokens


def _raise_unexpected(source: str, pos: int, file: str, line: int, column: int) -> NoReturn:
    where = Position(file, line, column)
    rest = source[pos : pos + 2]
    ch = source[pos]
    if rest == "--":
        raise WorkflowSyntaxError(
            where,
            "'->'",
            "'--'",
            "undirected edges are not supported: write a -> b in a digraph",
        )
    if ch == '"':
        raise WorkflowSyntaxError(where, "a closing '\"'", "end of file", "close the string")
    if rest == "/*":
        raise WorkflowSyntaxError(where, "'*/'", "end of file", "close the block comment")
    if ch == "<":
        raise WorkflowSyntaxError(
            where, "a value", "'<'", "HTML-like labels are not supported; use a quoted string"
        )
    if ch == "-":
        raise WorkflowSyntaxError(where, "'->' or a number", repr(rest), "edges are written a -> b")
    raise WorkflowSyntaxError(
        where,
        "an identifier, a value or one of { } [ ] = ; , ->",
        repr(ch),
        "quote values that contain punctuation",
    )
NODE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEYWORDS = {"graph", "node", "edge", "subgraph", "digraph", "strict"}
# Subgraphs nest at most this deep: the parser and the builder recurse per level.
MAX_SUBGRAPH_DEPTH = 100


def parse_dot(source: str, file: str = "<workflow>") -> DotGraph:
    """Parse DOT text into a syntax tree, or raise WorkflowSyntaxError naming file:line:col."""
    # a UTF-8 byte order mark some editors write is not part of the text
    return _Parser(tokenize(source.removeprefix("\ufeff"), file), file).parse_graph()


class _Parser:
    def __init__(self, tokens: list[Token], file: str) -> None:
        self.tokens = tokens
        self.i = 0
        self.file = file
        self.depth = 0

    # -- helpers ---------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind is not Tok.EOF:
            self.i += 1
        return tok

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
        while True:
            tok = self.peek()
            if tok.kind is Tok.RBRACE or tok.kind is Tok.EOF:
                return body
            if tok.kind is Tok.SEMI:
                self.advance()
                continue
            body.append(self.parse_statement())

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
            lowered = tok.text
            if lowered in ("true", "false"):
                return Value("bool", lowered, tok.line, tok.column, tok.raw)
            return Value("word", tok.text, tok.line, tok.column, tok.raw)
        raise self.error(tok, "a value", "quote values that contain spaces or punctuation")


def value_position(value: Value, offset: int) -> tuple[int, int]:
    """Line and column of character `offset` of a value's unescaped text."""
    if not value.quoted:
        return value.line, value.column + offset
    line, column = value.line, value.column + 1
    raw = value.raw[1:-1]
    i = 0
    produced = 0
    while i < len(raw) and produced < offset:
        step = 2 if raw[i] == "\\" and i + 1 < len(raw) else 1
        if raw[i] == "\n" or (step == 2 and raw[i + 1] == "\n"):
            line += 1
            column = 1
        else:
            column += step
        produced += 0 if (step == 2 and raw[i + 1] == "\n") else 1
        i += step
    return line, column
