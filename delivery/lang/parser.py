"""Recursive-descent parser for the DOT subset of SPEC §1.

    graph      := 'digraph' NAME? '{' statement* '}'
    statement  := ('graph'|'node'|'edge') attrs | 'subgraph' NAME? '{' statement* '}'
                | ID '=' value | ID ('->' ID)* attrs?          (each optionally ended by ';')
    attrs      := ('[' (KEY '=' value (','|';')?)* ']')+
    value      := STRING | NUMBER | DURATION | ID

The first error stops the parse: no partial graph is ever returned.
"""

from __future__ import annotations

import re
from typing import Literal

from delivery.errors import Position, WorkflowSyntaxError
from delivery.lang.lexer import Tok, Token, tokenize
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
_ID, _STRING, _NUMBER, _DURATION, _EOF = Tok.ID, Tok.STRING, Tok.NUMBER, Tok.DURATION, Tok.EOF
_ARROW, _RBRACE = Tok.ARROW, Tok.RBRACE
_LBRACKET, _RBRACKET, _EQUALS, _COMMA, _SEMI = (Tok.LBRACKET, Tok.RBRACKET, Tok.EQUALS,
                                                Tok.COMMA, Tok.SEMI)
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
        index = self.i + ahead
        tokens = self.tokens
        return tokens[index] if index < len(tokens) else tokens[-1]

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
        tokens = self.tokens
        while True:
            kind = tokens[self.i].kind  # never past the EOF token
            if kind is _RBRACE or kind is _EOF:
                return body
            if kind is _SEMI:
                self.i += 1
                continue
            body.append(self.parse_statement())

    def parse_statement(self) -> Statement:
        """Node and edge statements between plain ids, the bulk of a file, indexed
        directly; any other statement, or anything unusual in one, is parsed again from
        its start by the general method, which alone raises the errors."""
        tokens = self.tokens
        i = self.i
        tok = tokens[i]
        if tok.kind is not _ID:
            return self._statement()
        text = tok.text
        after = tokens[i + 1].kind  # tok is not EOF, so a token follows
        if after is _EQUALS or "." in text or text.lower() in _KEYWORDS:
            return self._statement()
        if after is _ARROW:
            chain = [(text, tok.line, tok.column)]
            j = i + 1
            while tokens[j].kind is _ARROW:
                target = tokens[j + 1]
                name = target.text
                if target.kind is not _ID or "." in name or name.lower() in _KEYWORDS:
                    return self._statement()
                chain.append((name, target.line, target.column))
                j += 2
            self.i = j
            attrs = self.parse_attr_blocks() if tokens[j].kind is _LBRACKET else []
            return EdgeStmt(chain, attrs, tok.line, tok.column)
        self.i = i + 1
        attrs = self.parse_attr_blocks() if after is _LBRACKET else []
        return NodeStmt(text, tok.line, tok.column, attrs)

    def _statement(self) -> Statement:
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
        # The hot loop of a large file (a third of its tokens are in attribute lists): the
        # tokens are indexed directly. The list ends with EOF and no branch moves past it.
        attrs: list[AttrAssign] = []
        append = attrs.append
        tokens = self.tokens
        self.expect(Tok.LBRACKET, "'['")
        i = self.i
        while True:
            tok = tokens[i]
            kind = tok.kind
            if kind is _RBRACKET:
                i += 1
                if tokens[i].kind is _LBRACKET:
                    i += 1
                    continue
                self.i = i
                return attrs
            if kind is not _ID:
                self.i = i
                if kind is _EOF:
                    raise self.error(tok, "']'", "close the attribute list")
                raise self.error(tok, "an attribute name or ']'")
            eq = tokens[i + 1]
            if eq.kind is not _EQUALS:
                self.i = i + 1
                raise self.error(eq, "'='", f"write {tok.text}=VALUE")
            value_tok = tokens[i + 2]
            value_kind = value_tok.kind
            if value_kind is _STRING:
                value = Value("string", value_tok.text, value_tok.line, value_tok.column,
                              value_tok.raw)
            elif value_kind is _ID or value_kind is _NUMBER or value_kind is _DURATION:
                self.i = i + 2
                value = self.parse_value()
            else:
                self.i = i + 2
                raise self.error(value_tok, "a value",
                                 "quote values that contain spaces or punctuation")
            append(AttrAssign(tok.text, value, tok.line, tok.column))
            i += 3
            if tokens[i].kind is _COMMA or tokens[i].kind is _SEMI:
                i += 1

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
