"""Text from issues, PRs and reviews, stripped of what a reader of the page does not see
before an agent sees it (SPEC §14): HTML comments, zero-width and bidi control characters,
and collapsed `<details>` blocks, where instructions for an agent could hide."""

from __future__ import annotations

import re

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# zero-width, joiners, word joiner, BOM, soft hyphen, bidi embeddings/overrides/isolates,
# the invisible math operators and the tag characters
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"
                        "\ufeff\U000e0000-\U000e007f]")
# a <details> not marked open hides its body until clicked
_DETAILS = re.compile(r"<details(?![^>]*\bopen\b)[^>]*>.*?(?:</details\s*>|\Z)",
                      re.DOTALL | re.IGNORECASE)
_NESTED_LIMIT = 20


def strip_hidden(text: str) -> str:
    """`text` as a reader sees it on the page, with the hidden parts removed."""
    text = _INVISIBLE.sub("", text)
    for _ in range(_NESTED_LIMIT):  # removing one part can reveal another
        stripped = _DETAILS.sub("", _COMMENT.sub("", text))
        if stripped == text:
            break
        text = stripped
    return text
