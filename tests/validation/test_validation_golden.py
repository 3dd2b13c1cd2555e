"""The builder and validator give, over a fixed corpus, the diagnostics of the golden files
in tests/golden/validation (rules, positions, messages, fixes, order): one rule, in one
place, each change of it seen in the diff of those files. After a change that is meant,
regenerate them with `.venv/bin/python -m tests.golden.regen validation` and review the
diff (tests/golden/README.md).

The corpus (tests/golden/validation_area.py: the bundled workflows, the benchmark's and
generated ones with a mix of problems) was checked against the builder and validator the
fast ones replaced before that copy was deleted; the properties below need no second one."""

from __future__ import annotations

import random

import pytest
from golden import validation_area
from golden.store import check, stored_names
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.lang.diagnostics import sort_diagnostics
from delivery.validation.loader import check_source

CASES = validation_area.cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_corpus_workflow_gets_the_diagnostics_of_its_golden_file(name: str) -> None:
    check(validation_area, name, CASES[name])


def test_every_golden_file_is_a_case_of_the_corpus() -> None:
    assert stored_names(validation_area.AREA) == set(CASES)


def test_the_broken_benchmark_workflow_is_caught_and_the_whole_one_is_clean() -> None:
    source = validation_area.benchmark_workflow()
    assert check_source(source, "scaling.dot")[1] == []
    found = check_source(validation_area.broken(source), "scaling.dot")[1]
    assert {d.rule for d in found} >= {"availability", "impossible_literal"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_diagnostics_come_sorted_and_each_points_at_a_line_of_the_file(
        rng: random.Random) -> None:
    source = validation_area.generate(rng)
    workflow, diagnostics = check_source(source, "f.dot")
    assert workflow is not None
    assert diagnostics == sort_diagnostics(diagnostics)
    lines = source.split("\n")
    for diagnostic in diagnostics:
        assert 1 <= diagnostic.line <= len(lines), diagnostic
        assert 1 <= diagnostic.column <= len(lines[diagnostic.line - 1]) + 1, diagnostic
        assert diagnostic.severity in ("error", "warning") and diagnostic.message
