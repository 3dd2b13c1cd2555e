"""Attractor's model_stylesheet: parsing, errors with positions, and per-node resolution."""

from __future__ import annotations

import pytest

from delivery.lang.builder import build_workflow
from delivery.lang.parser import parse_dot
from delivery.lang.stylesheet import (
    ModelSettings,
    StylesheetError,
    derived_class,
    model_settings,
    parse_stylesheet,
)
from delivery.validation.loader import check_source

SPEC_EXAMPLE = """
digraph Pipeline {
    graph [
        goal="Implement feature X",
        model_stylesheet="
            * { llm_model: claude-sonnet-4-5; llm_provider: anthropic; }
            .code { llm_model: claude-opus-4-6; llm_provider: anthropic; }
            #critical_review { llm_model: gpt-5.2; llm_provider: openai; reasoning_effort: high; }
        "
    ]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    plan            [label="Plan", class="planning"]
    implement       [label="Implement", class="code"]
    critical_review [label="Critical Review", class="code"]
    pinned          [llm_model="local-model", class="code"]
    start -> plan -> implement -> critical_review -> pinned -> exit
}
"""


def _settings(source: str) -> dict[str, ModelSettings]:
    workflow, _ = build_workflow(parse_dot(source))
    return {node_id: model_settings(workflow, node) for node_id, node in workflow.nodes.items()}


def test_the_attractor_spec_example_resolves_by_specificity() -> None:
    settings = _settings(SPEC_EXAMPLE)
    assert settings["plan"] == ModelSettings("claude-sonnet-4-5", "anthropic", "")
    assert settings["implement"] == ModelSettings("claude-opus-4-6", "anthropic", "")
    assert settings["critical_review"] == ModelSettings("gpt-5.2", "openai", "high")


def test_a_node_attribute_beats_every_rule() -> None:
    assert _settings(SPEC_EXAMPLE)["pinned"].model == "local-model"


def test_a_later_rule_of_equal_specificity_wins() -> None:
    rules = parse_stylesheet("* { llm_model: a; } * { llm_model: b; }")
    assert [r.declarations for r in rules] == [(("llm_model", "a"),), (("llm_model", "b"),)]
    source = 'digraph g { graph [model_stylesheet="* { llm_model: a; } * { llm_model: b; }"] ' \
             'x [prompt="p"] }'
    assert _settings(source)["x"].model == "b"


def test_a_subgraph_label_gives_its_nodes_a_class() -> None:
    source = """digraph g {
        graph [model_stylesheet=".loop-a { reasoning_effort: low; }", llm_model="base"]
        subgraph cluster_loop { label="Loop A"  work [prompt="p"] }
        other [prompt="p"]
    }"""
    settings = _settings(source)
    assert derived_class("Loop A!") == "loop-a"
    assert settings["work"] == ModelSettings("base", "", "low")
    assert settings["other"] == ModelSettings("base", "", "")


SHAPE_SHEET = """digraph g {
    graph [model_stylesheet="
        box { reasoning_effort: medium; llm_model: boxed; }
        * { reasoning_effort: low; llm_model: any; llm_provider: anyone; }
        hexagon { llm_model: gate-model; }
        .fast { reasoning_effort: low; }
        #special { llm_model: pinned; }
    "]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    plain [prompt="p"]
    boxed [shape=box, prompt="p"]
    fast [shape=box, class="fast", prompt="p"]
    special [shape=box, class="fast", prompt="p"]
    other [shape=ellipse, prompt="p"]
    start -> plain -> boxed -> fast -> special -> other -> exit
}"""


def test_a_shape_selector_matches_nodes_of_that_shape_and_box_by_default() -> None:
    settings = _settings(SHAPE_SHEET)
    assert settings["plain"] == ModelSettings("boxed", "anyone", "medium")
    assert settings["boxed"] == ModelSettings("boxed", "anyone", "medium")
    assert settings["other"] == ModelSettings("any", "anyone", "low")


def test_specificity_rises_from_star_to_shape_to_class_to_id() -> None:
    settings = _settings(SHAPE_SHEET)
    # the shape rule comes before `*` in the sheet and still wins: specificity, not order
    assert settings["boxed"].reasoning_effort == "medium"
    assert settings["fast"] == ModelSettings("boxed", "anyone", "low")
    assert settings["special"] == ModelSettings("pinned", "anyone", "low")


@pytest.mark.parametrize(("text", "offset", "words"), [
    ("* { llm_modle: x; }", 4, "unknown property 'llm_modle'"),
    ("code { llm_model: x; }", 0, "'code' is not a node shape"),
    ("boxx { llm_model: x; }", 0, "'boxx' is not a node shape"),
    ("{ llm_model: x; }", 0, "expected a selector"),
    ("* { llm_model x; }", 14, "expected ':'"),
    ("* { llm_model: x; ", 18, "expected '}'"),
    ("* { reasoning_effort: extreme; }", 22, "is not one of low, medium, high"),
    (". { llm_model: x; }", 1, "expected a class name"),
    ("* { }", 0, "sets nothing"),
])
def test_a_broken_stylesheet_names_the_place(text: str, offset: int, words: str) -> None:
    with pytest.raises(StylesheetError) as caught:
        parse_stylesheet(text)
    assert caught.value.offset == offset
    assert words in caught.value.problem
    assert caught.value.fix


def test_stylesheet_errors_are_validation_diagnostics_at_the_character() -> None:
    source = 'digraph g {\n  graph [model_stylesheet="* { llm_model: a; }\n  .x { bad: 1; }"]\n' \
             '  start [shape=Mdiamond]\n  exit [shape=Msquare]\n  start -> exit\n}\n'
    _, diagnostics = check_source(source, "flow.dot")
    hits = [d for d in diagnostics if d.rule == "stylesheet_syntax"]
    assert [(d.line, d.column, d.severity) for d in hits] == [(3, 8, "error")]
    assert "unknown property 'bad'" in hits[0].message
