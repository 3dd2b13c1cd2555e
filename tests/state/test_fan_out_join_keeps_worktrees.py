"""The worker that continues a fanned-out run applies every chunk's results to the run's
worktrees at the workspace's folder paths (SPEC §13 "Fan-out across runners"). On a
self-hosted runner such a path may hold another run's worktree, with a person's files in it:
that worktree is never deleted — the join stops and says how to free the folder."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

from git_helpers import make_remote
from state_helpers import bare

from delivery.cli.main import main

FOLDERS = ["f01", "f02"]
FLOW = """digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  setup [type=worktree_add]
  work [type=script, foreach="folders", max_parallel=1, script="echo changed >> app.txt"]
  start -> setup -> work -> exit
}
"""


def _cli(argv: list[str]) -> tuple[int, dict[str, object]]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--json", "--quiet"], out, err)
    return code, json.loads(out.getvalue()) if out.getvalue().strip() else {"err": err.getvalue()}


def _work(run_id: str, chunk: int, state_repo: Path, runner: Path) -> tuple[int, dict[str, object]]:
    return _cli(["work", run_id, "--chunk", str(chunk), "--state", str(state_repo),
                 "--workspace", str(runner), "--cache", str(runner / "cache")])


def test_the_joining_worker_never_deletes_another_runs_worktree_at_a_folder_path(
        tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    (work / "flow.dot").write_text(FLOW, encoding="utf-8")
    repos = []
    (tmp_path / "remotes").mkdir()
    (tmp_path / "others").mkdir()
    for name in FOLDERS:
        remote = make_remote(tmp_path / "remotes", name, {"app.txt": "v1\n"})
        repos += ["--repo", f"{name}={remote}"]
    state_repo = bare(tmp_path / "state.git")
    code, shown = _cli(["run", str(work / "flow.dot"), "--workspace", str(work), *repos,
                        "--state", str(state_repo), "--max-runners", "2"])
    assert (code, shown.get("reason")) == (3, "fan_out"), shown
    run_id = str(shown["run_id"])
    assert _work(run_id, 1, state_repo, tmp_path / "runner-1")[1]["status"] == "chunk_done"
    # the joining runner keeps, at f01's path, another run's worktree with a person's notes
    joiner = tmp_path / "runner-2"
    other = make_remote(tmp_path / "others", "other", {"x.txt": "x\n"})
    clone = tmp_path / "others" / "clone"
    subprocess.run(["git", "clone", "-q", str(other), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "worktree", "add", "-q", "-b", "delivery/other",
                    str(joiner / "f01")], check=True)
    notes = joiner / "f01" / "notes.txt"
    notes.write_text("a person's notes\n", encoding="utf-8")
    code, joined = _work(run_id, 2, state_repo, joiner)
    assert notes.read_text(encoding="utf-8") == "a person's notes\n"  # never deleted
    assert code != 0, joined
    reason = str(joined.get("failure_reason") or joined.get("err"))
    assert "another" in reason and "f01" in reason, joined
