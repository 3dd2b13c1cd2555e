"""A reply the run posts for an agent notifies nobody: outside code, `@name` and
`@org/team` get a zero-width space after the `@` (as `&#8203;`, what Dependabot and
Renovate write: GitHub links no mention that does not start with a letter or digit);
code is left as written."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from delivery.hidden_text import quiet_mentions

Q = "@&#8203;"
# GitHub's own rule: an @ at the start or after a non-word character, then a letter or digit
MENTION = re.compile(r"(?:^|(?<=\W))@[A-Za-z0-9]")


def test_a_mention_in_prose_is_quieted() -> None:
    assert quiet_mentions("thanks @alice, fixed") == f"thanks {Q}alice, fixed"


def test_a_team_mention_is_quieted() -> None:
    assert quiet_mentions("cc @octo-org/security") == f"cc {Q}octo-org/security"


def test_a_mention_already_in_code_is_left_as_written() -> None:
    text = "run `@alice` and\n\n```\n@bob\n```\n\n    @carol\n"
    assert quiet_mentions(text) == text


def test_a_mention_right_after_a_code_span_is_quieted() -> None:
    assert quiet_mentions("`x`@alice") == f"`x`{Q}alice"


def test_an_email_address_is_not_a_mention() -> None:
    assert quiet_mentions("mail bob@example.com") == "mail bob@example.com"


def test_an_at_inside_a_url_is_left_as_written() -> None:
    # GitHub links no mention inside a link; an inserted &#8203; would break the URL
    text = "see https://medium.com/@alice/post and [p](https://x.example/@bob) or www.x.io/@c"
    assert quiet_mentions(text) == text


def test_an_at_that_only_looks_like_part_of_a_url_is_quieted() -> None:
    # no domain, or no link start: GitHub shows these as text and the mention pages
    assert quiet_mentions("https://@team x://@team xhttps://a.b/@team") == \
        f"https://{Q}team x://{Q}team xhttps://a.b/{Q}team"


def test_mentions_at_line_starts_in_lists_and_quotes_are_quieted() -> None:
    assert quiet_mentions("- @a\n> @b\n@c") == f"- {Q}a\n> {Q}b\n{Q}c"


@given(st.text(alphabet="@ab-/`\n >*_", max_size=60))
def test_quieting_only_inserts_and_leaves_nothing_to_quiet(text: str) -> None:
    quieted = quiet_mentions(text)
    assert quieted.replace("&#8203;", "") == text
    assert quiet_mentions(quieted) == quieted


@given(st.text(alphabet="@ab-/ .,", max_size=60))
def test_without_code_no_mention_is_left(text: str) -> None:
    assert not MENTION.search(quiet_mentions(text))
