"""`delivery validate`: exit status, the three output formats, several files, usage errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from delivery.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
VALID = ROOT / "tests" / "workflows" / "valid" / "attractor_simple.dot"
WARNS = ROOT / "tests" / "workflows" / "valid" / "attractor_human_review.dot"
INVALID = ROOT / "tests" / "workflows" / "invalid" / "type_known.dot"
SYNTAX = ROOT / "tests" / "workflows" / "invalid" / "syntax.dot"
FIELDS = {"rule", "severity", "message", "file", "line", "column", "node", "edge", "fix"}


def run(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["validate", *map(str, argv)], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_valid_file_exits_zero_and_says_ok() -> None:
    code, out, err = run(VALID)
    assert code == 0
    assert out.strip() == f"{VALID}: ok (0 error(s), 0 warning(s))"
    assert err == ""


def test_warnings_alone_exit_zero() -> None:
    code, out, _ = run(WARNS)
    assert code == 0
    assert "warning[edge_target_exists]" in out and "ok (0 error(s), 4 warning(s))" in out


def test_errors_exit_one_with_position_rule_and_fix() -> None:
    code, out, _ = run(INVALID)
    assert code == 1
    assert f"{INVALID}:5:17: error[type_known] [work] unknown node type 'robot'" in out
    assert "    fix: use one of" in out
    assert out.rstrip().endswith("invalid (1 error(s), 0 warning(s))")


def test_syntax_error_is_a_diagnostic_not_a_traceback() -> None:
    code, out, err = run(SYNTAX)
    assert code == 1
    assert f"{SYNTAX}:4:14: error[syntax] expected a node id, found '['" in out
    assert "Traceback" not in out + err


def test_json_format_lists_every_diagnostic_with_the_documented_fields() -> None:
    code, out, _ = run(INVALID, "--format", "json")
    assert code == 1
    document = json.loads(out)
    assert list(document) == ["diagnostics"]
    (diag,) = document["diagnostics"]
    assert set(diag) == FIELDS
    assert diag == {"rule": "type_known", "severity": "error",
                    "message": "unknown node type 'robot'", "file": str(INVALID), "line": 5,
                    "column": 17, "node": "work", "edge": None, "fix": diag["fix"]}
    assert diag["fix"].startswith("use one of")


def test_json_format_of_a_clean_file_is_an_empty_list() -> None:
    code, out, _ = run(VALID, "--format", "json")
    assert (code, json.loads(out)) == (0, {"diagnostics": []})


def test_json_format_of_several_files_is_one_document() -> None:
    code, out, _ = run(INVALID, WARNS, SYNTAX, "--format", "json")
    assert code == 1
    diagnostics = json.loads(out)["diagnostics"]
    assert {d["file"] for d in diagnostics} == {str(INVALID), str(WARNS), str(SYNTAX)}
    assert all(set(d) == FIELDS for d in diagnostics)
    edge_diag = json.loads(run(ROOT / "tests/workflows/invalid/condition_syntax.dot",
                               "--format", "json")[1])["diagnostics"][0]
    assert (edge_diag["node"], edge_diag["edge"]) == (None, "work -> exit")


def test_github_format_prints_workflow_commands() -> None:
    code, out, _ = run(INVALID, WARNS, "--format", "github")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"::error file={INVALID},line=5,col=17::[type_known] ")
    assert any(line.startswith(f"::warning file={WARNS},line=15,col=20::[edge_target_exists]")
               for line in lines)
    assert all(line.startswith(("::error ", "::warning ")) for line in lines)


def test_github_format_escapes_newlines_in_messages() -> None:
    path = ROOT / "tests" / "workflows" / "invalid" / "template_syntax.dot"
    _, out, _ = run(path, "--format", "github")
    (line,) = out.splitlines()
    assert line.startswith(f"::error file={path},line=7,col=1::[template_syntax]")


def test_several_files_each_get_a_verdict_and_errors_win() -> None:
    code, out, _ = run(VALID, INVALID, WARNS)
    assert code == 1
    verdicts = [line.rsplit(": ", 1) for line in out.splitlines() if "error(s)" in line]
    assert [(path, verdict.split(" ")[0]) for path, verdict in verdicts] == [
        (str(VALID), "ok"), (str(INVALID), "invalid"), (str(WARNS), "ok")]


def test_several_valid_files_exit_zero() -> None:
    assert run(VALID, WARNS, ROOT / "workflows" / "deliver.dot")[0] == 0


def test_missing_file_exits_two_with_a_message_and_no_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "nope.dot"
    code, out, err = run(VALID, missing)
    assert code == 2
    assert err.strip() == f"delivery validate: {missing}: no such file"
    assert "Traceback" not in err and out == ""


def test_directory_without_workflows_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run(tmp_path)
    assert code == 2 and "is a directory with no .dot file in it" in err


def test_directory_checks_every_dot_file_under_it(tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    (tmp_path / "a.dot").write_text(VALID.read_text())
    (tmp_path / "nested" / "b.dot").write_text(INVALID.read_text())
    (tmp_path / "notes.txt").write_text("not a workflow")
    code, out, _ = run(tmp_path)
    assert code == 1  # b.dot's errors count, as if both files were named
    assert f"{tmp_path / 'a.dot'}: ok" in out
    assert f"{tmp_path / 'nested' / 'b.dot'}: invalid" in out
    assert "notes.txt" not in out


def test_a_dangling_dot_symlink_in_a_directory_is_named_not_skipped(tmp_path: Path) -> None:
    (tmp_path / "a.dot").write_text(VALID.read_text())
    (tmp_path / "gone.dot").symlink_to(tmp_path / "moved-away.dot")
    code, _, err = run(tmp_path)
    assert code == 2
    assert err.strip() == f"delivery validate: {tmp_path / 'gone.dot'}: no such file " \
        "(a symbolic link to a missing file)"


def test_device_is_refused_as_not_a_regular_file() -> None:
    code, out, err = run("/dev/null")
    assert code == 2 and out == ""
    assert err.strip() == "delivery validate: /dev/null: is not a regular file (a device or " \
        "a pipe); name a file"


def test_undecodable_file_exits_two(tmp_path: Path) -> None:
    path = tmp_path / "binary.dot"
    path.write_bytes(b"digraph g { \xff\xfe }")
    code, _, err = run(path)
    assert code == 2 and "cannot read" in err and "Traceback" not in err


def test_unknown_format_is_a_usage_error() -> None:
    code, _, err = run(VALID, "--format", "xml")
    assert code == 2
    assert "invalid choice: 'xml'" in err and err.startswith("usage: delivery validate")


def test_no_file_is_a_usage_error() -> None:
    code, _, err = run()
    assert code == 2
    assert "WORKFLOW" in err


def test_installed_command_runs_in_a_subprocess(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "delivery"
    assert exe.is_file()
    ok = subprocess.run([str(exe), "validate", str(VALID)], capture_output=True, text=True,
                        timeout=60, check=False)
    assert ok.returncode == 0 and "ok (0 error(s)" in ok.stdout
    bad = subprocess.run([str(exe), "validate", "--format", "json", str(INVALID)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["diagnostics"][0]["rule"] == "type_known"
    missing = subprocess.run([str(exe), "validate", str(tmp_path / "x.dot")],
                             capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2
    assert "no such file" in missing.stderr and "Traceback" not in missing.stderr
