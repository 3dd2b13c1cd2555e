"""Text from issues, PRs and reviews as a reader of the page sees it, before an agent
sees it (SPEC §14): instructions for an agent could hide where a person does not look.

Removed:

* HTML comments (`<!-- … -->`, an unterminated one to the end, as a browser does) and
  what a browser's tokenizer reads as a comment too (`<?php … ?>`, `<!DOCTYPE …>`,
  `<![CDATA[…]]>`, `</ x>`): GitHub shows some of those as text when its markdown does
  not take them for HTML, but hiding too much is safe, too little is not;
* `<details>` elements not marked open, whole (their `<summary>` too: the block is what
  hides). The HTML is parsed (`html.parser`), nesting honoured: an inner `<details open>`
  does not reveal an outer closed one, and only the `open` *attribute* opens one
  (`<details title="open">` stays closed);
* characters that draw nothing: Unicode format characters (category Cf: zero-width
  spaces and joiners, bidi embeddings, overrides and isolates, the BOM, the soft hyphen,
  the tag characters U+E0000-E007F) and the variation selectors (U+FE00-FE0F,
  U+E0100-E01EF), which can smuggle bytes after a visible character;
* markdown comment lines (`[//]: # (…)`, `[comment]: <> (…)`, …): a link reference
  definition renders nothing, so one that no link uses is removed (one that is used makes
  a visible link and stays).

Code is text a reader sees as written: a code span or block mentioning `<details>` or
`<!--` is kept as it is. Where code is, is found with a markdown parser (markdown-it-py,
CommonMark plus GitHub's tables), the same way GitHub finds it.

Removing one part can join two others into a new hidden part (`<!-<!-- x -->- y -->`), so
stripping repeats until nothing changes; text that still changes after `_PASSES` passes is
cut at its first remaining `<` (hiding too much is safe, too little is not).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable
from html.parser import HTMLParser
from typing import Any, Final

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline, backtick
from markdown_it.token import Token

_PASSES: Final = 20

# Block tokens that render their lines; a line that none covers renders nothing of its own
# (a link reference definition, or only a container marker).
_RENDERED: Final = frozenset({"paragraph_open", "heading_open", "fence", "code_block",
                              "html_block", "hr", "table_open"})
_CODE_BLOCKS: Final = frozenset({"fence", "code_block"})
_SPANS_KEY: Final = "delivery_code_spans"


def _invisible(char: str) -> bool:
    point = ord(char)
    return (unicodedata.category(char) == "Cf" or 0xFE00 <= point <= 0xFE0F
            or 0xE0100 <= point <= 0xE01EF or 0xE0000 <= point <= 0xE007F)


def _strip_invisible(text: str) -> str:
    if text.isascii():  # the common case: no character to look at
        return text
    return "".join(char for char in text if not _invisible(char))


class _UsedReferences(dict[str, Any]):
    """markdown-it's table of reference definitions, noting which labels a link looks up
    (its link and image rules call `get`)."""

    def __init__(self) -> None:
        super().__init__()
        self.used: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        return super().get(key, default)


def _recording_backticks(state: StateInline, silent: bool) -> bool:
    """markdown-it's code span rule, noting where in the inline source each span is."""
    start, before = state.pos, len(state.tokens)
    matched = backtick(state, silent)
    if matched and not silent and len(state.tokens) > before \
            and state.tokens[-1].type == "code_inline":
        spans = state.env.get(_SPANS_KEY)
        if isinstance(spans, list):
            spans.append((start, state.pos))
    return matched


def _inline_noting_spans(state: StateCore) -> None:
    """markdown-it's core inline rule, keeping each inline token's code spans (offsets
    in its content) in its `meta`."""
    for token in state.tokens:
        if token.type == "inline":
            spans: list[tuple[int, int]] = []
            token.meta["code_spans"] = spans
            token.children = token.children or []
            state.md.inline.parse(token.content, state.md, {**state.env, _SPANS_KEY: spans},
                                  token.children)


def _parser(*, links: bool = True) -> MarkdownIt:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    md.inline.ruler.at("backticks", _recording_backticks)
    md.core.ruler.at("inline", _inline_noting_spans)
    return md if links else md.disable(["link", "image"])


_MARKDOWN: Final = _parser()
# markdown-it's link rule rescans for a label's end at every `[`: seconds for a comment of
# 64 KiB of brackets, which anyone may post on a PR. Past _BRACKETS of them the text is
# parsed without links (code is found the same: code spans bind tighter than brackets),
# so no definition counts as used and all of them go: too much hidden, never too little.
_MARKDOWN_FLAT: Final = _parser(links=False)
_BRACKETS: Final = 1000


def _line_starts(text: str) -> list[int]:
    starts = [0]
    at = text.find("\n")
    while at != -1:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


class _Layout:
    """Where code is and which lines render nothing, in one markdown parse of `text`."""

    def __init__(self, text: str, *, parse: bool = True) -> None:
        # markdown-it normalizes CR LF and NUL first; the same-length substitutes keep
        # every offset of the parse an offset of `text`
        self.source = text.replace("\r", " ").replace("\x00", "\ufffd")
        self.lines = self.source.split("\n")
        self.starts = _line_starts(self.source)
        self.references = _UsedReferences()
        # without code or definitions to find, every line is as good as rendered
        markdown = _MARKDOWN if self.source.count("[") <= _BRACKETS else _MARKDOWN_FLAT
        tokens = markdown.parse(self.source, {"references": self.references}) if parse \
            else []
        self.code: list[tuple[int, int]] = []
        self._code_starts: list[int] = []
        self._cursor: dict[int, int] = {}  # line -> where its next inline content is sought
        rendered = [False] * len(self.lines)
        for token in tokens:
            if token.map is None or (token.type not in _RENDERED and token.type != "inline"):
                continue
            first, last = token.map
            if token.type in _RENDERED:
                rendered[first:last] = [True] * (last - first)
            if token.type in _CODE_BLOCKS:
                self.code.append((self.starts[first], self._end_of_line(last - 1)))
            elif token.type == "inline":
                self.code.extend(self._code_spans(token))
        self.silent_lines = [index for index, line in enumerate(self.lines)
                             if parse and not rendered[index] and line.strip()]

    def _end_of_line(self, index: int) -> int:
        index = min(index, len(self.lines) - 1)
        return self.starts[index] + len(self.lines[index])

    def _code_spans(self, token: Token) -> Iterable[tuple[int, int]]:
        """The code spans of an inline token, as offsets of the source: each line of the
        token's content is found in its source line (it is that line less container
        markers, indentation or a heading's `#`s)."""
        spans: list[tuple[int, int]] = token.meta.get("code_spans", [])
        if not spans or token.map is None:
            return []
        content_lines = token.content.split("\n")
        content_starts = _line_starts(token.content)
        origin: list[int] = []
        for number, piece in enumerate(content_lines):
            index = min(token.map[0] + number, len(self.lines) - 1)
            line = self.lines[index]
            if line.endswith(piece):
                column = len(line) - len(piece)
            elif line.rstrip().endswith(piece):
                column = len(line.rstrip()) - len(piece)
            else:  # a table cell: the next one on its line (cells come left to right)
                column = max(line.find(piece, self._cursor.get(index, 0)), 0)
            self._cursor[index] = column + len(piece)
            origin.append(self.starts[index] + column)

        def offset(at: int) -> int:
            number = bisect_right(content_starts, at) - 1
            return origin[number] + at - content_starts[number]

        found: list[tuple[int, int]] = []
        for start, end in spans:
            first, last = offset(start), offset(end - 1) + 1
            pieces = token.content[start:end].split("\n")
            # kept as code only where the source really holds the span (a line whose tabs
            # markdown-it expanded is not found): text wrongly taken for code could hide
            if self.source.startswith(pieces[0], first) and \
                    self.source.endswith(pieces[-1], 0, last):
                found.append((first, last))
        return found

    def in_code(self, at: int) -> bool:
        if not self._code_starts and self.code:
            self.code.sort()
            self._code_starts = [start for start, _ in self.code]
        index = bisect_right(self._code_starts, at) - 1
        # code spans and blocks never overlap: only the last one starting before counts
        return index >= 0 and at < self.code[index][1]


def _comment_spans(text: str, layout: _Layout) -> list[tuple[int, int]]:
    """HTML comments outside code, as a browser's tokenizer finds them: `<!--` to the next
    `-->` (`<!-->` and `<!--->` close at once), and the "bogus comments" a browser hides
    just as well: `<?…>` (`<?php … ?>`), `<!…>` (a doctype, CDATA) and `</` followed by
    neither a letter nor the end (`</ details>` is no end tag), each to the next `>`.
    Unterminated, any of them runs to the end."""
    spans: list[tuple[int, int]] = []
    at = text.find("<")
    while at != -1:
        after = text[at + 1:at + 3]
        end = -1
        if layout.in_code(at) or not after:
            pass
        elif after == "!-" and text.startswith("<!--", at):
            if text.startswith(">", at + 4) or text.startswith("->", at + 4):
                end = text.find(">", at + 4) + 1
            else:
                close = text.find("-->", at + 4)
                end = len(text) if close == -1 else close + 3
        elif after[0] in "!?" or (after[0] == "/" and len(after) == 2
                                   and not (after[1].isascii() and after[1].isalpha())):
            close = text.find(">", at + 2)
            end = len(text) if close == -1 else close + 1
            if text.find("<!--", at + 1, end) != -1:
                # `<!-<!-- x -->`: the comment inside goes first (as GitHub's markdown
                # reads it), and the next pass sees what it leaves
                end = -1
        if end == -1:
            at = text.find("<", at + 1)
        else:
            spans.append((at, end))
            at = text.find("<", end)
    return spans


class _DetailsFinder(HTMLParser):
    """The spans of closed `<details>` elements, outermost only, in a text whose code and
    comments were blanked out (same length, so its offsets are the text's)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self._starts = _line_starts(text)
        self._text = text
        self._stack: list[bool] = []  # per open <details>: is it closed (hiding)?
        self._hidden_from: int | None = None
        self._hidden_depth = 0
        self.spans: list[tuple[int, int]] = []

    def _offset(self) -> int:
        line, column = self.getpos()
        return self._starts[line - 1] + column

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "details":
            return
        # a boolean attribute: present is open, whatever its value
        closed = not any(name == "open" for name, _ in attrs)
        self._stack.append(closed)
        if closed and self._hidden_from is None:
            self._hidden_from = self._offset()
            self._hidden_depth = len(self._stack)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)  # `<details/>` opens an element in HTML

    def handle_endtag(self, tag: str) -> None:
        if tag != "details" or not self._stack:
            return  # a stray `</details>` closes nothing
        if self._hidden_from is not None and len(self._stack) == self._hidden_depth:
            at = self._offset()
            close = self._text.find(">", at)
            self.spans.append((self._hidden_from, len(self._text) if close == -1
                               else close + 1))
            self._hidden_from = None
        self._stack.pop()

    def finish(self) -> list[tuple[int, int]]:
        self.feed(self._text)
        self.close()
        if self._hidden_from is not None:  # never closed: hidden to the end
            self.spans.append((self._hidden_from, len(self._text)))
        return self.spans


def _details_spans(blanked: str) -> list[tuple[int, int]]:
    return _DetailsFinder(blanked).finish()


def _blanked(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with each span's characters but newlines replaced by spaces."""
    chars = list(text)
    for start, end in spans:
        for at in range(start, end):
            if chars[at] != "\n":
                chars[at] = " "
    return "".join(chars)


def _labels(text: str) -> dict[str, Any]:
    """The link reference definitions in `text`, parsed alone."""
    found = _UsedReferences()
    _MARKDOWN_FLAT.parse(text, {"references": found})  # definitions are blocks: no links
    return found


def _reference_lines(layout: _Layout) -> list[tuple[int, int]]:
    """The lines of unused link reference definitions (`[//]: # (…)`) and the lines that
    continue them (a title on the next line). Lines that render nothing come in runs; a
    run defining no used label goes whole (one parse), else line by line."""
    spans: list[tuple[int, int]] = []
    used = layout.references.used
    for run in _runs(layout.silent_lines):
        text = "\n".join(layout.lines[index] for index in run)
        labels = _labels(text)
        if not labels:
            continue  # container markers only (an empty list item, a bare `>`)
        if not used.intersection(labels):
            removed = list(run)
        else:
            removed, removing = [], False
            for index in run:
                alone = _labels(layout.lines[index])
                if alone:  # a definition starts here; else it continues the last one
                    removing = not used.intersection(alone)
                if removing:
                    removed.append(index)
        for index in removed:
            end = layout.starts[index] + len(layout.lines[index])
            spans.append((layout.starts[index], min(end + 1, len(layout.source))))
    return spans


def _runs(indexes: list[int]) -> list[list[int]]:
    """`indexes` (ascending) cut into runs of consecutive numbers."""
    runs: list[list[int]] = []
    for index in indexes:
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    pieces: list[str] = []
    done = 0
    for start, end in sorted(spans):
        if start > done:
            pieces.append(text[done:start])
        done = max(done, end)
    pieces.append(text[done:])
    return "".join(pieces)


def _may_hold_code(text: str) -> bool:
    """False when `text` cannot hold a code span or block: no backtick, no `~~~` fence,
    no indentation deep enough for an indented block. Saves the markdown parse."""
    return "`" in text or "~~~" in text or "    " in text or "\t" in text


def _strip_once(text: str) -> str:
    if "<" not in text and "]:" not in text:
        return text  # nothing that could hide: no tag, comment or definition
    layout = _Layout(text, parse="]:" in text or _may_hold_code(text))
    comments = _comment_spans(text, layout)
    spans = comments + _reference_lines(layout)
    if "<" in text:
        spans += _details_spans(_blanked(text, layout.code + comments))
    return _cut(text, spans) if spans else text


def strip_hidden(text: str) -> str:
    """`text` as a reader sees it on the page, with the hidden parts removed."""
    text = _strip_invisible(text)
    for _ in range(_PASSES):
        stripped = _strip_once(text)
        if stripped == text:
            return text
        text = stripped
    cut = text.find("<")
    return text if cut == -1 else text[:cut]


# GitHub links `@name` or `@org/team` at the start or after a character that is not an
# ASCII word character, when a letter or digit follows the @
_MENTION: Final = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")


# a URL GitHub links (GFM's autolinks, or a markdown link's destination) that reaches the @:
# at the start of its word or after `(`, `<` or emphasis, a scheme or `www.`, a domain with
# a dot, then a path
_URL_REACH: Final = 2048
_URL_BEFORE: Final = re.compile(
    r"(?:^|[(<*_~])(?:https?://|www\.)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+/[^\s<]*$")


def _in_url(text: str, at: int) -> bool:
    """Whether the @ at `at` is inside a link's URL (GitHub mentions nobody there, and an
    inserted character would break the URL). Only a URL GitHub would link counts:
    `https://@team` or `xhttps://a.b/@team` are plain text, where the mention pages."""
    # looked for at most _URL_REACH back (a word of @s must not cost its length squared);
    # a longer one is quieted, the safe side
    reach = max(0, at - _URL_REACH)
    start = max(text.rfind(" ", reach, at), text.rfind("\n", reach, at),
                text.rfind("\t", reach, at)) + 1
    if start == 0 and reach > 0:
        return False
    return _URL_BEFORE.search(text[start:at]) is not None


def quiet_mentions(text: str) -> str:
    """`text` notifying nobody: a zero-width space (`&#8203;`, as Dependabot and Renovate
    write it) after each mention's `@` outside code, so an agent's reply cannot page a
    person or a team a stranger named; code spans and blocks are left as written (no
    mention is linked there)."""
    if "@" not in text:
        return text
    layout = _Layout(text, parse=_may_hold_code(text))
    out: list[str] = []
    last = 0
    for found in _MENTION.finditer(text):
        at = found.start()
        if layout.in_code(at) or _in_url(text, at):
            continue
        out.append(text[last:at + 1])
        out.append("&#8203;")
        last = at + 1
    out.append(text[last:])
    return "".join(out)
