"""Script stages through whole runs (SPEC §6): facts, failures, timeouts, folders, output
files and shell quoting of substitutions."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from engine_helpers import reply, run_flow, stage_file
from signal_helpers import poll

from delivery.testing import flow


def script_flow(script: str, facts: str = "", extra: str = "", inputs: str = "") -> str:
    """start -> s (the script) -> exit on success; failures end at `failed_end`."""
    facts_attr = f', facts="{facts}"' if facts else ""
    return flow(f"""
    s [shape=parallelogram, script="{script}"{facts_attr}{extra}]
    start -> s
    s -> exit [condition="outcome=succeeded"]
    s -> exit [condition="outcome=failed"]
    """, graph={"inputs": inputs} if inputs else {})


def test_facts_in_name_value_form_are_recorded(tmp_path: Path) -> None:
    (tmp_path / "facts.sh").write_text(
        'echo "tests.passed=12" >> "$DELIVERY_FACTS"\n'
        'echo "tests.note=a=b c" >> "$DELIVERY_FACTS"\n', encoding="utf-8")
    ran = run_flow(tmp_path, script_flow("bash facts.sh", "tests.passed,tests.note"))
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["tests.passed"] == "12"
    assert ran.context["tests.note"] == "a=b c"
    assert ran.context["s.failed"] is False


def test_facts_in_heredoc_form_keep_every_line(tmp_path: Path) -> None:
    (tmp_path / "facts.sh").write_text(
        '{ echo "report<<EOF"; echo "line one"; echo "x=y"; echo "line three"; echo EOF; }'
        ' >> "$DELIVERY_FACTS"\n', encoding="utf-8")
    ran = run_flow(tmp_path, script_flow("bash facts.sh", "report"))
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["report"] == "line one\nx=y\nline three"


def test_a_script_writes_exactly_its_declared_facts_and_node_failed(tmp_path: Path) -> None:
    (tmp_path / "facts.sh").write_text('echo "a=1" >> "$DELIVERY_FACTS"\n', encoding="utf-8")
    ran = run_flow(tmp_path, script_flow("bash facts.sh", "a"))
    assert ran.status == "succeeded"
    stage_keys = set(ran.context) - {
        "goal", "graph.goal", "internal.run_id", "outcome", "failure_reason", "failure_class",
        "failure_signature", "last_stage", "preferred_label", "current_node",
    }
    assert stage_keys == {"a", "s.failed", "tool.output"}


def test_a_missing_declared_fact_fails_the_stage_naming_it(tmp_path: Path) -> None:
    (tmp_path / "facts.sh").write_text('echo "a=1" >> "$DELIVERY_FACTS"\n', encoding="utf-8")
    ran = run_flow(tmp_path, script_flow("bash facts.sh", "a,tests.count"))
    assert ran.status == "failed"
    assert "tests.count" in ran.outcome.failure_reason
    assert "not written" in ran.outcome.failure_reason
    assert ran.context["s.failed"] is True
    assert ran.context["a"] == "1"  # the declared fact it did write is still recorded


def test_an_undeclared_fact_fails_the_stage_and_is_not_recorded(tmp_path: Path) -> None:
    (tmp_path / "facts.sh").write_text(
        'echo "a=1" >> "$DELIVERY_FACTS"\necho "sneaky=1" >> "$DELIVERY_FACTS"\n',
        encoding="utf-8")
    ran = run_flow(tmp_path, script_flow("bash facts.sh", "a"))
    assert ran.status == "failed"
    assert "sneaky" in ran.outcome.failure_reason
    assert "undeclared" in ran.outcome.failure_reason
    assert "sneaky" not in ran.context
    assert ran.context["s.failed"] is True


def test_a_non_zero_exit_fails_but_keeps_the_declared_facts_it_wrote(tmp_path: Path) -> None:
    (tmp_path / "facts.sh").write_text(
        'echo "tests.passed=3" >> "$DELIVERY_FACTS"\n'
        'echo "tests.failed_count=2" >> "$DELIVERY_FACTS"\nexit 1\n', encoding="utf-8")
    ran = run_flow(tmp_path, script_flow("bash facts.sh", "tests.passed,tests.failed_count"))
    assert ran.status == "failed"
    assert "exited with code 1" in ran.outcome.failure_reason
    assert ran.context["tests.passed"] == "3"
    assert ran.context["tests.failed_count"] == "2"
    assert ran.context["s.failed"] is True
    assert ran.context["outcome"] == "failed"


def test_node_failed_reads_true_in_the_stage_after_a_failed_script(tmp_path: Path) -> None:
    dot = flow("""
    tests [shape=parallelogram, facts="count",
           script="echo count=4 >> \\"$DELIVERY_FACTS\\"; exit 1"]
    report [type=prompt, prompt="{{ tests.failed }}"]
    start -> tests
    tests -> report [condition="outcome=failed"]
    tests -> exit [condition="outcome=succeeded"]
    report -> exit
    """)
    ran = run_flow(tmp_path, dot, replies={"report": [reply()]})
    assert ran.outcome.path == ["start", "tests", "report", "exit"]
    assert "true" in ran.prompts_of("report")[0]


def test_a_timeout_ends_a_long_script_as_failed(tmp_path: Path) -> None:
    # Were the timeout ignored, `sleep 30` would end by itself and the stage succeed.
    ran = run_flow(tmp_path, script_flow("sleep 30", extra=', timeout="1s"'))
    assert ran.status == "failed"
    assert "timed out" in ran.outcome.failure_reason
    assert ran.context["s.failed"] is True


def _gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for init to reap it counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def test_a_timeout_also_kills_the_script_children(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, script_flow("sleep 30 & echo $! > child.pid; wait",
                                         extra=', timeout="1s"'))
    assert ran.status == "failed"
    child = int((tmp_path / "child.pid").read_text())
    try:
        # SIGKILL is delivered when the child is next scheduled: give it a moment.
        assert poll(lambda: _gone(child), 5.0), "the script's background child outlived the timeout"
    finally:
        if not _gone(child):
            os.kill(child, signal.SIGKILL)


def test_folder_runs_the_script_in_that_folder(tmp_path: Path) -> None:
    web = tmp_path / "repos" / "web"
    web.mkdir(parents=True)
    dot = flow("""
    s [shape=parallelogram, folder=web, facts="where",
       script="echo where=$(pwd) >> \\"$DELIVERY_FACTS\\"; touch here"]
    start -> s -> exit
    """, graph='folders="web"')
    ran = run_flow(tmp_path, dot, repos={"web": str(web)})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert Path(ran.context["where"]).resolve() == web.resolve()
    assert (web / "here").is_file()
    assert not (tmp_path / "here").exists()


def test_without_folder_the_script_runs_in_the_workspace(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, script_flow("touch here"))
    assert ran.status == "succeeded"
    assert (tmp_path / "here").is_file()


def test_stdout_trimmed_is_tool_output_and_stderr_stays_in_the_stage_folder(
        tmp_path: Path) -> None:
    ran = run_flow(tmp_path, script_flow("echo OUT-MARKER; echo ERR-MARKER >&2"))
    assert ran.status == "succeeded"
    out = stage_file(ran.outcome, "s", "stdout.txt").read_text()
    err = stage_file(ran.outcome, "s", "stderr.txt").read_text()
    assert out.strip() == "OUT-MARKER"
    assert err.strip() == "ERR-MARKER"
    assert ran.context["tool.output"] == "OUT-MARKER"  # Attractor's tool handler
    assert "ERR-MARKER" not in repr(ran.context)


def test_each_retry_attempt_keeps_its_own_output_files(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, script_flow(
        "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo try-$n; test $n -gt 1",
        extra=", max_retries=1"))
    assert ran.status == "succeeded"
    assert stage_file(ran.outcome, "s", "stdout.txt", 1).read_text().strip() == "try-1"
    assert stage_file(ran.outcome, "s", "stdout.txt", 2).read_text().strip() == "try-2"


@pytest.mark.parametrize("hostile", [
    "x; touch {pwned}",
    "$(touch {pwned})",
    "`touch {pwned}`",
    "x' ; touch {pwned}; echo '",
    'x" ; touch {pwned}; echo "',
])
def test_a_substituted_input_stays_one_harmless_word(tmp_path: Path, hostile: str) -> None:
    pwned = tmp_path / "pwned"
    value = hostile.format(pwned=pwned)
    dot = script_flow(
        'printf %s {{ name }} > got; echo words=$(set -- {{ name }}; echo $#) '
        '>> \\"$DELIVERY_FACTS\\"',
        facts="words", inputs="name")
    ran = run_flow(tmp_path, dot, inputs={"name": value})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert not pwned.exists()
    assert (tmp_path / "got").read_text() == value
    assert ran.context["words"] == "1"


def test_a_timed_out_script_still_records_the_declared_facts_it_wrote(tmp_path: Path) -> None:
    dot = script_flow('echo progress=half >> \\"$DELIVERY_FACTS\\"; sleep 30',
                      facts="progress", extra=', timeout="1s"')
    ran = run_flow(tmp_path, dot)
    assert ran.status == "failed"
    assert "timed out after 1s" in ran.outcome.failure_reason
    assert ran.context["progress"] == "half"
    assert ran.context["s.failed"] is True


def test_dollar_goal_in_a_script_is_one_quoted_word(tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    goal = f"fix it; touch {pwned}"
    ran = run_flow(tmp_path, script_flow("printf %s $goal > got"), goal=goal)
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert not pwned.exists()
    assert (tmp_path / "got").read_text() == goal


def test_a_script_gets_no_forge_token_unless_its_node_asks_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a script may run code the agent wrote (the checks' tests, a conftest.py): the forge's
    # token is delivery's (SPEC §14), handed to a script only where the author says so
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_" + "T" * 36)
    monkeypatch.setenv("GH_TOKEN", "gh-token-value-for-the-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-model-key-stays-for-tools")
    probe = ('echo token=${GITHUB_TOKEN:+set}${GH_TOKEN:+set}none >> \\"$DELIVERY_FACTS\\"; '
             'echo model=${OPENAI_API_KEY:+set} >> \\"$DELIVERY_FACTS\\"')
    (tmp_path / "plain").mkdir()
    (tmp_path / "asks").mkdir()
    ran = run_flow(tmp_path / "plain", script_flow(probe, "token,model"))
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["token"] == "none"
    assert ran.context["model"] == "set"
    ran = run_flow(tmp_path / "asks", script_flow(probe, "token,model", ", forge_token=true"))
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["token"] == "setsetnone"
