"""Validator rules and bounds of SPEC §14: templates that would hang or exhaust memory when
folded, node ids the run directory or Windows would misread, and script substitutions
inside the author's own quotes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bounded import run_cli
from hypothesis import given
from hypothesis import strategies as st

from delivery.testing import flow
from delivery.validation.loader import check_source
from delivery.validation.security import _scan, defeated_substitutions

HOSTILE_TEMPLATES = ["{{ 'a' * 10**10 }}", "{{ 9**(9**9) }}", "{{ 10**10000000 }}",
                     "{{ '%0999999999d' % 1 }}", "{{ 'a' | center(9999999999) }}"]


def _template_flow(template: str) -> str:
    escaped = template.replace('"', '\\"')
    return flow(f"""
work [prompt="{escaped}"]
start -> work -> exit
""", goal=None, name="T")


@pytest.mark.parametrize("template", HOSTILE_TEMPLATES)
def test_templates_that_would_fold_into_huge_values_validate_in_bounded_time_and_memory(
        tmp_path: Path, template: str) -> None:
    path = tmp_path / "t.dot"
    path.write_text(_template_flow(template), encoding="utf-8")
    done = run_cli("validate", path, timeout=30)
    assert done.code == 0, done.stderr
    assert "t.dot: ok" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("template", HOSTILE_TEMPLATES)
def test_templates_that_would_build_huge_values_fail_their_stage_when_run(
        tmp_path: Path, template: str) -> None:
    path = tmp_path / "t.dot"
    path.write_text(_template_flow(template), encoding="utf-8")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"work": ["never sent"]}), encoding="utf-8")
    done = run_cli("run", path, "--goal", "g", "--agent", f"replay:{replies}", "--workspace",
                   tmp_path, "--json", timeout=60)
    assert done.code == 1, done.stderr
    report = json.loads(done.stdout)
    assert "limit exceeded" in report["failure_reason"]


@pytest.mark.parametrize("node_id", ["run", "artifacts", "events", "checkpoint", "Checkpoint",
                                     "CON", "prn", "Aux", "nul", "COM1", "lpt9"])
def test_node_ids_colliding_with_run_directory_or_windows_device_names_are_errors(
        node_id: str) -> None:
    source = f"""digraph R {{
  start [shape=Mdiamond]
  exit [shape=Msquare]
  {node_id} [prompt="Work"]
  start -> {node_id} -> exit
}}"""
    _, diagnostics = check_source(source, "r.dot")
    errors = [d for d in diagnostics if d.severity == "error"]
    assert [(d.rule, d.node, d.line) for d in errors] == [("node_id_reserved", node_id, 4)]


@pytest.mark.parametrize("node_id", ["runner", "event", "console", "com10", "nul_check"])
def test_node_ids_that_only_resemble_reserved_names_are_fine(node_id: str) -> None:
    source = f"digraph R {{ start [shape=Mdiamond]; exit [shape=Msquare]; " \
             f"{node_id} [prompt=\"Work\"]; start -> {node_id} -> exit }}"
    _, diagnostics = check_source(source, "r.dot")
    assert [d.rule for d in diagnostics] == []


@pytest.mark.parametrize(("script", "where"), [
    ('echo "{{ v }}"', "double quotes"),
    ("echo '{{ v }}'", "single quotes"),
    ('x="prefix {% if v %}{{ v }}{% endif %}"', "double quotes"),
    ("cat <<EOF\n{{ v }}\nEOF", "an unquoted heredoc"),
    ("cat <<-END\n\tline {{ v }}\n\tEND", "an unquoted heredoc"),
    ('cat <<< "{{ v }}"', "double quotes"),
])
def test_substitution_inside_the_authors_quotes_or_an_unquoted_heredoc_is_found(
        script: str, where: str) -> None:
    assert [found for _, found in defeated_substitutions(script)] == [where]


@pytest.mark.parametrize("script", [
    "echo {{ v }}",
    "grep -- {{ v }} file && echo 'done' \"ok\"",
    "cat <<'EOF'\n{{ v }}\nEOF",
    'cat <<"EOF"\n{{ v }}\nEOF',
    "cat <<\\EOF\n{{ v }}\nEOF",
    'echo "$(printf %s {{ v }})"',
    "# don't quote: {{ v }}\necho {{ v }}",
    "echo {{ \"it's\" }} done",
])
def test_bare_substitutions_and_quoted_heredocs_are_not_flagged(script: str) -> None:
    assert defeated_substitutions(script) == []


# shell and Jinja pieces, every one but quotes and heredocs
_UNQUOTED = st.lists(st.sampled_from(["{{ v }}", "{{", "}}", "{% if v %}", "{#", "#}", "$(",
                                      ")", "\\", "\\\n", "#", " ", "\n", "\t", ";", "|", "&",
                                      "(", "<", ">", "echo", "$v", "x", "{", "}", "%"]),
                      max_size=30).map("".join).filter(lambda script: "<<" not in script)


@given(_UNQUOTED)
def test_a_script_without_quotes_or_heredocs_has_nothing_flagged(script: str) -> None:
    """defeated_substitutions answers such a script without its scanner: so would the
    scanner."""
    assert defeated_substitutions(script) == _scan(script) == []


def test_script_quoting_warning_names_the_node_and_the_substitutions_position() -> None:
    source = """digraph Q {
  graph [inputs="title"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  say [shape=parallelogram, script="echo ok\\necho \\"{{ title }}\\""]
  start -> say -> exit
}"""
    _, diagnostics = check_source(source, "q.dot")
    (warning,) = diagnostics
    assert (warning.rule, warning.severity, warning.node) == ("script_quoting", "warning", "say")
    assert (warning.line, warning.column) == (5, 53)  # the "{{" as written, after \"
    assert "double quotes" in warning.message and "<<'EOF'" in warning.fix
