"""The DOT lexer and parser give, over a fixed corpus, the tokens, syntax tree or error (at
its position) of the golden files in tests/golden/dot: one rule, in one place, each change
of it seen in the diff of those files. After a change that is meant, regenerate them with
`.venv/bin/python -m tests.golden.regen dot` and review the diff (tests/golden/README.md).

The corpus (tests/golden/dot_area.py) was checked against the lexer and parser the fast
ones replaced before that copy was deleted; the property below needs no second one."""

from __future__ import annotations

from typing import Any

import pytest
from golden import dot_area
from golden.store import check, stored_names
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.errors import WorkflowSyntaxError
from delivery.lang import lexer, parser

CASES = dot_area.cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_corpus_case_lexes_and_parses_as_its_golden_file_says(name: str) -> None:
    check(dot_area, name, CASES[name])


def test_every_golden_file_is_a_case_of_the_corpus() -> None:
    assert stored_names(dot_area.AREA) == set(CASES)


def _error(run: Any) -> tuple[object, ...] | None:
    try:
        run()
    except WorkflowSyntaxError as err:
        return err.position, err.expected, err.found, err.fix
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["a [k=1]", "a -> b", "a =", "[", "}", "=", "\n", "a", ";"]),
                max_size=8),
       st.sampled_from(["$", "<b>", '"open', "/* open", "--", "ok", "@", "\\", ""]))
def test_a_character_no_token_starts_is_the_error_even_after_an_earlier_parse_error(
        statements: list[str], tail: str) -> None:
    """The parser lexes lazily, a statement at a time; a character that starts no token
    is still the error it reports, wherever it is, as lexing the whole file finds it."""
    source = "digraph g {\n" + "\n".join(statements) + "\n}\n" + tail
    lexing = _error(lambda: lexer.tokenize(source, "f.dot"))
    if lexing is not None:
        assert _error(lambda: parser.parse_dot(source, "f.dot")) == lexing
