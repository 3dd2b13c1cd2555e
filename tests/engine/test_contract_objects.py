"""Finding the reply's contract object skips braces that cannot start a JSON object; the
objects found are those the previous scan (a decode at every `{`, kept here as the
oracle) found, in the same order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.engine import contracts
from delivery.engine.contracts import _MARKERS, _decode_at, _objects


def previous_objects(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    i = text.find("{")
    while i != -1:
        value, end = _decode_at(text, i)
        if isinstance(value, dict) and any(marker in value for marker in _MARKERS):
            yield i, value
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)


PIECES = st.sampled_from([
    "{", "}", "{ ", "{\n", "{\t\r\n", '"', '"context_updates"', '"outcome"', ":", ": ", ",",
    "{}", '{"a": 1}', '{"outcome": "succeeded"}', '{"context_updates": {"x": 1}}',
    '"\\"{"', "\\", "[", "]", "f'{name}'", "${HOME}", "```json\n", "\n```", "x", " ", "1",
    '{"context_updates": {"nested": {"outcome": "failed"}}}',
    # first keys and values the start pattern must let through (or may skip)
    '"\\u006futcome"', '"a\\"b"', '"\\\\"', '"\x01"', "\x00", "NaN", "Infinity", "-",
    "-Infinity", "true", "null", "[1]", "2.5e3", '{"k" : ', '{ "k":\n', "{'k': 1}",
    '{"k": x}', "{{", '"outcome": ', '"context_updates": ', "\u2028", "é",
])
TEXTS = st.lists(PIECES, max_size=40).map("".join)


@settings(max_examples=1500, deadline=None)
@given(TEXTS)
def test_the_objects_found_are_those_a_decode_at_every_brace_finds(text: str) -> None:
    assert list(_objects(text)) == list(previous_objects(text))


def test_a_reply_of_code_full_of_braces_still_yields_its_closing_contract_object() -> None:
    code = "def f(x):\n    return f'{x}' + str({1: 2}) + '${HOME}'\n" * 2000
    reply = code + '\n```json\n{"context_updates": {"done": true}}\n```\n'
    found = list(_objects(reply))
    assert [value for _, value in found] == [{"context_updates": {"done": True}}]
    assert contracts.parse_reply(reply, [], {}).updates == {"done": True}


def test_a_marker_key_spelled_with_escapes_or_after_other_keys_is_found() -> None:
    reply = ('x = {"a": b}\n{"\\u006futcome": "failed"}\n{}\n'
             '{ "note" :\n [1, {}], "context_updates": {"k": "v"}}')
    assert list(_objects(reply)) == list(previous_objects(reply))
    assert [value for _, value in _objects(reply)] == [
        {"outcome": "failed"}, {"note": [1, {}], "context_updates": {"k": "v"}}]
