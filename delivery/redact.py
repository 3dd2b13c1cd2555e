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
  password in a URL (`https://user:password@host`) — `delivery.token_shapes`.

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
from typing import Any, Final, TextIO

# the shapes' half (MASK and mask_token_shapes are this module's public names too)
from delivery.printable import TextFilter
from delivery.token_shapes import MASK as MASK
from delivery.token_shapes import (
    _cut,
    _few_occurrences,
    _mask_shapes,
    _may_hold_token,
    has_token_shape,
    mask_shapes_only,
)
from delivery.token_shapes import mask_token_shapes as mask_token_shapes

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

# What cannot be stored as text safely: NUL and lone surrogates (a str holds surrogates
# only unpaired). Replies are cleaned of them on receipt.
_UNSAFE_CHARS: Final = re.compile("[\x00\ud800-\udfff]")


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

    def learn(self, secret: str) -> None:
        """Mask `secret` from now on as well: a credential the run obtains as it goes (a
        GitHub App's installation token, minted and renewed), told before its first use."""
        fresh = Redactor([*self._secrets, secret])
        with self._done_lock:
            self._secrets, self._groups, self._alternation = (
                fresh._secrets, fresh._groups, fresh._alternation)
            self._in_json, self._embeddable = fresh._in_json, fresh._embeddable
            self._done = {}  # what was clean before may hold it

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

    def holds_listed_secret(self, value: str) -> bool:
        """Whether `value` holds a known secret value or a credential shape (SPEC §14's
        list), labels not counted: a file's text, where `Authorization` is code."""
        if self._secrets and self._alternation.search(value) is not None:
            return True
        return has_token_shape(value)

    def mask_listed(self, value: str) -> str:
        """`value` with known secret values and credential shapes replaced by `***`, and
        nothing else: a file's text keeps its `Bearer` and `Authorization` code."""
        if self._secrets:
            value = self._alternation.sub(MASK, value)
        return mask_shapes_only(value)

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
        if self._in_json and any(secret in text for secret in self._in_json):
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


class RedactingStream(TextFilter):
    """A text stream that redacts whatever is written to it, then passes it on.

    The CLI wraps its stdout and stderr in it: `--json`, `inspect` and error messages
    never print a secret, whatever code path produced the text.
    """

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        super().__init__(stream)
        self._redactor = redactor

    def transform(self, text: str) -> str:
        return self._redactor.text(text)


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
