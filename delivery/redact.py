"""Masking secrets before anything is written down or sent (SPEC §14).

One `Redactor` is built per run from the environment (`Redactor.from_environment`) and
every place a run writes or sends text goes through it: the context (so the checkpoint),
prompts sent to the agent and the replies received, stage files, events, the run's copy
of the workflow, `--json`/`inspect` output and logs. It replaces two kinds of text with
`***`:

* exact secret values: the values of `GITHUB_TOKEN`, `OPENAI_API_KEY`, the Action's
  token input and every environment variable whose name ends in `TOKEN`, `KEY`,
  `SECRET` or `PASSWORD`, plus any extra values the caller names. Values shorter than
  6 characters are ignored: masking `abc` everywhere would garble ordinary text
  without protecting anything;
* text shaped like a credential whatever its source: GitHub tokens (`ghp_`, `gho_`,
  `ghu_`, `ghs_`, `ghr_` + 36 alphanumerics, `github_pat_...`), OpenAI and Anthropic
  style keys (`sk-...`), Slack tokens (`xoxb-...`), AWS access key ids (`AKIA...`,
  `ASIA...`), the token after `Bearer`, the value of an `Authorization:` header and the
  password in a URL (`https://user:password@host`).

Speed: redaction runs on every reply, script output and context value, so it must cost
little on text that holds no secret (SPEC §14: milliseconds per megabyte). Every
pattern starts with a fixed prefix; a plain substring test (C speed, no regex) for that
prefix decides whether its regular expression runs at all, and the expressions start
with the literal so that the regex engine's own prefix scan finds candidates. Known
values are searched the same way, then replaced in one pass of an alternation of them
(longest first). `benchmarks/redaction.py` measures it.

The label in front of a masked value is kept (`Bearer ***`, `Authorization: ***`) so
the text still says what was there.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
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

_WORD_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_TOKEN_CHARS = r"[A-Za-z0-9._~+/-]"

# Patterns whose whole match is replaced by MASK, each starting with a literal (the regex
# engine scans for it at C speed), with the characters that may not come before a match.
_SHAPES: Final[tuple[tuple[re.Pattern[str], frozenset[str]], ...]] = (
    (re.compile(r"g(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{20,})"), _WORD_CHARS),
    (re.compile(r"sk-[A-Za-z0-9_-]{20,}"), _WORD_CHARS | {"-"}),
    (re.compile(r"xox[a-z]-[A-Za-z0-9-]{10,}"), _WORD_CHARS),
    (re.compile(r"A[KS]IA[0-9A-Z]{16}(?![A-Za-z0-9])"), _WORD_CHARS),
)

# `https://user:password@host`: group 1 (the scheme and user) is kept.
_URL_PASSWORD: Final = re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)")
# Labels: group 1 is kept and the rest replaced by MASK. Looked for in lower case,
# UPPER CASE and Capitalized (substring tests on the text; a case-insensitive scan of
# every text cost more than all the rest of redaction).
_LABELLED: Final = (
    # `Authorization: token abc`, `"Authorization": "Bearer abc"`, `authorization=abc`:
    # everything up to the end of the line or a closing quote.
    (("uthoriz", "UTHORIZ"), re.compile(
        r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)[^\s\"'][^\r\n\"']*")),
    # `Bearer <token>`: the token has a digit (and 8+ characters) or is 24+ characters long.
    (("earer", "EARER"), re.compile(
        rf"(?i)(\bbearer\s+)(?:(?={_TOKEN_CHARS}*\d){_TOKEN_CHARS}{{8,}}|{_TOKEN_CHARS}{{24,}})=*")),
)

# What cannot be stored as text safely: NUL and lone surrogates (a str holds surrogates
# only unpaired). Replies are cleaned of them on receipt.
_UNSAFE_CHARS: Final = re.compile("[\x00\ud800-\udfff]")


def _mask_shape(before: frozenset[str]) -> Callable[[re.Match[str]], str]:
    def replace(m: re.Match[str]) -> str:
        start = m.start()
        if start and m.string[start - 1] in before:
            return m.group(0)  # part of a longer word: `task-...`, `xghp_...`
        return MASK

    return replace


_SHAPE_REPLACERS: Final = tuple((pattern, _mask_shape(before)) for pattern, before in _SHAPES)


def _keep_label(m: re.Match[str]) -> str:
    return m.group(1) + MASK


def mask_token_shapes(text: str) -> str:
    """`text` with every token-shaped substring replaced by `***` (no known values)."""
    for pattern, replace in _SHAPE_REPLACERS:
        if pattern.search(text) is not None:
            text = pattern.sub(replace, text)
    if _URL_PASSWORD.search(text) is not None:
        text = _URL_PASSWORD.sub(_keep_label, text)
    for hints, pattern in _LABELLED:
        if any(hint in text for hint in hints):
            text = _sub_at_hints(text, hints, pattern)
    return text


def _sub_at_hints(text: str, hints: tuple[str, ...], pattern: re.Pattern[str]) -> str:
    """pattern.sub(_keep_label, text), trying matches only one character before each
    occurrence of a hint (the label's first letter): a case-insensitive scan of the whole
    text costs ten times more than finding the few places where a label can start."""
    starts: set[int] = set()
    for hint in hints:
        at = text.find(hint)
        while at != -1:
            if at:
                starts.add(at - 1)
            at = text.find(hint, at + 1)
    pieces: list[str] = []
    done = 0
    for start in sorted(starts):
        if start < done:
            continue
        m = pattern.match(text, start)
        if m is not None:
            pieces += (text[done:start], m.group(1), MASK)
            done = m.end()
    return "".join(pieces) + text[done:] if pieces else text


def clean_text(text: str) -> str:
    """`text` with NUL and lone surrogates replaced by U+FFFD: no file, command line or
    environment variable can hold them."""
    if text.isascii():
        return text.replace("\x00", "\ufffd") if "\x00" in text else text
    return _UNSAFE_CHARS.sub("\ufffd", text) if _UNSAFE_CHARS.search(text) else text


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The values of the secret-holding variables of `environ` (SECRET_VARIABLES)."""
    return [value for name, value in environ.items()
            if any(fnmatchcase(name.upper(), pattern) for pattern in SECRET_VARIABLES)]


class Redactor:
    """Masks known secret values and token-shaped text in strings and nested data."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
        # Longest first, so a secret that contains another is masked whole.
        self._secrets: tuple[str, ...] = tuple(sorted(kept, key=lambda s: (-len(s), s)))
        self._exact = (
            re.compile("|".join(re.escape(s) for s in self._secrets)) if self._secrets else None
        )
        # each secret as it appears inside a JSON string (ASCII, escaped)
        self._in_json = tuple(json.dumps(s)[1:-1] for s in self._secrets)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], extra: Iterable[str] = ()) -> Redactor:
        """A redactor for the values of the secret-holding variables in `environ`, and for
        the `extra` values (an Action's token input, a configured key...)."""
        return cls([*secret_values(environ), *extra])

    def with_secrets(self, extra: Iterable[str]) -> Redactor:
        """A redactor for these secrets and `extra` ones."""
        return Redactor([*self._secrets, *extra])

    def text(self, value: str) -> str:
        """`value` with every known secret and token-shaped substring replaced by `***`."""
        if not value:
            return value
        if self._exact is not None and any(secret in value for secret in self._secrets):
            value = self._exact.sub(MASK, value)
        return mask_token_shapes(value)

    redact = text

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
            return self.text(clean_text(value) if clean else value)
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
