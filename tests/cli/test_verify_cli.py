"""`delivery verify | resume | inspect` on finished, tampered and bogus runs (SPEC §11, §12).

The run is the crash tests' workflow (`durability_driver.FLOW`), run once per module.
Most cases call `delivery.cli.main.main` in-process (an unexpected exception would fail the
test); a few run the installed command to see exactly what a user sees: the exit status,
one line on stderr, no traceback.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from durability_driver import write_workspace

from delivery.testing import flow
from delivery.testing.cli import invoke as cli

DELIVERY = Path(sys.executable).with_name("delivery")
RUN_ARGS = ("--agent", "replay:replies.json", "--input", "ticket=T-1")




def delivery(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DELIVERY), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False)


def lines_of(run: Path) -> list[bytes]:
    return (run / "events.jsonl").read_bytes().splitlines(keepends=True)


def events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines_of(run)]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_workspace(tmp_path_factory.mktemp("verify"))


@pytest.fixture(scope="module")
def finished(workspace: Path) -> tuple[Path, dict[str, Any]]:
    """A succeeded run and its `--json` report."""
    run = workspace / "runs" / "finished"
    code, out, err = cli("run", workspace / "flow.dot", *RUN_ARGS, "--workspace", workspace,
                         "--run-dir", run, "--json")
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return run, report


@pytest.fixture
def copy_of(finished: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    """A copy of the finished run to spoil."""
    return Path(shutil.copytree(finished[0], tmp_path / "run"))


# -- verify ------------------------------------------------------------------------------
def test_verify_passes_on_a_finished_run(finished: tuple[Path, dict[str, Any]]) -> None:
    run, _ = finished
    count = len(lines_of(run))
    assert count > 30
    done = delivery("verify", run, cwd=run.parent)
    assert (done.returncode, done.stderr) == (0, "")
    assert f"event chain intact ({count} events)" in done.stdout


def _edit_field(lines: list[bytes], k: int) -> None:
    event = json.loads(lines[k - 1])
    assert event["type"] == "stage_finished" and event["outcome"] == "succeeded"
    lines[k - 1] = lines[k - 1].replace(b'"outcome":"succeeded"', b'"outcome":"failed"')


def _middle(lines: list[bytes]) -> int:
    """A stage_finished line in the middle of the log (1-based)."""
    numbers = [n for n, line in enumerate(lines, start=1)
               if b'"stage_finished"' in line and b'"succeeded"' in line]
    return numbers[len(numbers) // 2]


# (name, how to spoil the lines given the middle line k, pattern the message must match)
Tamper = Callable[[list[bytes], int], object]
TAMPERING: list[tuple[str, Tamper, str]] = [
    ("edit a field of a middle line", _edit_field,
     r"line {next}: prev does not match the hash of line {k}"),
    ("edit the seq of a middle line",
     lambda lines, k: lines.__setitem__(k - 1, re.sub(rb'"seq":\d+', b'"seq":999',
                                                       lines[k - 1])),
     r"line {k}: seq is 999, expected {k}"),
    ("remove a middle line", lambda lines, k: lines.__delitem__(k - 1),
     r"line {k}: seq is {next}, expected {k} — a line was removed"),
    ("swap two lines",
     lambda lines, k: lines.__setitem__(slice(k - 1, k + 1), [lines[k], lines[k - 1]]),
     r"line {k}: seq is {next}, expected {k} .*reordered"),
    ("delete the last line", lambda lines, k: lines.pop(),
     r"line {last}: missing — the checkpoint recorded {last} lines, the log has {before}"),
    ("edit the last line",
     lambda lines, k: lines.__setitem__(-1, lines[-1].replace(b'"succeeded"', b'"failed"')),
     r"line {last}: its hash does not match the head recorded in the checkpoint"),
    ("cut the last line short", lambda lines, k: lines.__setitem__(-1, lines[-1][:20]),
     r"line {last}: incomplete \(no trailing newline\)"),
]


@pytest.mark.parametrize(("spoil", "expected"), [(s, e) for _, s, e in TAMPERING],
                         ids=[name for name, _, _ in TAMPERING])
def test_verify_names_the_line_of_a_tampered_log(copy_of: Path, spoil: Tamper,
                                                 expected: str) -> None:
    lines = lines_of(copy_of)
    k, last = _middle(lines), len(lines)
    spoil(lines, k)
    (copy_of / "events.jsonl").write_bytes(b"".join(lines))
    code, out, err = cli("verify", copy_of)
    assert code == 1, out + err
    assert "event chain BROKEN" in out
    pattern = expected.format(k=k, next=k + 1, last=last, before=last - 1)
    assert re.search(pattern, out), f"{pattern!r} not in {out!r}"


def test_verify_reports_a_missing_log_and_a_corrupt_checkpoint(copy_of: Path) -> None:
    (copy_of / "checkpoint.json").write_text('{"events": ', encoding="utf-8")
    code, out, _ = cli("verify", copy_of)
    assert code == 1 and "checkpoint.json: corrupt checkpoint: not valid JSON" in out
    (copy_of / "checkpoint.json").unlink()
    (copy_of / "events.jsonl").unlink()
    # no checkpoint and no log: a run that never logged anything — nothing is broken
    assert cli("verify", copy_of)[0] == 0


def test_verify_on_a_log_removed_after_a_checkpoint_recorded_it(copy_of: Path) -> None:
    (copy_of / "events.jsonl").unlink()
    code, out, _ = cli("verify", copy_of)
    assert code == 1 and "events.jsonl: the event log is missing" in out


@pytest.mark.parametrize("target", ["not-a-run", "missing", "a-file"])
def test_verify_and_inspect_refuse_what_is_not_a_run(tmp_path: Path, target: str) -> None:
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    for command in ("verify", "inspect"):
        code, out, err = cli(command, tmp_path / target)
        assert code == 2, (command, out, err)
        assert "is neither a run directory nor a run id" in err and target in err
        assert out == ""
    # what a user sees: one line, no traceback
    done = delivery("verify", tmp_path / target, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


# -- resume ------------------------------------------------------------------------------
def test_resume_of_a_finished_run_reports_it_without_running_anything(
        copy_of: Path, finished: tuple[Path, dict[str, Any]]) -> None:
    _, report = finished
    before = lines_of(copy_of)
    checkpoint_before = (copy_of / "checkpoint.json").read_bytes()
    done = delivery("resume", copy_of, "--json", cwd=copy_of.parent)
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout)
    assert {k: again[k] for k in ("run_id", "status", "failure_reason", "path")} \
        == {k: report[k] for k in ("run_id", "status", "failure_reason", "path")}
    context, expected = dict(again["context"]), dict(report["context"])
    # the large value is shown as its pointer, into the copy's own artifact store
    assert context.pop("build.blob")["artifact"].startswith(f"file://{copy_of.resolve()}/")
    expected.pop("build.blob")
    assert context == expected
    assert again["run_dir"] == str(copy_of.resolve())
    after = lines_of(copy_of)
    assert after == before  # not even a note: nothing happened
    assert not [e for e in events(copy_of)[len(before):] if e["type"] == "stage_started"]
    assert (copy_of / "checkpoint.json").read_bytes() == checkpoint_before
    # the text report says the same
    code, out, _ = cli("resume", copy_of)
    assert code == 0
    assert f"run {report['run_id']}: succeeded" in out
    assert " -> ".join(report["path"]) in out
    assert lines_of(copy_of) == before


@pytest.mark.slow
def test_resume_of_a_failed_run_reports_the_failure_again(tmp_path: Path) -> None:
    (tmp_path / "fail.dot").write_text(flow("""
        boom [type=script, script="echo no; exit 4"]
        start -> boom -> exit
    """), encoding="utf-8")
    (tmp_path / "none.json").write_text("{}", encoding="utf-8")
    run = tmp_path / "run"
    code, out, err = cli("run", tmp_path / "fail.dot", "--agent", "replay:none.json",
                         "--workspace", tmp_path, "--run-dir", run, "--json")
    assert code == 1, err
    first = json.loads(out)
    assert first["status"] == "failed" and "exited with code 4" in first["failure_reason"]
    before = lines_of(run)
    done = delivery("resume", run, "--json", cwd=tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout) == first
    assert lines_of(run) == before


@pytest.mark.parametrize("reference", ["no-such-run", "20990101T000000Z-abcdef", "a-file",
                                       "empty-dir"])
def test_resume_with_a_bad_run_reference_is_refused(tmp_path: Path, reference: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / ".delivery" / "runs").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("resume", reference, "--json")
    assert code == 2 and out == ""
    assert f"run {reference!r}" in err and "is neither a run directory nor a run id" in err


def test_resume_with_a_bad_run_reference_prints_one_line(tmp_path: Path) -> None:
    done = delivery("resume", "no-such-run", "--json", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("delivery resume: refused: run 'no-such-run'")
    assert "pass the run directory printed by delivery run" in done.stderr


def test_resume_and_inspect_find_a_run_by_its_id(workspace: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workspace)
    code, out, err = cli("run", "flow.dot", *RUN_ARGS, "--json")
    assert code == 0, err
    report = json.loads(out)
    run_id = report["run_id"]
    assert Path(report["run_dir"]) == (workspace / ".delivery" / "runs" / run_id).resolve()
    code, out, err = cli("resume", run_id, "--json")
    assert code == 0, err
    assert json.loads(out) == report
    code, out, _ = cli("inspect", run_id, "--json")
    assert code == 0 and json.loads(out)["run_id"] == run_id
    assert cli("verify", run_id)[0] == 0
    # elsewhere the id means nothing
    monkeypatch.chdir(tmp_path)
    assert cli("resume", run_id)[0] == 2


def _refused_resume(run: Path) -> str:
    before = lines_of(run)
    code, out, err = cli("resume", run, "--json")
    assert code == 2, out + err
    assert out == ""
    assert lines_of(run) == before
    return err


def _interrupted(copy_of: Path) -> None:
    """Make the copied run look as if it had been killed before `ship`."""
    data = json.loads((copy_of / "checkpoint.json").read_text(encoding="utf-8"))
    data.update(status="running", next_node="ship")
    del data["checksum"]  # an edit on purpose
    (copy_of / "checkpoint.json").write_text(json.dumps(data), encoding="utf-8")


def test_resume_refuses_a_run_whose_workflow_copy_was_edited(copy_of: Path) -> None:
    _interrupted(copy_of)
    copy = copy_of / "workflow.dot"
    copy.write_text(copy.read_text(encoding="utf-8").replace("ship", "deploy"),
                    encoding="utf-8")
    message = _refused_resume(copy_of)
    assert "workflow.dot was changed after the run started" in message
    assert "start a new run" in message


def test_resume_refuses_a_run_whose_log_was_edited(copy_of: Path) -> None:
    """Appending to it would hide the damage: the next checkpoint would vouch for the rest."""
    _interrupted(copy_of)
    lines = lines_of(copy_of)
    _edit_field(lines, _middle(lines))
    (copy_of / "events.jsonl").write_bytes(b"".join(lines))
    message = _refused_resume(copy_of)
    assert "has a broken event log: line " in message
    assert cli("verify", copy_of)[0] == 1  # still detectable


def test_resume_refuses_a_run_whose_log_lost_lines_the_checkpoint_recorded(
        copy_of: Path) -> None:
    _interrupted(copy_of)
    lines = lines_of(copy_of)
    del lines[-3:]
    (copy_of / "events.jsonl").write_bytes(b"".join(lines))
    message = _refused_resume(copy_of)
    assert "lines were cut off the end" in message
    assert cli("verify", copy_of)[0] == 1  # still detectable


def test_resume_refuses_a_checkpoint_whose_next_node_is_not_in_the_workflow(
        copy_of: Path) -> None:
    data = json.loads((copy_of / "checkpoint.json").read_bytes())
    data.update(status="running", next_node="gone")
    del data["checksum"]
    (copy_of / "checkpoint.json").write_text(json.dumps(data), encoding="utf-8")
    message = _refused_resume(copy_of)
    assert "next node 'gone' is not in the workflow" in message


@pytest.mark.parametrize("checkpoint", [
    "{}",
    '{"run_id": ',
    '{"run_id": "x", "next_node": "ship", "context": [], "initial": {}}',
    '{"run_id": "x", "next_node": "ship", "context": {}, "initial": {}, "bogus": 1, "path": 5}',
    '[1, 2]',
])
def test_a_malformed_or_torn_checkpoint_is_rebuilt_from_the_log(
        copy_of: Path, checkpoint: str, finished: tuple[Path, dict[str, Any]]) -> None:
    (copy_of / "checkpoint.json").write_text(checkpoint, encoding="utf-8")
    code, out, _ = cli("verify", copy_of)
    assert code == 1 and "checkpoint.json" in out
    code, out, err = cli("resume", copy_of, "--json")
    assert code == 0, err
    context, expected = json.loads(out)["context"], dict(finished[1]["context"])
    assert context.pop("build.blob")["bytes"] == expected.pop("build.blob")["bytes"]
    assert context == expected
    assert json.loads((copy_of / "checkpoint.json").read_bytes())["status"] == "succeeded"
    recovered = [e for e in events(copy_of) if e["type"] == "checkpoint_recovered"]
    assert len(recovered) == 1 and "rebuilt from the event log" in recovered[0]["problem"]
    assert cli("verify", copy_of)[0] == 0


def test_resume_refuses_a_corrupt_checkpoint_when_the_log_holds_no_state(
        copy_of: Path) -> None:
    (copy_of / "checkpoint.json").write_text('{"run_id": ', encoding="utf-8")
    first = lines_of(copy_of)[:1]  # run_started only
    (copy_of / "events.jsonl").write_bytes(b"".join(first))
    (copy_of / "events.tail").unlink()
    message = _refused_resume(copy_of)
    assert "corrupt checkpoint: not valid JSON" in message


def test_verify_cannot_tell_when_the_checkpoint_is_gone_and_the_log_was_cut(
        copy_of: Path) -> None:
    (copy_of / "checkpoint.json").unlink()
    lines = lines_of(copy_of)
    (copy_of / "events.jsonl").write_bytes(b"".join(lines[:-4]))
    code, out, _ = cli("verify", copy_of)
    assert code == 1
    assert "cannot tell" in out and "checkpoint.json is missing" in out


# -- inspect -----------------------------------------------------------------------------
def test_inspect_shows_path_stages_context_and_artifacts(
        finished: tuple[Path, dict[str, Any]]) -> None:
    run, report = finished
    code, out, err = cli("inspect", run)
    assert (code, err) == (0, "")
    assert out.startswith(f"run {report['run_id']}: succeeded\n")
    assert f"  path: {' -> '.join(report['path'])}\n" in out
    stages = re.findall(r"^    (\w+)#(\d+): (\w+)", out, flags=re.M)
    assert [node for node, _, _ in stages] == [n for n in report["path"] if n != "exit"]
    assert ("test", "2", "succeeded") in stages and ("review", "2", "succeeded") in stages
    assert "    audit#1: failed — script exited with code 3\n" in out
    assert "    shipped.tag = v1-3\n" in out
    assert "    summary = second, better cut\n" in out
    blob = re.search(r"^    build\.blob = (.*)$", out, flags=re.M)
    assert blob and re.fullmatch(r"file://\S+/values/build\.blob-\w+\.txt \(\d{6} bytes; "
                                 r"--full prints it\)", blob.group(1)), blob
    code, out, _ = cli("inspect", run, "--full")
    blob = re.search(r"^    build\.blob = (.*)$", out, flags=re.M)
    assert blob and blob.group(1).startswith("abcdefghij") and blob.group(1).endswith("...")
    artifacts = out.split("  artifacts:\n", 1)[1].split()
    assert len(artifacts) == 1 and re.fullmatch(r"artifacts/values/build\.blob-\w+\.txt",
                                               artifacts[0])


def test_inspect_json_has_the_same_facts(finished: tuple[Path, dict[str, Any]]) -> None:
    run, report = finished
    code, out, _ = cli("inspect", run, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["status"] == "succeeded" and data["next_node"] is None
    assert data["path"] == report["path"]
    assert data["context"] == report["context"]  # large values as pointer and size
    assert set(data["context"]["build.blob"]) == {"artifact", "bytes"}
    assert data["context"]["build.blob"]["bytes"] > 100 * 1024
    code, out, _ = cli("inspect", run, "--json", "--full")
    assert json.loads(out)["context"]["build.blob"].startswith("abcdefghij")
    assert data["outcomes"]["audit"] == "failed" and data["outcomes"]["ship"] == "succeeded"
    assert [(s["node"], s["attempt"], s["outcome"]) for s in data["stages"]][-3:] == [
        ("review", 2, "succeeded"), ("audit", 1, "failed"), ("ship", 1, "succeeded")]
    assert all(s["seconds"] >= 0 for s in data["stages"])
    assert len(data["artifacts"]) == 1
    assert (run / data["artifacts"][0]).is_file()
    assert data["run_dir"] == str(run)


def test_inspect_of_an_interrupted_run_shows_where_it_stopped(copy_of: Path) -> None:
    _interrupted(copy_of)
    code, out, _ = cli("inspect", copy_of, "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["status"], data["next_node"]) == ("running", "ship")
    code, out, _ = cli("inspect", copy_of)
    assert code == 0 and ": running" in out.splitlines()[0]
