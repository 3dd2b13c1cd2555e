"""The preamble's plain renderer writes exactly what templates/preamble.md.j2 renders.

The template is the text's definition (docs/agents.md points to it); the engine renders it
with string joins instead because it runs before every agent stage (issue 23).
"""

from importlib import resources

from hypothesis import example, given
from hypothesis import strategies as st
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from delivery.engine.preamble import _render, _stage_text

_SOURCE = resources.files("delivery.bundled.templates").joinpath("preamble.md.j2")
_TEMPLATE = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False) \
    .from_string(_SOURCE.read_text(encoding="utf-8"))

# text with what a template could treat specially: newlines, braces, markup, blanks
text = st.text(alphabet=st.sampled_from("ab \n\t{}%#*-<>&\"'é"), max_size=12)
stages = st.lists(st.tuples(text, text, st.lists(text, max_size=3)), max_size=4)
pairs = st.lists(st.tuples(text, text), max_size=4)


@given(goal=text, run_id=text, stages=stages, failure=text, files=st.lists(text, max_size=3),
       values=pairs)
@example(goal="", run_id="", stages=[], failure="", files=[], values=[])
@example(goal="\n", run_id="\n", stages=[("\n", "", ["\n"])], failure="\n", files=["\n"],
         values=[("", "\n")])
@example(goal="{{ x }}", run_id="r", stages=[("a", "ok", [])], failure="", files=[],
         values=[("k", "{% raw %}")])
def test_plain_renderer_matches_the_template(goal: str, run_id: str,
                                             stages: list[tuple[str, str, list[str]]],
                                             failure: str, files: list[str],
                                             values: list[tuple[str, str]]) -> None:
    expected = _TEMPLATE.render(mode="compact", goal=goal, run_id=run_id, stages=stages,
                                failure=failure, files=files, values=values).strip("\n")
    assert _render(goal=goal, run_id=run_id, stages=[_stage_text(*stage) for stage in stages],
                   failure=failure, files=files, values=values) == expected
