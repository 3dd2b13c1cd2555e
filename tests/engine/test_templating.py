"""Prompt and script templates (SPEC §4): names, the nested view, shell quoting, limits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bounded import run_python

from delivery.engine.context import OFFLOAD_THRESHOLD, ArtifactStore, Context
from delivery.engine.templating import Renderer, TemplateRenderError

RENDERER = Renderer()

VALUES: dict[str, Any] = {
    "goal": "Ship the login page",
    "inputs.ticket": "T-1",
    "ticket": "T-1",
    "pr.state": "open",
    "review.summary": "looks good",
    "issues": [{"title": "A"}, {"title": "B"}],
    "parallel.results": [{"context": {"x": "first"}}, {"context": {"x": "second"}}],
    "flag": True,
    "count": 42,
    "ratio": 0.5,
    "nothing": None,
    "empty": [],
    "findings": '{"items": [{"severity": "high"}]}',
}


def render(source: str, values: dict[str, Any] | None = None, **options: Any) -> str:
    return RENDERER.render(source, Context(VALUES if values is None else values), **options)


def render_error(source: str, values: dict[str, Any] | None = None, **options: Any) -> str:
    with pytest.raises(TemplateRenderError) as caught:
        render(source, values, **options)
    return str(caught.value)


# -- names ---------------------------------------------------------------------------


def test_goal_renders() -> None:
    assert render("Goal: {{ goal }}") == "Goal: Ship the login page"


def test_inputs_is_a_view_of_the_inputs_keys() -> None:
    assert render("{{ inputs.ticket }}") == "T-1"


def test_a_key_and_its_context_spelling_read_the_same_value() -> None:
    assert render("{{ pr.state }}/{{ context.pr.state }}") == "open/open"


def test_a_dotted_key_is_reachable_from_its_first_segment() -> None:
    assert render("{{ review.summary }}") == "looks good"


def test_folders_is_the_list_passed_in() -> None:
    assert render("{{ folders | join(',') }}", folders=["api", "web"]) == "api,web"


def test_parallel_results_index_with_a_string_digit() -> None:
    assert render("{{ parallel.results['0'].context.x }}") == "first"


def test_parallel_results_index_with_a_number() -> None:
    assert render("{{ parallel.results[1].context.x }}") == "second"


def test_dotted_digit_segments_index_lists() -> None:
    assert render("{{ issues.1.title }}") == "B"


def test_a_negative_index_counts_from_the_end() -> None:
    assert render("{{ issues[-1].title }}") == "B"


def test_a_json_text_value_is_walked_into() -> None:
    assert render("{{ findings.items[0].severity }}") == "high"


def test_a_json_text_value_renders_as_its_text() -> None:
    assert render("{{ findings }}") == VALUES["findings"]


# -- keys win over methods -----------------------------------------------------------


@pytest.mark.parametrize("name", ["items", "keys", "values", "get"])
def test_a_context_key_named_like_a_dict_method_renders_its_value(name: str) -> None:
    values = {f"report.{name}": f"the {name}"}
    assert render(f"{{{{ report.{name} }}}}|{{{{ report['{name}'] }}}}", values) == (
        f"the {name}|the {name}"
    )


def test_dict_methods_remain_when_no_key_takes_their_name() -> None:
    values = {"pr.state": "open", "pr.number": 7}
    assert render("{% for k, v in pr.items() %}{{ k }}={{ v }};{% endfor %}", values) == (
        "state=open;number=7;"
    )


# -- how values render ---------------------------------------------------------------


def test_leaf_values_render_in_json_spelling() -> None:
    assert render("{{ flag }} {{ count }} {{ ratio }} [{{ nothing }}]") == "true 42 0.5 []"


def test_a_view_renders_as_json() -> None:
    assert json.loads(render("{{ issues }}")) == VALUES["issues"]


def test_a_prefix_renders_as_the_json_of_its_keys() -> None:
    assert json.loads(render("{{ pr }}", {"pr.state": "open", "pr.number": 7})) == {
        "state": "open",
        "number": 7,
    }


def test_concatenation_uses_json_spelling() -> None:
    assert render("{{ 'n=' ~ count ~ ',' ~ flag }}") == "n=42,true"


def test_tojson_accepts_views() -> None:
    assert json.loads(render("{{ issues | tojson }}")) == VALUES["issues"]


# -- filters and statements ----------------------------------------------------------


def test_length_filter_counts_list_items() -> None:
    assert render("{{ issues | length }} {{ goal | length }}") == "2 19"


def test_length_segment_counts_list_items() -> None:
    assert render("{{ issues.length }}") == "2"


def test_for_loops_iterate_list_items() -> None:
    assert render("{% for i in issues %}[{{ i.title }}]{% endfor %}") == "[A][B]"


def test_if_treats_an_empty_list_as_false() -> None:
    assert render("{% if empty %}yes{% else %}no{% endif %}{% if flag %}!{% endif %}") == "no!"


def test_map_and_join_work_on_views() -> None:
    assert render("{{ issues | map(attribute='title') | join(', ') }}") == "A, B"


def test_offloaded_values_are_read_through_their_pointer(tmp_path: Path) -> None:
    big = [{"title": f"issue {i}", "body": "x" * 1000} for i in range(OFFLOAD_THRESHOLD // 900)]
    context = Context({"issues": big}, artifacts=ArtifactStore(tmp_path / "artifacts"))
    assert ArtifactStore.is_pointer(context.snapshot()["issues"])
    assert RENDERER.render("{{ issues[3].title }} {{ issues | length }}", context) == (
        f"issue 3 {len(big)}"
    )


def test_the_same_source_renders_each_context_on_its_own() -> None:
    assert (render("{{ a }}", {"a": 1}), render("{{ a }}", {"a": 2})) == ("1", "2")


# -- current_work --------------------------------------------------------------------

LEAF = {"type": "leaf", "ticket": "https://tracker.example/T-1", "parent": None}


def test_current_work_renders_the_described_scope() -> None:
    assert render("{{ current_work }}", {"current_work": LEAF}) == (
        "Ticket https://tracker.example/T-1"
    )


def test_current_work_saved_as_json_text_renders_the_same() -> None:
    assert render("{{ current_work }}", {"current_work": json.dumps(LEAF)}) == (
        "Ticket https://tracker.example/T-1"
    )


def test_current_work_without_a_saved_scope_is_an_error() -> None:
    assert "no work scope was saved in this run" in render_error("{{ current_work }}", {})


def test_current_work_with_an_invalid_scope_is_an_error() -> None:
    message = render_error("{{ current_work }}", {"current_work": {"type": "leaf"}})
    assert "not a valid work scope" in message


# -- $goal ---------------------------------------------------------------------------


def test_dollar_goal_is_replaced_with_the_goal() -> None:
    assert render("Do: $goal.") == "Do: Ship the login page."


def test_dollar_goal_text_is_not_read_as_a_template() -> None:
    assert render("$goal", {"goal": "{{ 7 * 6 }}"}) == "{{ 7 * 6 }}"


def test_dollar_goal_is_shell_quoted_in_scripts() -> None:
    assert render("echo $goal", shell=True) == "echo 'Ship the login page'"


# -- errors --------------------------------------------------------------------------


def test_an_undefined_name_is_an_error_naming_it() -> None:
    assert "'missing_thing' is not in the context" in render_error("{{ missing_thing }}")


def test_an_undefined_path_names_the_whole_path() -> None:
    assert "'pr.number' is not in the context" in render_error("{{ pr.number }}")


def test_an_undefined_name_in_a_condition_is_an_error() -> None:
    assert "'nope' is not in the context" in render_error("{% if nope %}x{% endif %}")


def test_a_runtime_error_carries_the_template_line() -> None:
    assert render_error("one\ntwo\n{{ nope }}").startswith("template line 3:")


def test_a_syntax_error_carries_the_template_line() -> None:
    message = render_error("fine\n{% if %}")
    assert message.startswith("template line 2:") and "syntax error" in message


# -- shell quoting -------------------------------------------------------------------


def run_script(script: str, cwd: Path) -> str:
    done = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True,
                          check=True, timeout=10)
    return done.stdout


def test_a_shell_injection_attempt_stays_one_harmless_word(tmp_path: Path) -> None:
    script = render("echo {{ name }}", {"name": "x; touch pwned"}, shell=True)
    assert run_script(script, tmp_path) == "x; touch pwned\n"
    assert not (tmp_path / "pwned").exists()


def test_command_substitution_in_a_value_is_not_run(tmp_path: Path) -> None:
    script = render("printf '%s\\n' {{ v }}", {"v": "$(touch pwned) `touch pwned2`"}, shell=True)
    assert run_script(script, tmp_path) == "$(touch pwned) `touch pwned2`\n"
    assert list(tmp_path.iterdir()) == []


def test_each_substitution_is_exactly_one_word(tmp_path: Path) -> None:
    values = {"a": "two words", "b": "it's \"quoted\"", "c": ""}
    script = render("for w in {{ a }} {{ b }} {{ c }}; do echo \"<$w>\"; done", values, shell=True)
    assert run_script(script, tmp_path) == "<two words>\n<it's \"quoted\">\n<>\n"


def test_template_text_itself_is_not_quoted() -> None:
    assert render("ls -la {{ ticket }} | wc -l", shell=True) == "ls -la T-1 | wc -l"


def test_prompts_are_not_shell_quoted() -> None:
    assert render("{{ name }}", {"name": "a b; c"}) == "a b; c"


# -- limits --------------------------------------------------------------------------


def test_a_too_long_template_is_refused_before_parsing() -> None:
    renderer = Renderer(max_template_chars=10)
    with pytest.raises(TemplateRenderError, match="over the limit of 10") as caught:
        renderer.render("{% if %}" * 5, Context())
    assert "syntax" not in str(caught.value)


def test_a_too_long_output_is_an_error() -> None:
    renderer = Renderer(max_output_chars=100)
    with pytest.raises(TemplateRenderError, match="output is over the limit of 100"):
        renderer.render("{% for i in range(50) %}abc{% endfor %}", Context())


def test_renderers_with_different_limits_keep_their_own_limits() -> None:
    # Compiled templates are shared across renderers in a process; the limits must not be.
    source = "{{ ('x' * 50) | length }}"
    assert Renderer().render(source, Context()) == "50"
    with pytest.raises(TemplateRenderError, match="over the limit of 10"):
        Renderer(max_output_chars=10).render(source, Context())
    assert Renderer().render(source, Context()) == "50"


BOMBS = {
    "string repeat": "{{ 'a' * 10**9 }}",
    "chained repeat": "{{ 'a' * 100000 * 100000 }}",
    "list repeat": "{{ [1] * 10**9 }}",
    "nested list repeat": "{{ [[[1] * 1000] * 1000] * 1000 }}",
    "power": "{{ 2 ** 100000000 }}",
    "big multiplication": "{% set n = 10 ** 20000 %}{{ n * n * n * n * n * n }}",
    "list concatenation": "{% set l = [1] * 600000 %}{{ l + l }}",
    "string concatenation": "{% set s = 'ab' * 400000 %}{{ s ~ s ~ s }}",
    "doubling concatenation": "{% set s = 'abcdefghij' %}" + "{% set s = s ~ s %}" * 40,
    "doubling addition": "{% set s = 'abcdefghij' %}" + "{% set s = s + s %}" * 40,
    "huge range": "{% for i in range(10**9) %}{% endfor %}",
    "center filter": "{{ 'a' | center(10**9) }}",
    "indent filter": "{{ 'a\nb' | indent(10**9) }}",
    "replace growth": "{% set s = 'a' * 1000 %}{{ s | replace('a', 'b' * 10000) }}",
    "join separator": "{{ range(100000) | join('x' * 100000) }}",
    "format width": "{{ '%999999999d' | format(1) }}",
    "percent width": "{{ '%999999999d' % 1 }}",
    "str.format width": "{{ '{:>999999999}'.format(1) }}",
    "str.ljust": "{{ 'a'.ljust(10**9) }}",
    "str.replace growth": "{{ ('a' * 1000).replace('a', 'b' * 10000) }}",
}


# Renders each template (a JSON object of name -> source, argv[1]) in a child process bounded
# in memory and time (tests/bounded.py): a regression that builds the bomb fails the test by
# MemoryError or a timeout instead of taking the machine. Prints name -> error message.
_RENDER_EACH = """
import json, sys
from delivery.engine.context import Context
from delivery.engine.templating import Renderer, TemplateRenderError
renderer = Renderer(max_render_seconds=float(sys.argv[2]))
found = {}
for name, source in json.loads(sys.argv[1]).items():
    try:
        renderer.render(source, Context())
        found[name] = "rendered"
    except TemplateRenderError as err:
        found[name] = str(err)
print(json.dumps(found))
"""


def _render_bounded(sources: dict[str, str], max_render_seconds: float) -> dict[str, str]:
    done = run_python(_RENDER_EACH, json.dumps(sources), str(max_render_seconds), timeout=60)
    assert done.code == 0, done.stderr
    found: dict[str, str] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="module")
def bomb_errors() -> dict[str, str]:
    return _render_bounded(BOMBS, max_render_seconds=10.0)


@pytest.mark.parametrize("name", BOMBS.keys())
def test_resource_bombs_are_refused_by_a_limit_before_the_render_deadline(
        bomb_errors: dict[str, str], name: str) -> None:
    # Refused by a size limit, not by running until the 10 s deadline stops them.
    assert "limit exceeded" in bomb_errors[name]
    assert "rendering took longer than" not in bomb_errors[name]


def test_endless_loops_stop_at_the_render_deadline() -> None:
    endless = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    found = _render_bounded({"endless": endless}, max_render_seconds=0.2)
    assert found["endless"].endswith("limit exceeded: rendering took longer than 0.2 s")


def test_sizes_under_the_limits_are_allowed() -> None:
    assert len(render("{{ 'ab' * 1000 ~ [0] * 10 }}")) == 2000 + len("[0,0,0,0,0,0,0,0,0,0]")


ESCAPES = {
    "dunder class": "{{ ''.__class__ }}",
    "mro walk": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "function globals": "{{ cycler.__init__.__globals__ }}",
    "format attribute": "{{ '{0.__class__}'.format('') }}",
}


@pytest.mark.parametrize("source", ESCAPES.values(), ids=ESCAPES.keys())
def test_sandbox_escapes_are_blocked(source: str) -> None:
    assert "sandbox" in render_error(source)


def test_a_view_exposes_no_python_attributes() -> None:
    assert "'issues.__class__' is not in the context" in render_error("{{ issues.__class__ }}")
