import io

import pytest

from delivery.engine.interviewer import (
    ConsoleInterviewer,
    PauseRequested,
    PausingInterviewer,
    ScriptedInterviewer,
    match_choice,
)

CHOICES = ["[A] Approve", "[F] Fix", "rework"]


def console(typed: str, answers: dict[str, str] | None = None) -> tuple[ConsoleInterviewer,
                                                                         io.StringIO]:
    shown = io.StringIO()
    return ConsoleInterviewer(ScriptedInterviewer(answers or {}), io.StringIO(typed), shown), shown


def test_a_choice_is_matched_by_accelerator_label_or_normalised_label() -> None:
    assert match_choice("a", CHOICES) == "[A] Approve"
    assert match_choice("Fix", CHOICES) == "[F] Fix"
    assert match_choice("  REWORK ", CHOICES) == "rework"
    assert match_choice("ship", CHOICES) is None


def test_console_shows_the_question_and_choices_and_takes_the_typed_answer() -> None:
    interviewer, shown = console("F\n")
    answer = interviewer.ask("gate", "Review the change", CHOICES)
    assert answer is not None and answer.label == "[F] Fix"
    assert "Review the change" in shown.getvalue()
    assert "[A] Approve" in shown.getvalue()


def test_console_shows_a_questions_escape_sequences_as_text() -> None:
    # a gate's question may quote a run's text (an agent's summary)
    interviewer, shown = console("A\n")
    interviewer.ask("gate", "Ship it? \x1b]52;c;cm0gLXJm\x07\x1b[1A\r", CHOICES)
    assert "\x1b" not in shown.getvalue() and "\r" not in shown.getvalue()
    assert "Ship it? \\u001b]52;c;cm0gLXJm\\u0007" in shown.getvalue()


def test_console_asks_again_after_an_answer_that_names_no_choice() -> None:
    interviewer, shown = console("maybe\nA\n")
    answer = interviewer.ask("gate", "Ship it?", CHOICES)
    assert answer is not None and answer.label == "[A] Approve"
    assert "not a choice: 'maybe'" in shown.getvalue()


def test_console_denies_the_gate_at_end_of_input() -> None:
    interviewer, _ = console("")
    assert interviewer.ask("gate", "Ship it?", CHOICES) is None


def test_a_scripted_answer_wins_over_the_console() -> None:
    interviewer, shown = console("F\n", answers={"gate": "Approve"})
    answer = interviewer.ask("gate", "Ship it?", CHOICES)
    assert answer is not None and answer.label == "[A] Approve"
    assert shown.getvalue() == ""


def test_a_scripted_interviewer_denies_a_gate_it_has_no_answer_for() -> None:
    assert ScriptedInterviewer({"other": "A"}).ask("gate", "Ship it?", CHOICES) is None


def test_each_scripted_answer_answers_one_visit_in_order() -> None:
    interviewer = ScriptedInterviewer({"gate": ["F", "A"]})
    first = interviewer.ask("gate", "Ship it?", CHOICES)
    second = interviewer.ask("gate", "Ship it?", CHOICES)
    assert first is not None and first.label == "[F] Fix"
    assert second is not None and second.label == "[A] Approve"
    assert interviewer.ask("gate", "Ship it?", CHOICES) is None  # used up: unanswered


def test_the_count_of_used_answers_is_shared_with_the_caller() -> None:
    used = {"gate": 1}
    interviewer = ScriptedInterviewer({"gate": ["F", "A"]}, used)
    answer = interviewer.ask("gate", "Ship it?", CHOICES)
    assert answer is not None and answer.label == "[A] Approve"
    assert used == {"gate": 2}


def test_a_pausing_interviewer_pauses_at_a_gate_without_an_answer() -> None:
    interviewer = PausingInterviewer(ScriptedInterviewer({}))
    with pytest.raises(PauseRequested) as paused:
        interviewer.ask("gate", "Ship it?", CHOICES)
    assert paused.value.node_id == "gate"
    assert "--answer gate=LABEL" in str(paused.value)
