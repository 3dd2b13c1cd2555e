"""Credential shapes masked in text, whatever its source (SPEC §14): the token-shaped half
of `delivery.redact` (the other half, known secret values, and the Redactor that applies
both, are there).

Nothing runs a regex over a text that lacks the literal a pattern starts with: each
credential shape and label is found with a `str.find` of its literal prefix (a small regex
where a shape has several), each pattern tried only where its prefix occurs, and all masked
regions cut out in one copy. Where a prefix is frequent, the regex engine masks the whole
text instead (`sub` with a literal, `split` for the patterns that keep a label), never with
a Python call per match. The label in front of a masked value is kept (`Bearer ***`,
`Authorization: ***`). `benchmarks/redaction.py` measures it; what it masks over a fixed
corpus is in tests/golden/redaction.
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Final

MASK: Final = "***"

_TOKEN_CHARS = r"[A-Za-z0-9._~+/-]"
_W = "[A-Za-z0-9_]"
# the characters before a literal prefix that a pattern's lookbehind looks at
_LOOKBEHIND: Final = 2

# Credential shapes, each replaced whole by MASK: (prefix, pattern). A literal prefix is
# looked for with `str.find`, several with a small regex (one scan); each pattern
# starts with its literal (the regex engine's own prefix scan) and checks the character
# before it with a lookbehind placed *after* the literal, so that a literal replacement
# (`sub(MASK)`, no Python call per match) masks them.
_SHAPES: Final[tuple[tuple[str | re.Pattern[str], re.Pattern[str]], ...]] = (
    (re.compile("gh[pousr]_"),
     re.compile(rf"gh[pousr]_(?<!{_W}gh[pousr]_)[A-Za-z0-9]{{36,}}")),
    ("github_pat_", re.compile(rf"github_pat_(?<!{_W}github_pat_)[A-Za-z0-9_]{{20,}}")),
    ("sk-", re.compile(r"sk-(?<![A-Za-z0-9_-]sk-)[A-Za-z0-9_-]{20,}")),
    ("xox", re.compile(rf"xox[a-z]-(?<!{_W}xox[a-z]-)[A-Za-z0-9-]{{10,}}")),
    (re.compile("A[KS]IA"), re.compile(rf"A[KS]IA(?<!{_W}A[KS]IA)[0-9A-Z]{{16}}(?![A-Za-z0-9])")),
)

# The two GitHub shapes (the first two above) as one pattern and one scan of their shared
# first letter: no match of one can overlap, touch or change a match of the other, so one
# pass masks what the two did in turn. (Inside either run every character is a word
# character, where neither may start; each run is greedy over word characters, so neither
# can start where the other ends.) Its prefix's two kinds of occurrences are counted apart:
# which path a text takes depends on each one's count (see _github_hits).
_GITHUB_PREFIX: Final = re.compile("g(?:h[pousr]|ithub_pat)_")
_GITHUB: Final = re.compile(
    rf"g(?:h[pousr]_(?<!{_W}gh[pousr]_)[A-Za-z0-9]{{36,}}"
    rf"|ithub_pat_(?<!{_W}github_pat_)[A-Za-z0-9_]{{20,}})")
# every shape but those two, and the kept ones, in the order _mask_dense masks them
_OTHER_SHAPES: Final = _SHAPES[2:]

# Patterns whose group 1 (a label) is kept and the rest replaced by MASK, with the literal
# hints without which they cannot match. `https://user:password@host` keeps the scheme and
# user; it needs an `@`. Labels are looked for in lower case, UPPER CASE and Capitalized
# (a case-insensitive scan of every text cost more than all the rest of redaction); each
# casing is its own pattern starting with its literal.
# (the digit looked for past the token's other characters without giving any back: the
# same test as `(?={_TOKEN_CHARS}*\d)`, without backtracking over the whole token)
_BEARER_TOKEN = rf"(?:(?=[A-Za-z._~+/-]*+\d){_TOKEN_CHARS}{{8,}}|{_TOKEN_CHARS}{{24,}})=*"


def _labelled(first: str, hints: tuple[str, ...], tail: str,
              rest: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """A pattern per hint: the hint, preceded by `first` (one letter, kept as text before
    the match) at the start of a word, then `tail` (any case) and `rest`; group 1 ends
    with the label, the rest of the match is what is masked (one group: `split`, which
    returns every group, then yields only the labels, see _keep_label)."""
    return tuple(
        (hint, re.compile(rf"({hint}(?<={first}{hint})(?<!\w\w{hint})(?i:{tail}){rest}"))
        for hint in hints)


_KEPT: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    # (whitespace: the ASCII one, which the regex engine tests faster than `\s`; possessive:
    # a URL without a password fails at once)
    ("://", re.compile(r"(://[^/ \t\n\r\f\v:@]++:)[^/ \t\n\r\f\v@]++(?=@)")),
    # `Authorization: token abc`, `"Authorization": "Bearer abc"`, `authorization=abc`:
    # everything up to the end of the line or a closing quote.
    *_labelled("[Aa]", ("uthoriz", "UTHORIZ"), "ation",
               r"[\"']?\s*[:=]\s*[\"']?)[^\s\"'][^\r\n\"']*"),
    # `Bearer <token>`: the token has a digit (and 8+ characters) or is 24+ characters long.
    *_labelled("[Bb]", ("earer", "EARER"), "", rf"\s+){_BEARER_TOKEN}"),
)



# A literal in every match of each pattern above (`gh` for `gh[pousr]_`, `github_pat_`,
# `KIA`/`SIA` for `A[KS]IA`, the hints of the labelled ones): a text that holds none of
# them (most of what a stage writes: status files, event lines, prompts) is answered by
# these `in` tests, each a C scan far quicker than the regex engine's. (`github` holds no
# `gh`: its prefix needs a scan of its own.)
_HINT_LITERALS: Final = ("gh", "github_pat_", "sk-", "xox", "KIA", "SIA",
                         *(hint for hint, _ in _KEPT))


# Up to this length the `in` tests come first; a longer text is scanned once per prefix
# anyway (`_few_occurrences`), and testing first would double those scans when one hits.
_SHORT: Final = 8192


def _may_hold_token(text: str) -> bool:
    # a loop, not any(...): the generator costs more than the tests on a short text
    for literal in _HINT_LITERALS:  # noqa: SIM110
        if literal in text:
            return True
    return False


def has_token_shape(text: str) -> bool:
    """Whether `text` holds a credential shape (`ghp_…`, `github_pat_…`, `sk-…`, `xox?-…`,
    `AKIA…`), the labels (`Bearer`, `Authorization:`, a URL's password) not counted: what a
    change may not carry (SPEC §14 "No secret in a change"), where code that reads an
    `Authorization` header is no secret."""
    return any(pattern.search(text) for _, pattern in _SHAPES)


def mask_shapes_only(text: str) -> str:
    """`text` with the credential shapes of has_token_shape replaced by `***`, labels and
    what follows them left as they are."""
    for _, pattern in _SHAPES:
        text = pattern.sub(MASK, text)
    return text


def mask_token_shapes(text: str) -> str:
    """`text` with every token-shaped substring replaced by `***` (no known values).

    Each pattern is tried only where its prefix occurs and the masked regions of all of
    them are cut out in one copy. A text where some prefix is frequent is left to the
    regex engine instead (`_mask_dense`): a Python step per occurrence would cost more."""
    return _mask_shapes(text)[0]


def _mask_shapes(text: str) -> tuple[str, bool]:
    """(mask_token_shapes(text), whether all of it was masked in one cut: the result is
    then one in which no pattern matches anything but a `***` it put there)."""
    if len(text) <= _SHORT and not _may_hold_token(text):
        return text, True  # every match holds one of the literals
    # every prefix counted before any pattern is tried: where a later one is frequent,
    # the matches of the earlier ones would be wasted
    found: list[tuple[list[int], re.Pattern[str], int]] = []
    hits = _github_hits(text)
    if hits is None:
        return _mask_dense(text), False
    if hits:
        found.append((hits, _GITHUB, 0))
    for prefix, pattern in _OTHER_SHAPES:
        hits = _few_occurrences(text, prefix)
        if hits is None:
            return _mask_dense(text), False
        if hits:
            found.append((hits, pattern, 0))
    for hint, pattern in _KEPT:
        if hint == "://" and "@" not in text:
            continue  # a URL's password is followed by `@`
        hits = _few_occurrences(text, hint)
        if hits is None:
            return _mask_dense(text), False
        if hits:
            found.append((hits, pattern, 1))
    masked: list[tuple[int, int]] = []
    for hits, pattern, kept in found:
        _matches(text, hits, pattern, kept, masked)
    return (_cut(text, masked) if masked else text), True


# Above this many occurrences of a prefix, one regex pass beats a match tried at each.
_FEW: Final = 256


def _few_occurrences(text: str, prefix: str | re.Pattern[str]) -> list[int] | None:
    """Where `prefix` occurs in `text`; None when that is more than _FEW places.

    (A plain loop of `find`, not a generator: on a text dense with the prefix this runs
    _FEW times for each pattern before the regex pass, and a generator's step cost twice
    a `find` there.)"""
    need = _NEEDS.get(prefix)
    if need is not None and need not in text:
        return []  # a character of every occurrence is missing: one memchr, no scan
    if not isinstance(prefix, str):
        hits = [m.start() for m in islice(prefix.finditer(text), _FEW + 1)]
        return None if len(hits) > _FEW else hits
    hits = []
    find = text.find
    at = _first(text, prefix)
    while at != -1:
        if len(hits) == _FEW:
            return None
        hits.append(at)
        at = find(prefix, at + 1)
    return hits


def _github_hits(text: str) -> list[int] | None:
    """Where either GitHub prefix occurs (one scan); None when one of them occurs in more
    than _FEW places, the count at which each shape of its own took the dense path."""
    if "_" not in text:
        return []  # both prefixes end with it
    hits = [m.start() for m in islice(_GITHUB_PREFIX.finditer(text), 2 * _FEW + 1)]
    if len(hits) > 2 * _FEW:
        return None  # one of the two is past _FEW
    if len(hits) > _FEW:
        pats = sum(1 for at in hits if text[at + 1] == "i")
        if pats > _FEW or len(hits) - pats > _FEW:
            return None
    return hits


# For each prefix, a character it holds that ordinary text often lacks (capitals, `z`,
# `-`; prose has none of them): `in` finds one with memchr, at memory speed, where the
# scan for the prefix (`find`, or the regex engine's) costs 20 times more; a text without
# it holds no occurrence. (Tested first: when the character is there, it is usually
# found soon.)
_NEEDS: Final[dict[str | re.Pattern[str], str]] = {
    _SHAPES[2][0]: "-", _SHAPES[3][0]: "x", _SHAPES[4][0]: "I",
    "uthoriz": "z", "UTHORIZ": "Z", "EARER": "E",
}


# Literal prefixes whose first occurrence the regex engine finds sooner than `str.find`:
# its scan stops only at their first character, rare in text, where the skip table of
# `find` for "xox" also stops at every `/` and `8` (they share its bits), which code and
# URLs are full of: 0.26 ms a MB against 0.40-0.52. (Only the first: the occurrences
# after it are found with `find`, which finds overlapping ones too.)
_FIRST_BY_REGEX: Final = {"xox": re.compile("xox")}


def _first(text: str, prefix: str | re.Pattern[str]) -> int:
    if isinstance(prefix, str):
        searcher = _FIRST_BY_REGEX.get(prefix)
        if searcher is None:
            return text.find(prefix)
        prefix = searcher
    m = prefix.search(text)
    return -1 if m is None else m.start()


def _matches(text: str, hits: list[int], pattern: re.Pattern[str], kept: int,
             masked: list[tuple[int, int]]) -> None:
    """Adds to `masked` the region of each match of `pattern` starting at one of `hits`
    (after its group `kept`, when it keeps a label)."""
    done = 0
    for at in hits:
        if at < done:
            continue
        m = pattern.match(text, at)  # its lookbehind sees the text before `at`
        if m is not None:
            masked.append((m.end(kept) if kept else at, m.end()))
            done = m.end()


def _cut(text: str, masked: list[tuple[int, int]]) -> str:
    """`text` with each of the `masked` regions (overlapping ones merged) replaced by MASK."""
    masked.sort()
    pieces: list[str] = []
    done = 0
    for start, end in masked:
        if start >= done:
            pieces += (text[done:start], MASK)
            done = end
        elif end > done:
            done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _mask_dense(text: str) -> str:
    """mask_token_shapes for a text dense with some prefix: each pattern in turn over the
    text the previous ones left. A pattern whose prefix is frequent is masked by the regex
    engine over all of it (`sub` with a literal, `split` for a label kept); one whose prefix
    is rare or absent, only where its prefix occurs (each regex pass over a megabyte costs
    about as much as a thousand of those matches). Either way a pattern's leftmost
    non-overlapping matches are what is masked, so the order and the result are those of
    running every pattern's `sub` in turn."""
    text = _mask_one(text, _GITHUB_PREFIX, _GITHUB, 0)  # the first two shapes at once
    for prefix, shape in _OTHER_SHAPES:
        text = _mask_one(text, prefix, shape, 0)
    for hint, pattern in _KEPT:
        if hint != "://" or "@" in text:
            text = _mask_one(text, hint, pattern, 1)
    return text


def _mask_one(text: str, prefix: str | re.Pattern[str], pattern: re.Pattern[str],
              kept: int) -> str:
    """`text` with each leftmost non-overlapping match of `pattern` (which starts with
    `prefix`) masked: whole, or after its group 1 when `kept`."""
    hits = _few_occurrences(text, prefix)
    if hits is None:
        return _from(_first(text, prefix), text, pattern, kept)
    if not hits:
        return text
    masked: list[tuple[int, int]] = []
    _matches(text, hits, pattern, kept, masked)
    return _cut(text, masked) if masked else text


def _from(first: int, text: str, pattern: re.Pattern[str], kept: int) -> str:
    """`pattern` masked (whole, or after its group 1 when `kept`) in `text` from just
    before `first` (the lookbehinds see the _LOOKBEHIND characters before it). Cutting the
    text costs two copies of it: only worth it when the part skipped is large."""
    def mask(part: str) -> str:
        return _keep_label(pattern, part) if kept else pattern.sub(MASK, part)

    start = first - _LOOKBEHIND
    if start < len(text) // 8:
        return mask(text)
    return text[:start] + mask(text[start:])


def _keep_label(pattern: re.Pattern[str], text: str) -> str:
    """What follows `pattern`'s group 1 (its label) in each match replaced by MASK all
    over `text`, without a Python step per match: `split` returns the text between
    matches interleaved with the labels, and slices put a MASK after each label."""
    parts = pattern.split(text)
    matches = len(parts) // 2
    if not matches:
        return text
    out = [MASK] * (len(parts) + matches)
    out[0::3] = parts[0::2]
    out[1::3] = parts[1::2]
    return "".join(out)
