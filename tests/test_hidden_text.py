"""Hidden content (SPEC §14): what a reader of the page does not see never reaches an
agent, and what a reader sees is passed on as written."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.hidden_text import strip_hidden


def test_an_inner_open_details_does_not_reveal_an_outer_closed_one() -> None:
    text = "a <details><details open>inner</details>HIDDEN</details> b"
    assert strip_hidden(text) == "a  b"


def test_a_closed_details_inside_an_open_one_is_hidden() -> None:
    text = "<details open>shown <details>HIDDEN</details> too</details>"
    assert strip_hidden(text) == "<details open>shown  too</details>"


@pytest.mark.parametrize("tag", ['<details title="open">', "<details class='opened'>",
                                 '<details data-open="true">', "<details opened>"])
def test_only_the_open_attribute_opens_a_details(tag: str) -> None:
    assert strip_hidden(f"a {tag}HIDDEN</details>b") == "a b"


@pytest.mark.parametrize("tag", ["<details open>", '<details open="false">', "<DETAILS OPEN>",
                                 '<details class="x" open>'])
def test_a_details_with_the_open_attribute_is_shown(tag: str) -> None:
    assert strip_hidden(f"{tag}seen</details>") == f"{tag}seen</details>"


def test_an_unclosed_details_hides_to_the_end() -> None:
    assert strip_hidden("seen <details><summary>s</summary>HIDDEN") == "seen "


def test_a_stray_closing_tag_does_not_end_the_hiding_early() -> None:
    text = "<details>HIDDEN <details>more</details> HIDDEN</details>seen"
    assert strip_hidden(text) == "seen"


def test_variation_selectors_are_removed() -> None:
    smuggled = "ok" + "".join(chr(0xE0100 + b) for b in b"rm -rf") + "\ufe0f\ufe00"
    assert strip_hidden(smuggled) == "ok"


def test_tag_characters_are_removed() -> None:
    smuggled = "fine" + "".join(chr(0xE0000 + ord(c)) for c in "push to main") + "\U000e007f"
    assert strip_hidden(smuggled) == "fine"


def test_zero_width_and_bidi_characters_are_removed() -> None:
    assert strip_hidden("a\u200bb\u200dc\u202ed\u2066e\u2069f\ufeffg\u00adh") == "abcdefgh"


@pytest.mark.parametrize("line", ["[//]: # (HIDDEN)", '[//]: # "HIDDEN"', "[//]: # 'HIDDEN'",
                                  "[comment]: <> (HIDDEN)", "[//]: <> (HIDDEN)",
                                  "[x]: http://example.com (HIDDEN)", "  [//]: # (HIDDEN)"])
def test_markdown_comment_lines_are_removed(line: str) -> None:
    assert strip_hidden(f"before\n\n{line}\n\nafter") == "before\n\n\nafter"


def test_a_markdown_comment_with_its_title_on_the_next_line_is_removed_whole() -> None:
    assert strip_hidden("a\n\n[//]: #\n  (HIDDEN)\n\nb") == "a\n\n\nb"


def test_a_markdown_comment_in_a_quote_is_removed() -> None:
    assert strip_hidden("> [//]: # (HIDDEN)\n> quoted") == "> quoted"


def test_a_comment_line_that_continues_a_paragraph_is_visible_and_kept() -> None:
    text = "para\n[//]: # (shown as text)"
    assert strip_hidden(text) == text


def test_a_used_reference_definition_is_kept() -> None:
    text = "see [the docs]\n\n[the docs]: https://example.com/docs\n"
    assert strip_hidden(text) == text


def test_a_text_crowded_with_brackets_loses_every_definition_but_keeps_its_code() -> None:
    # parsed without links (their parse is slow on such text): no definition is used
    crowded = "[" * 2000 + " `<details>` [docs]\n\n[docs]: https://example.com (HIDDEN)\n"
    assert strip_hidden(crowded) == "[" * 2000 + " `<details>` [docs]\n\n"


@pytest.mark.parametrize("text", [
    "use `<details>` to fold a log",
    "close it with `</details>` and comment with `<!-- x -->`",
    "``a ` <details> b``",
    "# Heading `<details>` ##",
    "| a | `<details>` |\n|---|---|\n| `</details>` | b |",
    "| `<details>` | `<details>` |\n|---|---|\n| `<!--` | `<!--` |",
    "- item `code <details>`\n  more `</details>` text",
    "> quoted `<!-- kept -->`",
    "```html\n<details>\n<!-- kept -->\n```\nafter",
    "    <details>\n    indented code\n\ntext",
    "~~~\n[//]: # (kept in a block)\n~~~",
])  # fmt: skip
def test_code_spans_and_blocks_are_not_mangled(text: str) -> None:
    assert strip_hidden(text) == text


def test_hidden_parts_next_to_code_are_still_removed() -> None:
    text = "`<details>` then <details>HIDDEN</details> and `<!--` <!-- HIDDEN -->end"
    assert strip_hidden(text) == "`<details>` then  and `<!--` end"


def test_code_inside_a_closed_details_is_hidden_with_it() -> None:
    assert strip_hidden("<details>\n\n```\ncode\n```\n\n</details>ok") == "ok"


def test_crlf_text_keeps_its_line_ends() -> None:
    text = "one\r\n`<details>`\r\n<!-- c -->two\r\n"
    assert strip_hidden(text) == "one\r\n`<details>`\r\ntwo\r\n"


@pytest.mark.parametrize("bogus", ["<?php HIDDEN ?>", "<!DOCTYPE HIDDEN>",
                                   "<![CDATA[HIDDEN]]>", "</ HIDDEN>", "<!HIDDEN",
                                   "<? HIDDEN"])
def test_what_a_browser_reads_as_a_bogus_comment_is_removed(bogus: str) -> None:
    assert strip_hidden(f"a {bogus} b") in ("a  b", "a ")


def test_an_end_tag_with_a_space_does_not_close_a_details() -> None:
    # `</ details>` is a bogus comment to a browser: the details runs on to the end
    assert strip_hidden("<details>x</ details>HIDDEN") == ""


def test_end_tags_and_a_lone_angle_bracket_stay() -> None:
    text = "a < b, <b>bold</b>, x </"
    assert strip_hidden(text) == text


def test_removing_one_part_cannot_assemble_another() -> None:
    assert "evil" not in strip_hidden("<!-<!-- x -->- evil -->ok")
    assert "evil" not in strip_hidden("<deta<!-- x -->ils>evil</details>")


def test_hiding_nested_past_the_pass_limit_is_cut_off() -> None:
    deep = "<!-" * 30 + "<!-- x -->" + "- -->" * 30 + "evil"
    assert "evil" not in strip_hidden(f"ok {deep}")


# Text with no hidden construct: visible characters only, no comment (nor bogus comment:
# `<!`, `<?`, `</` not followed by a letter), no closed details, no link reference
# definition.
_VISIBLE_CHARS = st.characters(
    exclude_categories=("Cf", "Cs"),
    exclude_characters="".join(map(chr, range(0xFE00, 0xFE10))),
).filter(lambda c: not 0xE0000 <= ord(c) <= 0xE01EF)
_PLAIN = st.text(_VISIBLE_CHARS, max_size=200).filter(
    lambda t: "<!" not in t and "<?" not in t and "<details" not in t.lower()
    and "]:" not in t and not re.search("</(?![A-Za-z])", t))
# markdown that looks like hiding but is code, open or used
_LOOKALIKE = st.sampled_from([
    "`<details>`", "`<!-- not a comment -->`", "```\n<details>\n[//]: # (x)\n```\n",
    "<details open>shown</details>", "[ref]\n\n[ref]: https://example.com\n", "\n\n",
    "> quote\n", "- item\n", "`</details>`", "| a | b |\n|---|---|\n| `<!--` | c |\n",
])


@settings(max_examples=200, deadline=None)
@given(_PLAIN)
def test_text_without_hidden_content_comes_out_unchanged(text: str) -> None:
    assert strip_hidden(text) == text


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_LOOKALIKE, st.text(st.sampled_from("ab \n*_#>-|"), max_size=8)),
                max_size=10))
def test_markdown_without_hidden_content_comes_out_unchanged(parts: list[str]) -> None:
    text = "\n\n".join(parts)
    assert strip_hidden(text) == text


_MARKUP = st.lists(st.sampled_from(["<", ">", "!", "?", "-", "/", "`", "[", "]", ":", "#", "(", ")",
                                   "\n", " ", "a", "details", "open", "=", '"', "<![CDATA[",
                                   "<script>", "\u200b", "\r", "\x00", "    ", "> ", "- "]),
                   max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_MARKUP)
def test_any_text_is_stripped_to_a_fixpoint_without_failing(text: str) -> None:
    once = strip_hidden(text)
    assert strip_hidden(once) == once
