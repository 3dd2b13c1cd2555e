"""Masking secrets before anything is written down or sent (SPEC §14).

One `Redactor` is built per run from the environment (`Redactor.from_environment`) and
every place a run writes or sends text goes through it: the context (so the checkpoint),
prompts sent to the agent and the replies received, stage files, events, the run's copy
of the workflow, `--json`/`inspect` output and logs. It replaces two kinds of text with
`***`:

* exact secret values: the values of `GITHUB_TOKEN`, `OPENAI_API_KEY`, the Action's
  token input and every environment variable whose name ends in `TOKEN`, `KEY`,
  `SECRET` or `PASSWORD`, plus any extra values the caller names. As GitHub's runner
  does (`Worker.InitializeSecretMasker` in actions/runner), a value is masked trimmed
  of surrounding whitespace, and line by line: each line of a multi-line value
  (split at CR and LF, each trimmed, empty ones dropped) is a secret of its own, since a
  program prints a PEM key or a JSON credential one line at a time, and a shell's `echo`
  or a YAML parser drops the padding. Where the runner masks any non-empty value, here
  each of these values (the trimmed value or a line) shorter than 6 characters is ignored
  (`MIN_SECRET_LENGTH`): masking `abc` or a line of a key that is only `}` everywhere
  would garble ordinary text while hiding at most five characters of the secret. (The
  runner's ancestor, the Azure Pipelines agent, lets a minimum be set and caps it at 6,
  `LoggedSecretMasker.MinSecretLengthLimit`: this is that cap.)
* text shaped like a credential whatever its source: GitHub tokens (`ghp_`, `gho_`,
  `ghu_`, `ghs_`, `ghr_` + 36 alphanumerics, `github_pat_...`), OpenAI and Anthropic
  style keys (`sk-...`), Slack tokens (`xoxb-...`), AWS access key ids (`AKIA...`,
  `ASIA...`), the token after `Bearer`, the value of an `Authorization:` header and the
  password in a URL (`https://user:password@host`).

Speed: redaction runs on every reply, script output and context value, so it must cost
little (SPEC §14: milliseconds per megabyte). Nothing runs a regex over a text that lacks
the literal a pattern starts with: known values are found with one `str.find` per group
of values sharing their first characters; each credential shape and label with a
`str.find` of its literal prefix (a small regex where a shape has several). Each pattern
is then tried only where its prefix occurs, and all masked regions are cut out in one
copy. Where a prefix is frequent, the regex engine masks the whole text instead (`sub`
with a literal, `split` for the patterns that keep a label), never with a Python call per
match. A text the redactor returned lately comes back unscanned, and a long text quoting
such texts on lines of their own (a stage's transcript quoting its reply) is scanned only
around them (`Redactor._holds_only_masked`). `benchmarks/redaction.py` measures it.

The label in front of a masked value is kept (`Bearer ***`, `Authorization: ***`) so
the text still says what was there.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from fnmatch import translate
from itertools import islice
from typing import Any, Final, TextIO

MASK: Final = "***"
MIN_SECRET_LENGTH: Final = 6

# Environment variables whose values are secrets, matched against the upper-cased name.
SECRET_VARIABLES: Final = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "OPENAI_API_KEY",
    "INPUT_GITHUB-TOKEN",
    "INPUT_GITHUB_TOKEN",
    "DELIVERY_*TOKEN*",
    "*TOKEN",
    "*KEY",
    "*SECRET",
    "*PASSWORD",
)

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

# What cannot be stored as text safely: NUL and lone surrogates (a str holds surrogates
# only unpaired). Replies are cleaned of them on receipt.
_UNSAFE_CHARS: Final = re.compile("[\x00\ud800-\udfff]")


# A literal in every match of each pattern above (`gh` for `gh[pousr]_`, `KIA`/`SIA` for
# `A[KS]IA`, the hints of the labelled ones): a text that holds none of them (most of what
# a stage writes: status files, event lines, prompts) is answered by these `in` tests,
# each a C scan far quicker than the regex engine's.
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


# Below this length text() answers with a few scans in C and remembers nothing.
_TINY: Final = 256

# Texts text() remembers having returned (a stage's prompt, reply, transcript and a few
# small values): bounded, so at most this many replies are kept alive by it.
_MEMO: Final = 16

# A text at least this long may hold texts this redactor returned (a stage's transcript
# quoting its reply): those are not scanned again (Redactor._holds_only_masked), only
# the text around them with _EDGE characters of each.
_EMBEDDED: Final = 64 * 1024
_EDGE: Final = 512
# what a header's label may run through between its name and its value
_RUN_ONLY: Final = re.compile(r"[\s:=\"']*")
# the characters of a text compared first when looking for it in another
_PROBE: Final = 64
_PROBES: Final = 8
# how many of the texts returned lately are looked for in a long one
_QUOTED: Final = 4

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


def _find_whole(value: str, text: str) -> int:
    """Where `text` (long) first occurs in `value`, -1 if nowhere or not found soon: its
    first characters looked for, the rest compared where they are, at a few places only
    (a repetitive text would make this quadratic; a full scan is the answer then)."""
    probe = text[:_PROBE]
    at = value.find(probe)
    for _ in range(_PROBES):
        if at == -1 or value.startswith(text, at):
            return at
        at = value.find(probe, at + 1)
    return -1


def _common_prefix(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    size = 0
    while size < len(first) and first[size] == last[size]:
        size += 1
    return first[:size]


def clean_text(text: str) -> str:
    """`text` with NUL and lone surrogates replaced by U+FFFD: no file, command line or
    environment variable can hold them."""
    if text.isascii():  # a flag: no surrogate, and `in` is a memchr
        return text if "\x00" not in text else text.replace("\x00", "\ufffd")
    # in a text of two or four bytes a character, `in` looks for NUL one character at a
    # time (CPython's memchr shortcut skips a character whose low byte is zero): the
    # regex engine's scan for it takes half as long. Then UTF-16 (see _no_surrogates).
    if _NUL.search(text) is None and _no_surrogates(text):
        return text
    return _UNSAFE_CHARS.sub("\ufffd", text)


_NUL: Final = re.compile("\x00")


def _no_surrogates(text: str) -> bool:
    """Whether `text` holds no lone surrogate: UTF-16 cannot encode one either, and
    encodes a text of non-Latin characters (two bytes each in memory) at about twice the
    speed of UTF-8."""
    try:
        text.encode("utf-16-le")
    except UnicodeEncodeError:
        return False
    return True


# SECRET_VARIABLES as one pattern (fnmatch's own translation of each): a run reads its
# environment's names once or twice, and ten fnmatchcase calls per name were a
# millisecond of every run's start (50 route scenarios run 50 runs)
_SECRET_NAME: Final = re.compile("|".join(f"(?:{translate(pattern)})"
                                          for pattern in SECRET_VARIABLES))


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The values of the secret-holding variables of `environ` (SECRET_VARIABLES)."""
    match = _SECRET_NAME.match
    return [value for name, value in environ.items() if match(name.upper())]


_LINE_BREAKS: Final = re.compile("[\r\n]")


def secret_variants(secret: str) -> set[str]:
    """The texts masked for one secret value, as GitHub's runner masks them: the value
    trimmed of surrounding whitespace (its padding is no secret, and a whitespace-only
    value masks nothing) and each of its lines, trimmed (empty lines dropped); those
    shorter than MIN_SECRET_LENGTH are left out."""
    variants = {secret.strip()}
    if "\n" in secret or "\r" in secret:
        variants.update(line.strip() for line in _LINE_BREAKS.split(secret))
    return {variant for variant in variants if len(variant) >= MIN_SECRET_LENGTH}


class Redactor:
    """Masks known secret values and token-shaped text in strings and nested data."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = {variant for s in secrets if isinstance(s, str) for variant in secret_variants(s)}
        # Longest first, so a secret that contains another is masked whole.
        self._secrets: tuple[str, ...] = tuple(sorted(kept, key=lambda s: (-len(s), s)))
        # Secrets grouped by their first characters, each group searched with one
        # `str.find` of its members' common prefix (a lone secret: itself).
        groups: dict[str, list[str]] = {}
        for secret in self._secrets:
            groups.setdefault(secret[:MIN_SECRET_LENGTH], []).append(secret)
        self._groups = tuple((_common_prefix(members), tuple(members))
                             for members in groups.values())
        # all of them, longest first (a secret that contains another is masked whole)
        self._alternation = re.compile("|".join(map(re.escape, self._secrets)))
        # each secret as it appears inside a JSON string (ASCII, escaped)
        self._in_json = tuple(json.dumps(s)[1:-1] for s in self._secrets)
        # the texts text() returned lately, by id (see text()), each with whether it is
        # known to be clean (clean_text would return it as it is) and whether it was
        # masked in one cut (see _holds_only_masked)
        self._done: dict[int, tuple[str, bool, bool]] = {}
        # a secret holding `*` could be completed by a MASK next to its other part, and
        # one longer than the windows could cross an edge unseen: no texts taken as
        # masked within others then
        self._embeddable = all("*" not in secret and len(secret) < _EDGE // 2
                               for secret in self._secrets)
        self._done_lock = threading.Lock()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], extra: Iterable[str] = ()) -> Redactor:
        """A redactor for the values of the secret-holding variables in `environ`, and for
        the `extra` values (an Action's token input, a configured key...)."""
        return cls([*secret_values(environ), *extra])

    def with_secrets(self, extra: Iterable[str]) -> Redactor:
        """A redactor for these secrets and `extra` ones."""
        return Redactor([*self._secrets, *extra])

    def text(self, value: str) -> str:
        """`value` with every known secret and token-shaped substring replaced by `***`.

        A text this redactor returned lately is returned as it is, unscanned: the same
        reply passes the agent wrapper, the stage file and the context on its way, and
        masking is idempotent (`***` starts no pattern and continues no secret), so only
        the first pass can change it. Identity, not equality, marks it: strings are
        immutable, and the memo holds each one it names, so an id cannot be reused."""
        if not value or (len(value) < _TINY and self._unchanged(value)):
            return value
        known = self._done.get(id(value))
        if known is not None and known[0] is value:
            return value
        return self._masked(value, clean=False)

    def _unchanged(self, value: str) -> bool:
        """Whether masking `value` (short) changes nothing, told by scans in C alone: every
        secret is looked for with one search of their alternation, and every match of a
        shape or label holds one of _HINT_LITERALS. Most of what a stage sets and writes is
        short (an outcome, a node id, a status line): the group-by-group search, the
        memo's lock and its bookkeeping cost more than the scans."""
        if self._secrets and self._alternation.search(value) is not None:
            return False
        return not _may_hold_token(value)

    def _masked(self, value: str, *, clean: bool) -> str:
        """text() of a `value` it has not returned lately; `clean`: the value is known to
        be clean, and so is what it returns (masking only cuts text out and puts `***` in)."""
        whole = True  # masked in one cut (see _holds_only_masked)
        if len(value) < _EMBEDDED or not self._embeddable or not self._holds_only_masked(value):
            if self._groups:
                value, whole = self._mask_secrets(value)
            value, shapes_whole = _mask_shapes(value)
            whole = whole and shapes_whole
        # (else a stage file quoting prompts and replies: it needs no masking)
        with self._done_lock:
            done = self._done
            done[id(value)] = (value, clean, whole)
            if len(done) > _MEMO:
                del done[next(iter(done))]  # the oldest
        return value

    def _holds_only_masked(self, value: str) -> bool:
        """Whether masking `value` would change nothing, told without scanning all of it:
        true when the long texts in it are prompts or replies this redactor cleaned and
        masked lately, in one cut (in which no pattern matches but at a `***` it put
        there), each on lines of its own, and the text around each of them, _EDGE
        characters of theirs included, needs no masking.

        Only across those lines' ends could a match reach out of a masked text: no shape,
        password, token or header value runs over a line break, a secret is shorter than
        _EDGE / 2, and what a header's label runs through (white space, `:`, `=`, quotes)
        may span lines but not _EDGE / 2 characters of a text's edge without another
        character (tested below), so every match that could change the whole lies in the
        windows masked here, the part of it that is masked there is no `***`, and the
        masking of that window changes it."""
        embedded: list[tuple[int, int, str]] = []
        # the latest few long prompts and replies (each looked for costs a scan)
        with self._done_lock:
            known = [text for text, clean, whole in reversed(self._done.values())
                     if clean and whole and _EMBEDDED // 2 <= len(text) <= len(value)]
        left = len(value)
        for text in known[:_QUOTED]:
            if left < len(text):
                break  # no room for another
            at = _find_whole(value, text)
            if at != -1:
                embedded.append((at, at + len(text), text))
                left -= len(text)
        if not embedded:
            return False
        embedded.sort(key=lambda found: (found[0], -found[1]))
        windows: list[str] = []
        done, before = 0, ""
        for start, end, text in embedded:
            if start < done:
                continue  # within one taken already (or past its end: then scanned)
            if start and (value[start - 1] != "\n" or _RUN_ONLY.fullmatch(text, 0, _EDGE // 2)):
                return False
            if end < len(value) and (value[end] != "\n" or _RUN_ONLY.fullmatch(
                    text, len(text) - _EDGE // 2)):
                return False
            windows.append(before + value[done:start] + text[:_EDGE])
            done, before = end, text[-_EDGE:]
        windows.append(before + value[done:])
        for window in windows:
            if self._groups and self._mask_secrets(window)[0] != window:
                return False
            if mask_token_shapes(window) != window:
                return False
        return True

    redact = text

    def _mask_secrets(self, value: str) -> tuple[str, bool]:
        """(`value` with every occurrence of a known secret replaced by `***` (overlapping
        occurrences: their union), whether that was done in one cut)."""
        found: list[tuple[list[int], tuple[str, ...]]] = []
        for prefix, members in self._groups:
            hits = _few_occurrences(value, prefix)
            if hits is None:  # frequent: one regex pass over the text does better
                return self._alternation.sub(MASK, value), False
            if hits:
                found.append((hits, members))
        # (all groups counted before any is compared: on a text dense with one group,
        # the comparisons at the _FEW places of the groups before it were wasted)
        spans: list[tuple[int, int]] = []
        for hits, members in found:
            for at in hits:
                for secret in members:  # longest first
                    if value.startswith(secret, at):
                        spans.append((at, at + len(secret)))
                        break
        return (_cut(value, spans) if spans else value), True

    def clean_text(self, value: str) -> str:
        """text() of clean_text(value). A reply is cleaned and masked on receipt and then
        stored in the context, which asks for this again: the text this redactor returned
        from a clean one is returned as it is, without the cleaning's scan of it either."""
        if not value or (len(value) < _TINY and clean_text(value) is value
                         and self._unchanged(value)):
            return value
        known = self._done.get(id(value))
        if known is not None and known[0] is value:
            if known[1]:
                return value
            cleaned = clean_text(value)
            if cleaned is value:  # masked already: only known to be clean now
                with self._done_lock:
                    self._done[id(value)] = (value, True, known[2])
                return value
            return self._masked(cleaned, clean=True)
        return self._masked(clean_text(value), clean=True)

    def may_change_json(self, text: str) -> bool:
        """False when redacting the data that `text` (ASCII JSON) encodes would change
        nothing: every key and string of it appears in `text`, escaped as JSON escapes."""
        if any(secret in text for secret in self._in_json):
            return True
        return mask_token_shapes(text) != text

    def value(self, value: Any, *, clean: bool = False) -> Any:
        """`value` with every string in it redacted, through dicts, lists and tuples;
        with `clean`, also rid of NUL and lone surrogates (`clean_text`).

        Dict keys are redacted too; other values are returned unchanged.
        """
        if isinstance(value, str):
            return self.clean_text(value) if clean else self.text(value)
        if isinstance(value, Mapping):
            return {
                (self.value(k, clean=clean) if isinstance(k, str) else k):
                    self.value(v, clean=clean) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.value(v, clean=clean) for v in value]
        if isinstance(value, tuple):
            return tuple(self.value(v, clean=clean) for v in value)
        return value

    def __repr__(self) -> str:  # never show the secrets themselves
        return f"Redactor({len(self._secrets)} secret(s))"


class RedactingStream:
    """A text stream that redacts whatever is written to it, then passes it on.

    The CLI wraps its stdout and stderr in it: `--json`, `inspect` and error messages
    never print a secret, whatever code path produced the text.
    """

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        self._stream = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.text(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message (installed on `delivery`'s
    logger, so that logs never carry a secret)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.redactor.text(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True
