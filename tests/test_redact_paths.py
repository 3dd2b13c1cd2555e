"""The redactor's short cuts give what a full scan gives: a text it returned lately comes
back unscanned, a stage file quoting masked texts is scanned only around them, and masking
is idempotent. What it masks over a fixed corpus (short and long texts, texts dense with
every shape, the labelled patterns, cleaning) is in the golden files of
tests/golden/redaction: after a change that is meant, regenerate them with
`.venv/bin/python -m tests.golden.regen redaction` and review the diff
(tests/golden/README.md). That corpus was checked against the redactor the fast one
replaced before that copy was deleted."""

from __future__ import annotations

import re

import pytest
from golden import redaction_area
from golden.redaction_area import SECRETS
from golden.store import check, stored_names
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.redact import Redactor, clean_text
from delivery.token_shapes import _NEEDS

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
CASES = redaction_area.cases()

# Pieces that start, end or nearly make every pattern, glued in any order: the cases
# where a prefix occurs without a match, a match touches another, or a label is cut.
FRAGMENTS = st.sampled_from(redaction_area.FRAGMENTS)
RUNS = st.text(alphabet=ALNUM + "_-./", min_size=0, max_size=40)
TEXTS = st.lists(st.one_of(FRAGMENTS, RUNS), max_size=30).map("".join)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_corpus_text_is_masked_as_its_golden_file_says(name: str) -> None:
    check(redaction_area, name, CASES[name])


def test_every_golden_file_is_a_case_of_the_corpus() -> None:
    assert stored_names(redaction_area.AREA) == set(CASES)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_masking_a_masked_text_changes_nothing(text: str) -> None:
    # a redactor of its own for each: the second must scan, not recognise its own text
    once = Redactor(SECRETS).text(text)
    assert Redactor(SECRETS).text(once) == once


def test_a_text_the_redactor_returned_comes_back_as_it_is() -> None:
    redactor = Redactor(["hunter2-secret"])
    masked = redactor.text("say hunter2-secret and ghp_" + "a" * 36)
    assert masked == "say *** and ***"
    assert redactor.text(masked) == "say *** and ***"


def test_new_texts_are_masked_while_old_ones_leave_the_memo_and_their_ids_are_reused() -> None:
    redactor = Redactor(["hunter2-secret"])
    for number in range(200):  # freed strings' ids come back for new, unmasked ones
        text = f"{number} hunter2-secret"
        assert redactor.text(text) == f"{number} ***"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "é", "\x00", "\ud800", "\udfff", "😀", "\n"]),
               max_size=30))
def test_cleaning_replaces_nul_and_lone_surrogates_and_nothing_else(text: str) -> None:
    cleaned = clean_text(text)
    cleaned.encode("utf-8")  # what no file, command line or variable could hold is gone
    assert "\x00" not in cleaned and len(cleaned) == len(text)
    assert all(new == old or new == "\ufffd" for new, old in zip(cleaned, text, strict=True))


def test_a_reply_cleaned_and_masked_on_receipt_is_stored_as_it_is() -> None:
    redactor = Redactor(["hunter2-secret"])
    received = redactor.clean_text("said hunter2-secret\x00 and \ud800")
    assert received == "said ***\ufffd and \ufffd"
    assert redactor.value(received, clean=True) is received
    assert redactor.text(received) is received


def test_a_masked_text_that_was_never_cleaned_is_still_cleaned() -> None:
    redactor = Redactor(["hunter2-secret"])
    masked = redactor.text("said hunter2-secret\x00")
    assert masked == "said ***\x00"
    assert redactor.value(masked, clean=True) == "said ***\ufffd"
    assert redactor.value({"k": masked}, clean=True) == {"k": "said ***\ufffd"}


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_cleaning_and_masking_at_once_is_masking_the_cleaned_text(text: str) -> None:
    fresh = Redactor(SECRETS)
    redactor = Redactor(SECRETS)
    assert redactor.clean_text(text) == fresh.text(clean_text(text))
    # the text it returned is known to it, not to a redactor of its own: both clean it
    assert redactor.value(redactor.text(text), clean=True) \
        == Redactor(SECRETS).value(Redactor(SECRETS).text(text), clean=True)


# A stage file quoting prompts and replies the redactor cleaned and masked (a transcript):
# long masked texts whose first and last lines are anything, between lines of any text.
FILLER = "plain words of a long reply\n" * 2600  # past the length a text is looked for in
# (with runs longer than what is looked at around a quoted text: a password, a header's
# white space)
LONG_RUNS = st.sampled_from(["p" * 600, " " * 600, "\n" * 300, "a1" * 300])
EDGES = st.lists(st.one_of(FRAGMENTS, RUNS, LONG_RUNS), max_size=12).map("".join)
GLUE = st.lists(st.one_of(FRAGMENTS, RUNS, LONG_RUNS, st.just("\n"),
                          st.just("## turn 2: reply\n\n")), max_size=8).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(EDGES, EDGES), min_size=1, max_size=3),
       st.lists(GLUE, min_size=4, max_size=4), st.booleans())
def test_a_text_quoting_masked_texts_is_masked_as_a_whole_one(
        texts: list[tuple[str, str]], glue: list[str], on_lines: bool) -> None:
    redactor = Redactor(SECRETS)
    masked = [redactor.clean_text(head + FILLER + tail) for head, tail in texts]
    edge = "\n" if on_lines else ""
    quoting = glue[0] + edge + (edge + glue[1] + edge).join(masked) + edge + glue[2]
    # a redactor that never returned the quoted texts scans the whole file
    assert redactor.text(quoting) == Redactor(SECRETS).text(quoting)


def test_a_header_left_open_at_the_end_of_a_quoted_reply_still_masks_what_follows() -> None:
    # `Authorization:` ending the reply: its value is the next line of the stage file
    redactor = Redactor(SECRETS)
    reply = redactor.clean_text(FILLER + "Authorization:")
    transcript = f"## turn 1: reply\n\n{reply}\n\nsecret-on-the-next-line\n"
    assert redactor.text(transcript).endswith("Authorization:\n\n***\n")


def test_a_quoted_reply_and_what_is_around_it_are_masked_once() -> None:
    redactor = Redactor(SECRETS)
    reply = redactor.clean_text("ghp_" + "a" * 36 + "\n" + FILLER)
    transcript = f"## turn 1: prompt\n\nsay hunter2-secret\n\n## turn 2: reply\n\n{reply}\n"
    assert redactor.text(transcript) == transcript.replace("hunter2-secret", "***")
    assert reply.startswith("***\n")


def _quoted(before: str, text: str, after: str) -> tuple[str, str]:
    """(what the redactor makes of `before` + a masked long text + `after`, what a
    redactor that never saw the masked text, so scans it all, makes of it)."""
    redactor = Redactor(SECRETS)
    quoting = before + redactor.clean_text(text) + after
    return redactor.text(quoting), Redactor(SECRETS).text(quoting)


def test_a_password_running_out_of_a_quoted_text_is_masked() -> None:
    ours, scanned = _quoted("", FILLER + "https://user:" + "p" * 600, "@host\n")
    assert ours == scanned and ours.endswith("https://user:***@host\n")


def test_a_password_running_into_a_quoted_text_is_masked() -> None:
    ours, scanned = _quoted("see https://user:", "p" * 600 + "@host\n" + FILLER, "")
    assert ours == scanned and ours.startswith("see https://user:***@host\n")


def test_a_header_whose_white_space_runs_out_of_a_quoted_text_is_masked() -> None:
    ours, scanned = _quoted("", FILLER + "Authorization:" + " " * 600, "\nvalue\n")
    assert ours == scanned and ours.endswith("Authorization:" + " " * 600 + "\n***\n")


def test_a_header_whose_white_space_runs_into_a_quoted_text_is_masked() -> None:
    ours, scanned = _quoted("Authorization:\n", " " * 600 + "value\n" + FILLER, "")
    assert ours == scanned and ours.startswith("Authorization:\n" + " " * 600 + "***\n")


def test_a_secret_that_a_mask_completes_is_masked_in_a_text_quoting_the_masked_one() -> None:
    # masking the first secret leaves `***tail-secret`, the second: a quoting text must
    # not be taken as masked already
    secrets = ["hunter2-secret", "***tail-secret"]
    redactor = Redactor(secrets)
    reply = redactor.clean_text(FILLER + "hunter2-secrettail-secret\n" + FILLER)
    assert "\n***tail-secret\n" in reply
    transcript = f"## turn 1: reply\n\n{reply}\n"
    assert redactor.text(transcript) == Redactor(secrets).text(transcript)
    assert "\n***\n" in redactor.text(transcript)


def test_a_long_secret_crossing_the_end_of_a_quoted_text_is_masked() -> None:
    # a secret of many short lines (none of them a secret of its own) that the quoted
    # reply ends in the middle of
    secret = "abcde\n" * 99 + "abcde"
    redactor = Redactor([secret])
    cut = 6 * 91 + 5  # a line break of the secret
    reply = redactor.clean_text(FILLER + secret[:cut])
    transcript = f"{reply}\n{secret[cut + 1:]}\n"
    assert redactor.text(transcript) == Redactor([secret]).text(transcript)
    assert redactor.text(transcript).endswith("\n***\n")


@pytest.mark.parametrize("prefix", list(_NEEDS), ids=lambda p: getattr(p, "pattern", p))
def test_each_occurrence_of_a_prefix_holds_the_character_tested_for_it(
        prefix: str | re.Pattern[str]) -> None:
    # the scan of a prefix is skipped in a text without that character
    need = _NEEDS[prefix]
    if isinstance(prefix, str):
        assert need in prefix
        return

    @settings(max_examples=50, deadline=None)
    @given(st.from_regex(prefix, fullmatch=True))
    def holds(occurrence: str) -> None:
        assert need in occurrence

    holds()
