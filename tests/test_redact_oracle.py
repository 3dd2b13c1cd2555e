"""The faster redactor masks exactly what the previous one did (`tests/redact_oracle.py`),
and masking is idempotent — what lets a redactor return a text it produced itself
unscanned, instead of scanning one reply three times on its way to the stage files."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.redact import Redactor, clean_text, mask_token_shapes
from delivery.token_shapes import _KEPT, _NEEDS
from tests import redact_oracle as oracle

SECRETS = ["hunter2-secret", "multi\n  line-secret-value \n}", "  padded-secret  ",
           "secret-value-1-x", "secret-value-22-xx"]
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# Pieces that start, end or nearly make every pattern, glued in any order: the cases
# where a prefix occurs without a match, a match touches another, or a label is cut.
FRAGMENTS = st.sampled_from([
    "ghp_", "gho_", "ghs_", "xghp_", "_ghp_", "github_pat_", "sk-", "-sk-", "xoxb-", "xox",
    "AKIA", "ASIA", "KIA", "://", "https://", "user:", "pw@", "@", ":", "Bearer ", "bearer\t",
    "BEARER ", "Authorization: ", "authorization=", "AUTHORIZATION:", '"', "'", "\n", "\r",
    " ", "1", "=", "***", "hunter2-secret", "line-secret-value", "secret-value-",
    "padded-secret", "é", "\x00",
])
RUNS = st.text(alphabet=ALNUM + "_-./", min_size=0, max_size=40)
TEXTS = st.lists(st.one_of(FRAGMENTS, RUNS), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_the_redactor_masks_what_the_previous_one_masked(text: str) -> None:
    assert Redactor(SECRETS).text(text) == oracle.Redactor(SECRETS).text(text)


@settings(max_examples=25, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=8), st.integers(1, 400))
def test_long_texts_take_the_same_masks_on_every_path(pieces: list[str], times: int) -> None:
    # repeated past the short-text limit and, often, past the count that takes the
    # dense path
    text = "\n".join(pieces) * times
    assert Redactor(SECRETS).text(text) == oracle.Redactor(SECRETS).text(text)
    assert mask_token_shapes(text) == oracle.mask_token_shapes(text)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_masking_a_masked_text_changes_nothing(text: str) -> None:
    once = oracle.Redactor(SECRETS).text(text)
    assert oracle.Redactor(SECRETS).text(once) == once


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
def test_cleaning_replaces_what_the_previous_cleaning_replaced(text: str) -> None:
    assert clean_text(text) == oracle.clean_text(text)


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
    previous = oracle.Redactor(SECRETS)
    redactor = Redactor(SECRETS)
    assert redactor.clean_text(text) == previous.text(oracle.clean_text(text))
    assert redactor.value(redactor.text(text), clean=True) \
        == previous.value(previous.text(text), clean=True)


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
    assert redactor.text(quoting) == oracle.Redactor(SECRETS).text(quoting)


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
    """(what the redactor makes of `before` + a masked long text + `after`, what the
    previous redactor made of it)."""
    redactor = Redactor(SECRETS)
    quoting = before + redactor.clean_text(text) + after
    return redactor.text(quoting), oracle.Redactor(SECRETS).text(quoting)


def test_a_password_running_out_of_a_quoted_text_is_masked() -> None:
    ours, previous = _quoted("", FILLER + "https://user:" + "p" * 600, "@host\n")
    assert ours == previous and ours.endswith("https://user:***@host\n")


def test_a_password_running_into_a_quoted_text_is_masked() -> None:
    ours, previous = _quoted("see https://user:", "p" * 600 + "@host\n" + FILLER, "")
    assert ours == previous and ours.startswith("see https://user:***@host\n")


def test_a_header_whose_white_space_runs_out_of_a_quoted_text_is_masked() -> None:
    ours, previous = _quoted("", FILLER + "Authorization:" + " " * 600, "\nvalue\n")
    assert ours == previous and ours.endswith("Authorization:" + " " * 600 + "\n***\n")


def test_a_header_whose_white_space_runs_into_a_quoted_text_is_masked() -> None:
    ours, previous = _quoted("Authorization:\n", " " * 600 + "value\n" + FILLER, "")
    assert ours == previous and ours.startswith("Authorization:\n" + " " * 600 + "***\n")


def test_a_secret_that_a_mask_completes_is_masked_in_a_text_quoting_the_masked_one() -> None:
    # masking the first secret leaves `***tail-secret`, the second: a quoting text must
    # not be taken as masked already
    secrets = ["hunter2-secret", "***tail-secret"]
    redactor = Redactor(secrets)
    reply = redactor.clean_text(FILLER + "hunter2-secrettail-secret\n" + FILLER)
    assert "\n***tail-secret\n" in reply
    transcript = f"## turn 1: reply\n\n{reply}\n"
    assert redactor.text(transcript) == oracle.Redactor(secrets).text(transcript)
    assert "\n***\n" in redactor.text(transcript)


def test_a_long_secret_crossing_the_end_of_a_quoted_text_is_masked() -> None:
    # a secret of many short lines (none of them a secret of its own) that the quoted
    # reply ends in the middle of
    secret = "abcde\n" * 99 + "abcde"
    redactor = Redactor([secret])
    cut = 6 * 91 + 5  # a line break of the secret
    reply = redactor.clean_text(FILLER + secret[:cut])
    transcript = f"{reply}\n{secret[cut + 1:]}\n"
    assert redactor.text(transcript) == oracle.Redactor([secret]).text(transcript)
    assert redactor.text(transcript).endswith("\n***\n")


# Token-shaped runs after a label: digits early, late or missing, short and long, with the
# characters a token may hold and the ones that end it.
TOKEN_RUNS = st.text(alphabet="aZ9._~+/-=", min_size=0, max_size=30)
LABELLED = st.lists(st.one_of(st.sampled_from(["Bearer", "bearer", "BEARER", " ", "\t", "\n",
                                               "xBearer ", "Authorization: ", "1"]),
                              TOKEN_RUNS), max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(LABELLED)
def test_each_label_pattern_matches_where_the_previous_one_did(text: str) -> None:
    # the patterns rewritten for speed (the Bearer token's digit test without
    # backtracking) keep the label and mask the value exactly where the old ones did
    for (_, ours), (_, previous) in zip(_KEPT, oracle._KEPT, strict=True):
        assert [(m.start(), m.end(1), m.end()) for m in ours.finditer(text)] \
            == [(m.start(), m.end(1), m.end()) for m in previous.finditer(text)]


# Whole credentials of every shape, the labels and URLs, and the overlaps where masking
# them in turn differs from masking each where it starts (`xoxb-...-ghp_...`: the Slack
# token's run stops at `_`, the GitHub token starts after a `-`).
_GHP = "ghp_" + "aB3" * 12
WHOLE = st.sampled_from([
    _GHP, "gho_" + "z9" * 18, "github_pat_" + "A_1" * 8, "sk-" + "k-9" * 8, "sk-proj-" + "x" * 20,
    "xoxb-" + "1-a" * 4, "AKIA" + "Q7" * 8, "ASIA" + "Q7" * 8 + "x", "Bearer " + "t0k.n" * 3,
    "bearer\n" + "T" * 24 + "==", "BEARER abc", "Authorization: token abc", '"authorization": "x"',
    "AUTHORIZATION=a b", "https://user:pw1@host/x", "http://u:p:q@h", "://:@", "x://a:b@c@d",
    "xoxb-aaaaaaaaaa-" + _GHP, "sk-" + "a" * 20 + "-" + _GHP, "-AKIA" + "B" * 16,
    "-xoxp-" + "9" * 10,
    "sk-" + "b" * 20 + "-github_pat_" + "c" * 20, "https://u:" + _GHP + "@h", "Bearer " + _GHP,
    "Authorization: Bearer " + _GHP, "hunter2-secret", "secret-value-1-x", "ghp_" + "a" * 35,
])
LINES = st.lists(st.one_of(WHOLE, FRAGMENTS, RUNS), min_size=1, max_size=8).map("".join)


@settings(max_examples=40, deadline=None)
@given(st.lists(LINES, min_size=1, max_size=6), st.lists(LINES, max_size=4),
       st.integers(60, 300))
def test_texts_dense_with_every_shape_take_the_masks_of_the_previous_redactor(
        lines: list[str], odd: list[str], times: int) -> None:
    # repeated past the count that takes the dense path, with a few lines of their own
    text = "\n".join(lines * times + odd)
    assert Redactor(SECRETS).text(text) == oracle.Redactor(SECRETS).text(text)
    assert mask_token_shapes(text) == oracle.mask_token_shapes(text)


@pytest.mark.parametrize(("tokens", "pats"), [(200, 200), (256, 256), (257, 0), (0, 257),
                                              (257, 257), (100, 300), (513, 0)])
def test_the_github_shapes_scanned_together_take_the_path_each_took_alone(
        tokens: int, pats: int) -> None:
    # a Slack token running into a GitHub one: masked apart (where each starts) on the
    # sparse path, in turn on the dense one, with different results
    overlap = "xoxb-aaaaaaaaaa-" + _GHP
    text = "\n".join([overlap] + ["ghp_x"] * tokens + ["github_pat_x"] * pats + [overlap])
    assert mask_token_shapes(text) == oracle.mask_token_shapes(text)
    assert Redactor(SECRETS).text(text) == oracle.Redactor(SECRETS).text(text)


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
