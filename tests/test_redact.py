"""Redaction (SPEC §14): tokens never reach events, logs or artifacts."""

from __future__ import annotations

import logging
from fnmatch import fnmatchcase

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.redact import SECRET_VARIABLES, RedactingFilter, Redactor, secret_values

GHP = "ghp_" + "a1B2c3D4e5" * 3 + "F6g7H8"  # 36 alphanumerics after the prefix


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"token {GHP} here", "token *** here"),
        (f"{GHP.replace('ghp_', 'gho_')}", "***"),
        (f"{GHP.replace('ghp_', 'ghu_')}", "***"),
        (f"x={GHP.replace('ghp_', 'ghs_')};", "x=***;"),
        (f"{GHP.replace('ghp_', 'ghr_')}", "***"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "***"),
        ("pat github_pat_11ABCDEFG0123456789_ZZZZZZ", "pat ***"),  # no `gh` in it
        ("key: sk-proj-abcdefghij1234567890XYZ.", "key: ***."),
        ("sk-ant-api03-abcdefghijklmnopqrstuvwx", "***"),
        ("slack xoxb-1234567890-abcdefghij done", "slack *** done"),
        ("xoxp-1234567890-abcdef", "***"),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "Bearer ***"),
        ("Authorization: token abc123def", "Authorization: ***"),
        ('curl -H "Authorization: Bearer abc.def-123" https://api', 'curl -H "Authorization: ***" https://api'),
        ('{"authorization": "token abc123"}', '{"authorization": "***"}'),
        ("https://x-access-token:abc123@github.com/o/r", "https://x-access-token:***@github.com/o/r"),
        ("BEARER eyJhbGciOiJIUzI1NiJ9.payload.sig", "BEARER ***"),
        ("AUTHORIZATION: token abc123def", "AUTHORIZATION: ***"),
        ("authorization=abc123def", "authorization=***"),
        ("aws AKIAIOSFODNN7EXAMPLE key", "aws *** key"),
        ("ASIAIOSFODNN7EXAMPLE", "***"),
        ("xoxa-2-1234567890-abcdef", "***"),
    ],
)  # fmt: skip
def test_token_patterns_are_masked(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "ghp_short",
        "task-abcdefghijklmnopqrstuvwxyz",  # not an sk- key: part of a longer word
        "Bearer tokens are sent in a header",
        "AKIAIOSFODNN7EXAMPLEX",  # longer than an access key id
        "xghp_" + "a" * 36,  # inside a longer word
        "http://example.com:8080/path",
        "",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor().text(text) == text


def test_exact_secrets_are_masked_inside_longer_text() -> None:
    redactor = Redactor(["p4ssw0rd!"])
    assert redactor.text("user=me,pass=p4ssw0rd!,again p4ssw0rd!") == "user=me,pass=***,again ***"


def test_a_secret_containing_another_is_masked_whole() -> None:
    assert Redactor(["abcdef", "abcdefghij"]).text("[abcdefghij]") == "[***]"


def test_secrets_shorter_than_six_characters_are_ignored() -> None:
    assert Redactor(["abc", "12345"]).text("abc 12345") == "abc 12345"


def test_secrets_with_regex_characters_are_matched_literally() -> None:
    assert Redactor(["a.b*c+d"]).text("a.b*c+d axbbbcd") == "*** axbbbcd"


def test_nested_structures_are_redacted_deeply() -> None:
    redactor = Redactor(["s3cr3t-value"])
    value = {
        "stdout": "got s3cr3t-value",
        "items": [1, None, True, "s3cr3t-value", {"deep": (f"x {GHP}",)}],
        "s3cr3t-value": 2.5,
    }
    assert redactor.value(value) == {
        "stdout": "got ***",
        "items": [1, None, True, "***", {"deep": ("x ***",)}],
        "***": 2.5,
    }


def test_from_environment_collects_secret_variables_only() -> None:
    environ = {
        "GITHUB_TOKEN": "gh-token-value",
        "GH_TOKEN": "gh-cli-value",
        "OPENAI_API_KEY": "openai-value",
        "ANTHROPIC_API_KEY": "anthropic-value",
        "INPUT_GITHUB-TOKEN": "action-input-value",
        "DELIVERY_TOKEN_FOR_BOT": "delivery-value",
        "JIRA_API_KEY": "jira-value",
        "NPM_TOKEN": "npm-value",
        "WEBHOOK_SECRET": "webhook-value",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "MY_SERVICE_PASSWORD": "service-password",
        "HOME": "/home/runner",
        "PATH": "/usr/bin:/bin",
        "SHORT_TOKEN": "abc",
    }
    redactor = Redactor.from_environment(environ)
    masked = redactor.text(" ".join(environ.values()))
    assert masked == " ".join(["***"] * 11 + ["/home/runner", "/usr/bin:/bin", "abc"])


def test_repr_does_not_show_secrets() -> None:
    assert "s3cr3t-value" not in repr(Redactor(["s3cr3t-value"]))


def test_extra_values_are_masked_with_the_environment_ones() -> None:
    redactor = Redactor.from_environment({"GITHUB_TOKEN": "token-value"}, extra=["action-input"])
    assert redactor.redact("token-value action-input") == "*** ***"


def test_a_secret_is_masked_in_every_string_of_a_json_line() -> None:
    redactor = Redactor(['quo"te-secret'])
    assert redactor.may_change_json('{"a":"quo\\"te-secret"}')
    assert not redactor.may_change_json('{"a":"nothing here"}')


def test_log_records_are_redacted_by_the_filter(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("delivery.test-redaction")
    redactor_filter = RedactingFilter(Redactor(["s3cr3t-value"]))
    logger.addFilter(redactor_filter)
    try:
        with caplog.at_level(logging.WARNING, logger="delivery.test-redaction"):
            logger.warning("resume: %s and %s", "s3cr3t-value", GHP)
    finally:
        logger.removeFilter(redactor_filter)
    assert caplog.messages == ["resume: *** and ***"]


def test_overlapping_secrets_are_masked_as_their_union() -> None:
    # one value ends where another begins: neither part may stay readable
    redactor = Redactor(["abcdefgh12", "gh12345678"])
    assert redactor.text("x abcdefgh12345678 y") == "x *** y"


SAMPLE_LINES = (
    f"token {GHP} and sk-proj-abcdefghij1234567890XYZ and AKIAIOSFODNN7EXAMPLE",
    "Authorization: Bearer abc.def-123 xoxb-1234567890-abcdefghij",
    "clone https://user:pa55word@example.com/x and Bearer eyJhbGciOiJIUzI1NiJ9.p.s",
    "AUTHORIZATION=opaque-value BEARER abcdefgh1234 github_pat_11ABCDEFG0123456789_abc",
    "value secret-one-123 and secret-two-456 in prose without a credential",
)


@pytest.mark.parametrize("line", SAMPLE_LINES)
def test_a_text_dense_with_prefixes_is_masked_like_a_sparse_one(line: str) -> None:
    # past a few hundred occurrences of a prefix the regex engine masks the whole text
    # instead of trying the pattern at each occurrence: both ways mask alike
    redactor = Redactor(["secret-one-123", "secret-two-456"])
    one = redactor.text(line + "\n")
    assert "***" in one
    assert redactor.text((line + "\n") * 600) == one * 600


PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\r\n"
       "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
       "  QyNTUxOQAAACDkf8a7Hb2  \n"
       "}\n"
       "-----END OPENSSH PRIVATE KEY-----\n")


def test_each_line_of_a_multi_line_secret_is_masked_on_its_own() -> None:
    redactor = Redactor([PEM])
    printed = "line 2: b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ and QyNTUxOQAAACDkf8a7Hb2."
    assert redactor.text(printed) == "line 2: *** and ***."


def test_a_multi_line_secret_printed_whole_is_masked() -> None:
    assert Redactor([PEM]).text(f"key:\n{PEM}done") == "key:\n***\ndone"


def test_a_secret_printed_without_its_padding_is_masked() -> None:
    redactor = Redactor(["  padded-secret-value \n"])
    assert redactor.text("[padded-secret-value]") == "[***]"


def test_lines_of_a_secret_shorter_than_six_characters_are_not_masked() -> None:
    # as the runner trims and splits, but short lines (`}` here) would garble ordinary text
    assert Redactor([PEM]).text("if x { y }") == "if x { y }"


def test_a_whitespace_only_secret_masks_nothing() -> None:
    assert Redactor(["      \n\t  "]).text("a      \n\t  b") == "a      \n\t  b"


def test_environment_secrets_are_masked_line_by_line_and_trimmed() -> None:
    redactor = Redactor.from_environment({"DEPLOY_KEY": PEM, "API_TOKEN": " tok-value-123 "})
    masked = redactor.text("QyNTUxOQAAACDkf8a7Hb2 / tok-value-123")
    assert masked == "*** / ***"


@settings(max_examples=300)
@given(name=st.text(alphabet="ABCDEFGHIJKLMNOPRSTUVWXYZ_-*?[]kyeto", max_size=24)
       | st.sampled_from([*SECRET_VARIABLES, "MY_TOKEN", "TOKENS", "AWS_KEY", "KEYS",
                          "DELIVERY_X_TOKEN_Y", "github_token", "PASSWORDS", "A_SECRET"]))
def test_a_variable_is_secret_as_fnmatch_reads_the_secret_variable_patterns(name: str) -> None:
    # one compiled pattern stands for fnmatchcase against each of SECRET_VARIABLES
    expected = any(fnmatchcase(name.upper(), pattern) for pattern in SECRET_VARIABLES)
    assert (secret_values({name: "value-of-it"}) == ["value-of-it"]) is expected
