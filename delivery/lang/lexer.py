"""Tokenizer for the DOT subset of SPEC §1.

One master regular expression, matched at the current offset; positions are tracked as
line and column (both from 1) so that every later error can name `file:line:col`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import NoReturn

from delivery.errors import Position, WorkflowSyntaxError


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


@dataclass(frozen=True, slots=True)
class Token:
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


_MASTER = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<string>"(?:[^"\\]|\\.)*")  # one way to match each character: no backtracking
  | (?P<duration>[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h|d)(?![A-Za-z0-9_]))
  | (?P<number>-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?![A-Za-z_]))
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<arrow>->)
  | (?P<punct>[{}\[\]=;,])
    """,
    re.VERBOSE | re.DOTALL,
)

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


def unescape(raw_body: str) -> str:
    """Resolve `\\"` `\\\\` `\\n` `\\t` and line continuations; other escapes stay as written
    (Graphviz's `\\l`, `\\N` ... keep their backslash)."""
    if "\\" not in raw_body:
        return raw_body
    out: list[str] = []
    i = 0
    n = len(raw_body)
    while i < n:
        ch = raw_body[i]
        if ch == "\\" and i + 1 < n:
            nxt = raw_body[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
            else:
                out.append(ch + nxt)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def tokenize(source: str, file: str = "<workflow>") -> list[Token]:
    """Split DOT text into tokens, ending with one EOF token.

    Raises WorkflowSyntaxError for a character that starts no token, an unterminated
    string or comment, an HTML string, or the undirected edge operator `--`.
    """
    tokens: list[Token] = []
    append = tokens.append
    pos = 0
    line = 1
    line_start = 0
    n = len(source)
    match = _MASTER.match
    at_line_start = True
    while pos < n:
        if at_line_start:
            # A line whose first non-blank character is '#' is a comment
            # (DOT's C-preprocessor rule).
            probe = pos
            while probe < n and source[probe] in " \t":
                probe += 1
            if probe < n and source[probe] == "#":
                end = source.find("\n", probe)
                pos = n if end == -1 else end
                at_line_start = False
                continue
        m = match(source, pos)
        column = pos - line_start + 1
        if m is None:
            _raise_unexpected(source, pos, file, line, column)
        kind = m.lastgroup
        text = m.group()
        at_line_start = False
        if kind == "ws" or kind == "line_comment":
            pass
        elif kind == "nl":
            line += 1
            line_start = m.end()
            at_line_start = True
        elif kind == "block_comment":
            newlines = text.count("\n")
            if newlines:
                line += newlines
                line_start = pos + text.rfind("\n") + 1
        elif kind == "string":
            append(Token(Tok.STRING, unescape(text[1:-1]), line, column, text))
            newlines = text.count("\n")
            if newlines:
                line += newlines
                line_start = pos + text.rfind("\n") + 1
        elif kind == "id":
            append(Token(Tok.ID, text, line, column, text))
        elif kind == "number":
            append(Token(Tok.NUMBER, text, line, column, text))
        elif kind == "duration":
            append(Token(Tok.DURATION, text, line, column, text))
        elif kind == "arrow":
            append(Token(Tok.ARROW, text, line, column, text))
        else:
            append(Token(_PUNCT[text], text, line, column, text))
        pos = m.end()
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
