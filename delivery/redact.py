"""Masking secrets before anything is written down (SPEC §14).

Tokens never reach events, logs or artifacts. A `Redactor` replaces two kinds of
text with `***`:

* exact secret values it was given (from the environment, see `from_environment`);
  values shorter than 6 characters are ignored, since masking `abc` everywhere would
  garble ordinary text without protecting anything;
* text that looks like a credential whatever its source: GitHub tokens
  (`ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 36 alphanumerics, `github_pat_...`), OpenAI and
  Anthropic style keys (`sk-...`, 20+ characters), Slack tokens (`xoxb-...`), the
  token after `Bearer`, the value of an `Authorization:` header and the password in
  a URL (`https://user:password@host`).

The label in front of a masked value is kept (`Bearer ***`, `Authorization: ***`)
so the text still says what was there. Masking errs on the side of masking: a long
word after "Bearer" in prose is masked too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any, Final

MASK: Final = "***"
MIN_SECRET_LENGTH: Final = 6

# Environment variables whose values are secrets. Matched against the upper-cased name.
SECRET_VARIABLES: Final = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "INPUT_GITHUB-TOKEN",
    "DELIVERY_*TOKEN*",
    "*_API_KEY",
    "*_TOKEN",
    "*_SECRET",
)

_TOKEN_CHARS = r"[A-Za-z0-9._~+/-]"

# Patterns whose whole match is replaced by MASK.
_WHOLE: Final = re.compile(
    r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,}"
    r"|(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{20,}"
    r"|(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}"
    r"|(?<![A-Za-z0-9_])xox[baprs]-[A-Za-z0-9-]{10,}"
)

# Patterns whose group 1 (the label) is kept and the rest replaced by MASK.
_LABELLED: Final = (
    # `Authorization: token abc`, `"Authorization": "Bearer abc"`, `authorization=abc`:
    # everything up to the end of the line or a closing quote.
    re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)[^\s\"'][^\r\n\"']*"),
    # `Bearer <token>`: the token has a digit (and 8+ characters) or is 24+ characters long.
    re.compile(
        rf"(?i)(\bbearer\s+)(?:(?={_TOKEN_CHARS}*\d){_TOKEN_CHARS}{{8,}}|{_TOKEN_CHARS}{{24,}})=*"
    ),
    # `https://user:password@host`
    re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)"),
)


def _may_hold_token(text: str) -> bool:
    """False when no pattern above can match: each needs one of these substrings.

    Plain substring tests, because this runs on every event field and stage file and
    most text has none of them (a case-insensitive regex was ten times slower).
    """
    if ("_" in text and "gh" in text) or "sk-" in text or "xox" in text or "://" in text:
        return True
    lowered = text.lower()
    return "bearer" in lowered or "authorization" in lowered


class Redactor:
    """Masks known secret values and token-looking text in strings and nested data."""

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
    def from_environment(cls, environ: Mapping[str, str]) -> Redactor:
        """A redactor for the values of the secret-holding variables in `environ`."""
        return cls(
            value
            for name, value in environ.items()
            if any(fnmatchcase(name.upper(), pattern) for pattern in SECRET_VARIABLES)
        )

    def text(self, value: str) -> str:
        """`value` with every known secret and token-looking substring replaced by `***`."""
        if not value:
            return value
        if self._exact is not None:
            value = self._exact.sub(MASK, value)
        if not _may_hold_token(value):
            return value
        value = _WHOLE.sub(MASK, value)
        for pattern in _LABELLED:
            value = pattern.sub(lambda m: m.group(1) + MASK, value)
        return value

    def may_change_json(self, text: str) -> bool:
        """False when redacting the data that `text` (ASCII JSON) encodes would change
        nothing: every key and string of it appears in `text`, escaped as JSON escapes."""
        return any(secret in text for secret in self._in_json) or _may_hold_token(text)

    def value(self, value: Any) -> Any:
        """`value` with every string in it redacted, through dicts, lists and tuples.

        Dict keys are redacted too; other values are returned unchanged.
        """
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                (self.text(k) if isinstance(k, str) else k): self.value(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.value(v) for v in value)
        return value

    def __repr__(self) -> str:  # never show the secrets themselves
        return f"Redactor({len(self._secrets)} secret(s))"
