"""Tokenizer for the DOT subset of SPEC §1.

One master regular expression, matched at the current offset; positions are tracked as
line and column (both from 1) so that every later error can name `file:line:col`.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import NamedTuple, NoReturn

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
    # tuple.__new__ builds a Token in C: the NamedTuple's own __new__ is Python code, a
    # third of the tokenizer's time on a 20,000-node file
    new = tuple.__new__
    token = Token
    tok_id, tok_string = Tok.ID, Tok.STRING
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
        elif kind == "id":
            append(new(token, (tok_id, text, line, start - line_start + 1, text)))
        elif kind == "punct":
            append(new(token, (punct[text], text, line, start - line_start + 1, text)))
        elif kind == "arrow" or kind == "number" or kind == "duration":
            append(new(token, (simple[kind], text, line, start - line_start + 1, text)))
        elif kind == "line_comment":
            pass
        else:  # string or block comment: may span lines
            if kind == "string":
                body = text[1:-1]
                append(new(token, (tok_string, unescape(body) if "\\" in body else body,
                                   line, start - line_start + 1, text)))
            newlines = text.count("\n")
            if newlines:
                line += newlines
                line_start = start + text.rfind("\n") + 1
    append(Token(Tok.EOF, "", line, pos - line_start + 1, ""))
    return tokens


def next_token(source: str, pos: int, line: int, line_start: int,
               file: str) -> tuple[Token, int, int, int, int]:
    """One token from offset `pos` (blanks, comments and newlines before it skipped), as
    `tokenize` would give it there: (token, its start offset, the offset after it, line and
    line start after it). For the parser's general path, which lexes only the statements its
    fast path leaves to it; at the end of the text it gives the EOF token every time."""
    while True:
        m = _MASTER.match(source, pos)
        if m is None:
            blank = _BLANKS.match(source, pos)
            bad = blank.end() if blank else pos
            _raise_unexpected(source, bad, file, line, bad - line_start + 1)
        kind = m.lastgroup
        end = m.end()
        if kind == "end" or kind is None:
            return Token(Tok.EOF, "", line, end - line_start + 1, ""), end, end, line, line_start
        text = m.group(kind)
        start = end - len(text)
        column = start - line_start + 1
        if kind == "nl":
            line += 1
            line_start = start + 1
        elif kind == "id" or kind == "arrow" or kind == "number" or kind == "duration":
            return Token(_SIMPLE_KINDS[kind], text, line, column, text), start, end, line, \
                line_start
        elif kind == "punct":
            return Token(_PUNCT[text], text, line, column, text), start, end, line, line_start
        elif kind != "line_comment":  # string or block comment: may span lines
            newlines = text.count("\n")
            after_line, after_start = line, line_start
            if newlines:
                after_line += newlines
                after_start = start + text.rfind("\n") + 1
            if kind == "string":
                return (Token(Tok.STRING, unescape(text[1:-1]), line, column, text), start, end,
                        after_line, after_start)
            line, line_start = after_line, after_start
        pos = end


def skip_first_hash_line(source: str) -> int:
    """Where lexing starts: after a '#' line at the very start (DOT's preprocessor rule)."""
    first = _HASH_FIRST_LINE.match(source)
    return first.end() if first else 0


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
