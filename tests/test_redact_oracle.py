"""The faster redactor masks exactly what the previous one did (`tests/redact_oracle.py`),
and masking is idempotent — what lets a redactor return a text it produced itself
unscanned, instead of scanning one reply three times on its way to the stage files."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.redact import Redactor, clean_text, mask_token_shapes
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
