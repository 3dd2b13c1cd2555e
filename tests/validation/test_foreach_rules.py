"""The validator's model of `foreach="folders"` stages (SPEC §8.1): which nodes may run per
folder, where `folder.*` can be read, and what a foreach stage writes (per folder, never
the flat name)."""

from __future__ import annotations

from delivery.lang.diagnostics import Diagnostic
from delivery.validation.loader import check_source


def check(body: str, graph: str = "") -> list[Diagnostic]:
    source = ("digraph g {\n" + (f"graph [{graph}]\n" if graph else "")
              + "start [shape=Mdiamond]\nexit [shape=Msquare]\n" + body + "\n}\n")
    workflow, diagnostics = check_source(source, "t.dot")
    assert workflow is not None
    return diagnostics


def errors(body: str, graph: str = "") -> list[Diagnostic]:
    return [d for d in check(body, graph) if d.severity == "error"]


def rules(body: str, graph: str = "") -> list[str]:
    return [d.rule for d in errors(body, graph)]


IMPLEMENT = 'implement [prompt="Change {{ folder.name }}", outputs="summary:text", ' \
            'foreach="folders"]'


# -- which nodes run per folder ---------------------------------------------------------


def test_foreach_on_a_publish_node_is_an_error_with_a_fix() -> None:
    (diag,) = errors('ship [type=publish, foreach="folders"]\nstart -> ship -> exit')
    assert (diag.rule, diag.node) == ("foreach_type", "ship")
    assert "publish" in diag.message and "agent, prompt or script" in diag.fix


def test_foreach_on_agent_prompt_and_script_nodes_is_accepted() -> None:
    body = ('a [prompt="p", foreach="folders"]\nb [type=prompt, prompt="p", foreach="folders"]\n'
            'c [type=script, script="true", foreach="folders"]\nstart -> a -> b -> c -> exit')
    assert rules(body) == []


def test_only_without_foreach_is_an_error() -> None:
    (diag,) = errors('a [prompt="p", only="folder.pr.state=CI_FAILED"]\nstart -> a -> exit')
    assert (diag.rule, diag.node) == ("only_without_foreach", "a")
    assert 'foreach="folders"' in diag.fix


def test_a_folder_named_folder_is_refused_as_reserved() -> None:
    (diag,) = errors("start -> exit", graph='folders="web,folder"')
    assert diag.rule == "folders_declaration" and "folder" in diag.message
    assert "reserved" in diag.message


# -- folder.* only inside a foreach stage -----------------------------------------------


def test_folder_read_in_a_plain_nodes_template_names_the_node() -> None:
    (diag,) = errors('a [prompt="Fix {{ folder.name }}"]\nstart -> a -> exit')
    assert (diag.rule, diag.node) == ("folder_outside_foreach", "a")
    assert "only inside a foreach stage" in diag.message
    assert "<f>." in diag.fix and "context[f]" in diag.fix


def test_folder_read_in_an_edge_condition_is_an_error() -> None:
    body = (f"{IMPLEMENT}\nstart -> implement\n"
            'implement -> exit [condition="folder.outcome=succeeded"]')
    (diag,) = errors(body)
    assert (diag.rule, diag.edge) == ("folder_outside_foreach", "implement -> exit")


def test_folder_name_and_check_command_are_readable_in_a_foreach_stage() -> None:
    body = ('checks [type=script, script="cd {{ folder.name }} && {{ folder.check_command }}", '
            'foreach="folders"]\nstart -> checks -> exit')
    assert rules(body) == []


def test_only_reads_the_folders_probe_facts() -> None:
    body = ('observe [type=probe]\n'
            'fix [prompt="Fix {{ folder.name }}", foreach="folders", '
            'only="folder.pr.state=CI_FAILED"]\nstart -> observe -> fix -> exit')
    assert rules(body) == []


def test_only_reading_a_per_folder_key_nothing_wrote_is_unavailable() -> None:
    body = ('fix [prompt="p", foreach="folders", only="folder.verdict=bad"]\n'
            "start -> fix -> exit")
    (diag,) = errors(body)
    assert diag.rule == "availability" and "folder.verdict" in diag.message


# -- per-folder writes ------------------------------------------------------------------


def test_a_later_foreach_stage_reads_the_earlier_ones_output_as_folder_key() -> None:
    body = (f'{IMPLEMENT}\nreview [prompt="Review {{{{ folder.summary }}}}", foreach="folders"]'
            "\nstart -> implement -> review -> exit")
    assert rules(body) == []


def test_a_declared_folders_per_folder_output_is_available_after_the_stage() -> None:
    body = (f'{IMPLEMENT}\nreport [prompt="{{{{ web.summary }}}} {{{{ api.outcome }}}}"]\n'
            "start -> implement -> report -> exit")
    assert rules(body, graph='folders="web,api"') == []


def test_folder_read_with_declared_folders_needs_every_folders_key() -> None:
    body = ('observe [type=probe, folder=web]\n'
            'fix [prompt="{{ folder.pr.state }}", foreach="folders"]\n'
            "start -> observe -> fix -> exit")
    (diag,) = errors(body, graph='folders="web,api"')
    assert diag.rule == "availability" and "folder.pr.state" in diag.message
    assert "api" in diag.message


def test_flat_read_of_a_foreach_output_names_the_per_folder_form() -> None:
    body = (f'{IMPLEMENT}\nreport [prompt="{{{{ summary }}}}"]\n'
            "start -> implement -> report -> exit")
    (diag,) = errors(body)
    assert (diag.rule, diag.node) == ("per_folder_read", "report")
    assert "implement" in diag.message
    assert "<f>.summary" in diag.fix and "folder.summary" in diag.fix


def test_flat_condition_on_a_foreach_output_is_a_per_folder_read() -> None:
    body = ('implement [prompt="p", outputs="verdict:choice", foreach="folders"]\n'
            'start -> implement\nimplement -> exit [condition="verdict=done"]\n'
            "implement -> exit")
    assert "per_folder_read" in rules(body)


def test_flat_read_of_a_foreach_scripts_fact_is_a_per_folder_read() -> None:
    body = ('checks [type=script, script="true", facts="checks.passed", foreach="folders"]\n'
            'report [prompt="{{ checks.passed }}"]\nstart -> checks -> report -> exit')
    assert rules(body) == ["per_folder_read"]


def test_failed_folders_and_the_scripts_flag_are_available_after_a_foreach_node() -> None:
    body = ('checks [type=script, script="true", foreach="folders"]\n'
            'report [prompt="{{ checks.failed_folders }}"]\nstart -> checks -> report\n'
            'report -> exit [condition="checks.failed=true"]\nreport -> exit')
    assert rules(body) == []


def test_per_folder_outputs_are_not_carried_by_a_failure_edge() -> None:
    body = (f'{IMPLEMENT}\nreview [prompt="{{{{ folder.summary }}}}", foreach="folders"]\n'
            'start -> implement\nimplement -> review [condition="outcome=failed"]\n'
            'implement -> exit [condition="outcome=succeeded"]\nreview -> exit')
    (diag,) = errors(body)
    assert diag.rule == "availability" and "folder.summary" in diag.message
