"""`foreach="folders"` (SPEC §8.1): one run of a stage per folder, in its worktree, with its
own session, its keys per folder and the node's outcome from its folders'."""

from __future__ import annotations

import json
from pathlib import Path

from engine_helpers import Ran, reply, run_dot

FOLDERS = ("web", "api", "cli")


def _folders(tmp_path: Path, names: tuple[str, ...] = FOLDERS) -> dict[str, str]:
    repos = {}
    for name in names:
        folder = tmp_path / "repos" / name
        folder.mkdir(parents=True)
        (folder / "NAME").write_text(name, encoding="utf-8")
        repos[name] = str(folder)
    return repos


def _run(tmp_path: Path, body: str, **kwargs: object) -> Ran:
    dot = ("digraph t {\n start [shape=Mdiamond]; exit [shape=Msquare]\n" + body + "\n}\n")
    work = tmp_path / "ws"
    work.mkdir()
    return run_dot(work, dot, repos=_folders(tmp_path), **kwargs)  # type: ignore[arg-type]


def test_a_foreach_script_runs_in_each_folder_and_writes_its_facts_per_folder(
        tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      look [type=script, foreach="folders", facts="seen",
            script="echo seen=$(cat NAME)-{{ folder.name }} >> $DELIVERY_FACTS"]
      start -> look -> exit""")
    assert ran.status == "succeeded"
    for name in FOLDERS:
        assert ran.context[f"{name}.seen"] == f"{name}-{name}"
        assert ran.context[f"{name}.outcome"] == "succeeded"
    assert "seen" not in ran.context
    assert ran.context["look.failed_folders"] == "[]"
    assert ran.context["look.failed"] is False


def test_some_folders_failing_is_partial_success_naming_them(tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      check [type=script, foreach="folders", script="test $(cat NAME) != api"]
      start -> check
      check -> exit [condition="outcome=partial_success"]""")
    assert ran.status == "succeeded"
    assert json.loads(ran.context["check.failed_folders"]) == ["api"]
    assert ran.context["api.outcome"] == "failed"
    assert "exited with code 1" in ran.context["api.failure_reason"]
    assert ran.context["web.failure_reason"] == ""


def test_every_folder_failing_fails_the_stage(tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      check [type=script, foreach="folders", script="exit 3"]
      start -> check -> exit""")
    assert ran.status == "failed"
    assert "every folder failed" in ran.outcome.failure_reason
    assert json.loads(ran.context["check.failed_folders"]) == list(FOLDERS)


def test_each_folder_has_its_own_agent_session_and_outputs(tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      implement [prompt="Change {{ folder.name }} only", outputs="summary:text",
                 foreach="folders"]
      start -> implement -> exit""",
               replies={"implement": [reply({"summary": "changed"})]})
    assert ran.status == "succeeded"
    asked = {node: prompt for node, prompt in ran.backend.prompts}
    assert sorted(asked) == sorted(f"implement@{name}" for name in FOLDERS)
    for name in FOLDERS:
        assert f"Change {name} only" in asked[f"implement@{name}"]
        assert ran.context[f"{name}.summary"] == "changed"
    assert "summary" not in ran.context
    assert not [key for key in ran.context if "response" in key]  # the replies: stage files


def test_a_folders_prompt_tells_nothing_of_the_other_folders(tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      mark [type=script, foreach="folders", facts="secret_note",
            script="echo secret_note=note-of-$(cat NAME) >> $DELIVERY_FACTS"]
      implement [prompt="Work on {{ folder.name }}", outputs="summary:text",
                 foreach="folders"]
      start -> mark -> implement -> exit""",
               replies={"implement": [reply({"summary": "done"})]})
    assert ran.status == "succeeded"
    for node, prompt in ran.backend.prompts:
        folder = node.split("@")[1]
        assert f"note-of-{folder}" in prompt
        assert all(f"note-of-{other}" not in prompt for other in FOLDERS if other != folder)


def test_only_selects_the_folders_a_stage_runs_for(tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      look [type=script, foreach="folders", facts="kind",
            script="k=fine; test $(cat NAME) = web && k=broken; echo kind=$k >> $DELIVERY_FACTS"]
      fix [type=script, foreach="folders", only="folder.kind=broken", facts="fixed",
           script="echo fixed=yes >> $DELIVERY_FACTS"]
      start -> look -> fix -> exit""")
    assert ran.status == "succeeded"
    assert ran.context["web.fixed"] == "yes"
    assert "api.fixed" not in ran.context and "cli.fixed" not in ran.context
    assert ran.context["api.outcome"] == "succeeded"  # kept from `look`


def test_a_stage_selecting_no_folder_succeeds_without_running(tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      fix [type=script, foreach="folders", only="folder.name=nobody", script="exit 1"]
      start -> fix -> exit""")
    assert ran.status == "succeeded"
    assert ran.context["fix.failed_folders"] == "[]"


def test_max_retries_applies_per_folder(tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      flaky [type=script, foreach="folders", max_retries=1,
             script="test -e ran || { touch ran; exit 1; }"]
      start -> flaky -> exit""")
    assert ran.status == "succeeded"
    for name in FOLDERS:
        assert ran.stage_file(f"flaky@{name}", "status.json", attempt=2).exists()


def test_folder_runs_keep_their_stage_files_apart(tmp_path: Path) -> None:
    ran = _run(tmp_path, """
      say [type=script, foreach="folders", script="echo hello from $(cat NAME)"]
      start -> say -> exit""")
    for name in FOLDERS:
        said = ran.stage_file(f"say@{name}", "stdout.txt").read_text(encoding="utf-8")
        assert said.strip() == f"hello from {name}"
