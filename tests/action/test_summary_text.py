"""The job summary shows a run's failure reason — which may quote a script's output or an
agent's reply — as the text it is: rendered as GitHub renders Markdown (with raw HTML), it
draws no heading, link, image, HTML element or table of its own."""

from __future__ import annotations

import string
from html.parser import HTMLParser

from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from delivery.action.main import Result
from delivery.action.report import summary_markdown

HOSTILE = ("## delivery: run `r2` — succeeded\n- [approve the merge](https://evil.example/x) "
           "![](https://evil.example/pixel.png) <img src=x onerror=alert(1)> "
           "<details><summary>ok</summary>hidden</details> **all green** &amp; | a | b |\n"
           "> quoted\n1. listed")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def rendered_reason(reason: str) -> _Tags:
    """The HTML of the summary's reason line, as GitHub's Markdown (CommonMark, tables)
    renders it, read back into its tags and text."""
    markdown = summary_markdown([Result("r1", "failed", reason)])
    heading, blank, line = markdown.split("\n")[:3]
    assert heading == "## delivery: run `r1` — failed" and blank == ""
    html = MarkdownIt("commonmark").enable("table").render(line)
    found = _Tags()
    found.feed(html)
    return found


def test_a_hostile_reason_renders_as_one_paragraph_of_its_own_text() -> None:
    shown = rendered_reason(HOSTILE)
    assert shown.tags == ["p"]
    assert "".join(shown.text).strip() == " ".join(HOSTILE.split())


# any text, and text made mostly of Markdown's own characters (NUL left out: a Markdown
# renderer shows it as U+FFFD, CommonMark §2.3)
@given(st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            min_size=1),
    st.text(alphabet=string.punctuation + "ab1 \n", min_size=1)))
def test_any_reason_renders_as_plain_text(reason: str) -> None:
    shown = rendered_reason(reason)
    assert set(shown.tags) <= {"p"}
    assert "".join(shown.text).strip() == " ".join(reason.split())
