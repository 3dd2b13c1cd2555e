"""light_reads answers what Jinja2's analysis (jinja_reads) answers, without Jinja2, for the
template subset of the bundled workflows; outside it, it answers None and Jinja2 decides."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment

from delivery.lang.jinja_reads import jinja_reads
from delivery.lang.light_parse import FILTERS, GLOBALS, TESTS
from delivery.lang.light_reads import light_reads
from delivery.lang.template_reads import TemplateProblem, TemplateRead, template_reads

AGREE = settings(max_examples=400, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

NAMES = st.sampled_from(["a", "b", "x", "ns", "f", "t", "context", "loop", "namespace", "in",
                         "true", "none", "range"])
LITERALS = st.sampled_from(["'s'", '"}}"', "'%}'", "0", "12", "'a\\'b'", "1.5", "[]"])


def _expressions() -> st.SearchStrategy[str]:
    leaf = st.one_of(NAMES, LITERALS)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from([".a", ".b", ".items", "['k']", "[0]", "[true]",
                                              ".0"])).map("".join),
            st.tuples(inner, inner).map(lambda p: f"{p[0]}[{p[1]}]"),
            st.tuples(inner, st.sampled_from(["default('')", "d", "join(',')", "length",
                                              "reject('equalto', '')", "nope", "default"]))
            .map(lambda p: f"{p[0]} | {p[1]}"),
            st.tuples(inner, st.sampled_from(["defined", "undefined", "none", "odd",
                                              "not defined", "defined x"]))
            .map(lambda p: f"{p[0]} is {p[1]}"),
            st.tuples(inner, st.sampled_from([" ~ ", " + ", " == ", " in ", " not in ",
                                              " and ", " or ", " - ", " if ", " , "]), inner)
            .map("".join),
            inner.map(lambda e: f"not {e}"),
            inner.map(lambda e: f"({e})"),
            inner.map(lambda e: f"[{e}, 'z']"),
            st.tuples(inner, inner).map(lambda p: f"{p[0]}({p[1]}, k={p[0]})"),
            st.tuples(inner, inner).map(lambda p: f"{p[0]}.split({p[1]})"),
        )

    return st.recursive(leaf, extend, max_leaves=6)


EXPR = _expressions()


def _templates() -> st.SearchStrategy[str]:
    text = st.sampled_from(["", "text ", "\n", " a\nb ", "{", "}", "%}", "$goal ", "#}"])
    output = EXPR.map(lambda e: "{{ " + e + " }}")
    trimmed = EXPR.map(lambda e: "{{- " + e + " -}}")
    setter = st.tuples(st.sampled_from(["x", "ns.seen", "a", "loop", "x, b"]), EXPR).map(
        lambda p: f"{{% set {p[0]} = {p[1]} %}}")
    comment = st.sampled_from(["{# a comment {{ x }} #}", "{# open"])
    leaf = st.one_of(text, output, trimmed, setter, comment)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        body = st.lists(inner, max_size=3).map("".join)
        return st.one_of(
            st.tuples(st.sampled_from(["f", "t", "x", "loop"]), EXPR, body).map(
                lambda p: f"{{% for {p[0]} in {p[1]} %}}{p[2]}{{% endfor %}}"),
            st.tuples(EXPR, body, st.lists(st.tuples(EXPR, body), max_size=2),
                      st.one_of(st.none(), body)).map(
                lambda p: "{% if " + p[0] + " %}" + p[1]
                + "".join("{% elif " + e + " %}" + b for e, b in p[2])
                + ("" if p[3] is None else "{% else %}" + p[3]) + "{% endif %}"),
            st.sampled_from(["{% endif %}", "{% endfor %}", "{% else %}", "{% raw %}",
                             "{%+ if x %}"]),
        )

    return st.recursive(leaf, extend, max_leaves=8).flatmap(
        lambda one: st.lists(st.just(one) | leaf, min_size=1, max_size=3).map("".join))


@pytest.mark.slow
@AGREE
@given(_templates())
def test_light_reads_agree_with_jinja_on_generated_templates(source: str) -> None:
    light = light_reads(source)
    if light is None:
        return  # outside the subset: Jinja2 answers
    assert jinja_reads(source) == light  # never raises TemplateProblem for what light takes


def test_every_bundled_template_is_read_without_jinja() -> None:
    from delivery.validation.loader import check_file
    for path in ("workflows/deliver.dot", "workflows/review-prs.dot"):
        workflow, _ = check_file(path)
        assert workflow is not None
        for node in workflow.nodes.values():
            for attr in (node.prompt_attr, node.attrs.get("script")):
                if attr is not None:
                    light = light_reads(attr.text)
                    assert light is not None, (path, node.id)
                    assert light == jinja_reads(attr.text)


def test_filter_test_and_global_names_are_jinja2s() -> None:
    env = ImmutableSandboxedEnvironment()
    assert set(env.filters) == FILTERS
    assert set(env.tests) >= TESTS
    assert set(env.globals) == GLOBALS


def test_a_name_set_in_one_branch_only_is_read_from_outside() -> None:
    # Jinja2's scope rule: `x` may be unset after the if, so `{{ x }}` reads the context
    source = "{% if a %}{% set x = 1 %}{% endif %}{{ x }}"
    assert light_reads(source) == [TemplateRead("a", 1), TemplateRead("x", 1)]
    assert jinja_reads(source) == light_reads(source)


def test_loop_variables_and_namespaces_are_not_reads() -> None:
    source = ("{% set ns = namespace(seen=[]) %}\n{% for f in folders %}"
              "{% set ns.seen = ns.seen + [f] %}{{ context[f].pr.url | default('') }}"
              "{% endfor %}\n{{ ns.seen | join(',') }} {{ plan.summary }}")
    assert light_reads(source) == [TemplateRead("folders", 2), TemplateRead("plan.summary", 3)]


def test_outside_the_subset_jinja2_still_decides() -> None:
    for source in ("{{ a if b else c }}", "{% for k, v in x.items() %}{% endfor %}",
                   "{{ x | nope }}", "{% macro m() %}{% endmacro %}", "{{ a\n.b }}"):
        assert light_reads(source) is None, source
    try:
        template_reads("{{ x | nope }}")
    except TemplateProblem as problem:
        assert "nope" in problem.message
    else:
        raise AssertionError("an unknown filter is a template problem")
