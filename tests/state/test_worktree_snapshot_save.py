"""A folder's worktree snapshot on the state ref (SPEC §13) is replaced whole by a later
save: a patch of unpublished work saved once (a pause before publish, a fan-out) must not
outlive its publication, or the next job re-creates the worktree at the new base and
applies the published change again (`git apply`: already exists)."""

from __future__ import annotations

from pathlib import Path

from state_helpers import bare, git, plant, started, state_at

STALE_PATCH = b"""diff --git a/CHANGES.md b/CHANGES.md
new file mode 100644
--- /dev/null
+++ b/CHANGES.md
@@ -0,0 +1 @@
+- api: changed
"""


def test_a_save_whose_snapshot_has_no_patch_drops_the_patch_saved_before(
        tmp_path: Path) -> None:
    state_repo = bare(tmp_path / "state.git")
    run_id = started(tmp_path, state_repo).run_id
    meta = b'{"base": "%s", "branch": "b", "patch_bytes": 40}' % (b"0" * 40)
    plant(state_repo, run_id, {".worktrees/api.json": meta, ".worktrees/api.patch": STALE_PATCH,
                               ".worktrees/web.json": meta, ".worktrees/web.patch": STALE_PATCH})
    session = state_at(state_repo, tmp_path / "job").session(run_id, "job-2")
    session.fetch(tmp_path / "job" / "run")
    # this job published api's change: its snapshot now is a base without a patch
    session.worktree_files = {".worktrees/api.json": b'{"base": "%s", "branch": "b", '
                              b'"patch_bytes": 0}' % (b"1" * 40)}
    session.release(tmp_path / "job" / "run", "paused")
    saved = git(state_repo, "ls-tree", "-r", "--name-only", f"refs/delivery/runs/{run_id}")
    assert ".worktrees/api.patch" not in saved.split()
    # a folder this job did not snapshot keeps what was saved
    assert {".worktrees/web.json", ".worktrees/web.patch"} <= set(saved.split())
