"""Saves of the state ref are incremental (SPEC §13: each save costs the same early and
late): the trees are built in memory, settled stage folders are not listed again, the
event log is saved in fixed parts. Real git checks every tree and commit."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_helpers import bare, git

from delivery.git.runref import RunRef
from delivery.git.runtree import PART_SIZE


def stage(run_dir: Path, node: str, attempt: int = 1) -> str:
    """A stage's folder, written a second ago (a file changed within the file system's
    time granularity of a save is hashed again at the next save, as git does)."""
    folder = run_dir / node / str(attempt)
    folder.mkdir(parents=True)
    for name in ("prompt.md", "response.md", "status.json"):
        (folder / name).write_text(f"{name} of {node}\n", encoding="utf-8")
        past = time.time() - 1
        os.utime(folder / name, (past, past))
    return f"{node}/{attempt}"


def git_tree(run_dir: Path, tmp_path: Path) -> str:
    """The tree git itself writes for `run_dir` (a fresh index, every file added)."""
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp_path / "check-index"),
           "GIT_WORK_TREE": str(run_dir), "GIT_DIR": str(tmp_path / "check.git")}
    if not (tmp_path / "check.git").exists():
        subprocess.run(["git", "init", "--quiet", "--bare", str(tmp_path / "check.git")],
                       check=True)
    (tmp_path / "check-index").unlink(missing_ok=True)
    subprocess.run(["git", "add", "-A", "."], cwd=run_dir, env=env, check=True)
    return subprocess.run(["git", "write-tree"], env=env, capture_output=True, check=True,
                          text=True).stdout.strip()


def test_a_save_writes_the_tree_git_writes_for_the_same_files(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    for node in ("b", "a", "a-b", "a.b", "ab"):  # git's order: a subtree sorts as "name/"
        stage(run_dir, node)
    (run_dir / "run.json").write_text("{}", encoding="utf-8")
    ref = RunRef(str(bare(tmp_path / "state.git")), tmp_path / "scratch.git")
    first = ref.commit(run_dir, None, "save")
    assert git(tmp_path / "scratch.git", "rev-parse", f"{first}^{{tree}}") == \
        git_tree(run_dir, tmp_path)
    (run_dir / "a" / "1" / "prompt.md").unlink()
    (run_dir / "b" / "1" / "extra.txt").write_text("more", encoding="utf-8")
    second = ref.commit(run_dir, first, "save")
    assert git(tmp_path / "scratch.git", "rev-parse", f"{second}^{{tree}}") == \
        git_tree(run_dir, tmp_path)
    git(tmp_path / "scratch.git", "fsck", "--strict", "--no-dangling")


def test_a_save_lists_only_the_open_folders_however_many_stages_are_over(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    ref = RunRef(str(bare(tmp_path / "state.git")), tmp_path / "scratch.git")
    head = ref.commit(run_dir, None, "start") if run_dir.mkdir() is None else ""
    listed = []
    for n in range(120):
        head = ref.commit(run_dir, head, f"stage {n}", settle=[stage(run_dir, f"s{n}")])
        listed.append(ref.last_scans)
    # the root, the new stage's node folder and its attempt folder: never the past stages
    assert max(listed[10:]) == listed[10] <= 3
    assert git(tmp_path / "scratch.git", "rev-parse", f"{head}^{{tree}}") == \
        git_tree(run_dir, tmp_path)


def test_a_file_changed_in_a_folder_that_is_not_settled_is_saved(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "artifacts").mkdir(parents=True)
    (run_dir / "artifacts" / "a.txt").write_text("one", encoding="utf-8")
    ref = RunRef(str(bare(tmp_path / "state.git")), tmp_path / "scratch.git")
    first = ref.commit(run_dir, None, "save", settle=[stage(run_dir, "s")])
    (run_dir / "artifacts" / "a.txt").write_text("two, longer", encoding="utf-8")
    second = ref.commit(run_dir, first, "save")
    assert ref.read_file(second, "artifacts/a.txt") == b"two, longer"


def test_the_event_log_is_saved_in_parts_and_a_fetch_puts_it_back_whole(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = run_dir / "events.jsonl"
    lines = b"".join(b'{"seq": %d, "type": "stage_started"}\n' % n for n in range(6000))
    log.write_bytes(lines[:PART_SIZE * 2 + 100])
    state = bare(tmp_path / "state.git")
    ref = RunRef(str(state), tmp_path / "scratch.git")
    first = ref.commit(run_dir, None, "save")
    log.write_bytes(lines)  # appended
    second = ref.commit(run_dir, first, "save")
    scratch = tmp_path / "scratch.git"
    names = git(scratch, "ls-tree", "--name-only", f"{second}:events.jsonl.parts").split()
    assert names == [f"{n:06d}" for n in range(len(lines) // PART_SIZE + 1)]
    # the closed parts are the same objects: a push sends only the new ones
    for name in ("000000", "000001"):
        assert git(scratch, "rev-parse", f"{first}:events.jsonl.parts/{name}") == \
            git(scratch, "rev-parse", f"{second}:events.jsonl.parts/{name}")
    assert ref.push("r", second, None)
    elsewhere = RunRef(str(state), tmp_path / "other" / "scratch.git")
    elsewhere.fetch(["r"])
    elsewhere.extract(second, tmp_path / "fetched")
    assert (tmp_path / "fetched" / "events.jsonl").read_bytes() == lines
    assert not (tmp_path / "fetched" / "events.jsonl.parts").exists()


names = st.sampled_from(["a", "b", "a.b", "a-b", "s1/1/x", "s1/1/y", "s1/2/x", "s2/1/x",
                         "artifacts/big", "deep/er/still/f"])
operations = st.lists(st.tuples(st.sampled_from(["write", "delete", "save"]), names,
                                st.binary(max_size=40)), min_size=1, max_size=12)


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "10")), deadline=None,
          derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_after_any_writes_and_deletes_each_save_is_the_tree_git_writes(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str, bytes]]) -> None:
    tmp_path = tmp_path_factory.mktemp("saves")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ref = RunRef(str(bare(tmp_path / "state.git")), tmp_path / "scratch.git")
    head = None
    for operation, name, data in [*steps, ("save", "", b"")]:
        path = run_dir / name
        if operation == "write":
            if any(parent.is_file() for parent in path.parents):
                continue
            if path.is_dir():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)  # same size rewrites included: caught as racy
        elif operation == "delete" and path.is_file():
            path.unlink()
        elif operation == "save":
            head = ref.commit(run_dir, head, "save")
            assert git(tmp_path / "scratch.git", "rev-parse", f"{head}^{{tree}}") == \
                git_tree(run_dir, tmp_path)
