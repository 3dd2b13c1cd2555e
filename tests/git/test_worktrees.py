"""delivery.git and probes.worktree with real repositories: the clone cache, the run's
worktrees (reuse, protection of unfinished work), diffs against the merge base, commits
and pushes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from git_helpers import commit_to, git, make_remote

from delivery.errors import GitError
from delivery.git import (
    BOT_EMAIL,
    BOT_NAME,
    GitRemote,
    add_worktree,
    cache_root,
    commit_all,
    diff_against_base,
    ensure_clone,
    header_environment,
    push_branch,
    remove_worktree,
)
from probes.worktree import diff_facts, worktree_facts

BRANCH = "delivery/t-1"


def origin_of(clone: Path, headers: tuple[str, ...] = ()) -> GitRemote:
    """The repository the test's clone was made from, as delivery would be told it."""
    return GitRemote(git(clone, "remote", "get-url", "origin"), headers)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return make_remote(tmp_path, "web", {"app.txt": "one\ntwo\n"})


@pytest.fixture
def clone(tmp_path: Path, remote: Path) -> Path:
    return ensure_clone(GitRemote(str(remote)), tmp_path / "cache")


def test_the_cache_is_outside_the_workspace_under_xdg_cache_home(tmp_path: Path) -> None:
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "delivery"
    assert cache_root({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "delivery"
    assert cache_root({}, tmp_path / "mine") == tmp_path / "mine"


def test_a_worktree_starts_on_the_runs_branch_from_the_base_head(
        tmp_path: Path, remote: Path, clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    made = add_worktree(clone, path, BRANCH, "main")
    assert not made.reused
    facts = worktree_facts("web", path)
    assert facts == {"web.worktree.exists": True, "web.worktree.dirty": False,
                     "web.worktree.branch": BRANCH,
                     "web.worktree.head": git(remote, "rev-parse", "main")}
    assert (path / "app.txt").read_text() == "one\ntwo\n"


def test_an_existing_worktree_of_the_run_is_reused(tmp_path: Path, clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    (path / "work.txt").write_text("in progress")
    again = add_worktree(clone, path, BRANCH, "main")
    assert again.reused and (path / "work.txt").read_text() == "in progress"


def test_a_folder_that_is_something_else_is_refused_and_left_alone(
        tmp_path: Path, clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    path.mkdir(parents=True)
    (path / "mine.txt").write_text("keep me")
    with pytest.raises(GitError, match="not empty"):
        add_worktree(clone, path, BRANCH, "main")
    assert (path / "mine.txt").read_text() == "keep me"


def test_an_unknown_base_branch_is_a_clear_error(tmp_path: Path, clone: Path) -> None:
    with pytest.raises(GitError, match="'trunk' does not exist"):
        add_worktree(clone, tmp_path / "ws" / "web", BRANCH, "trunk")


def test_uncommitted_work_is_kept_and_named(tmp_path: Path, clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    (path / "new.txt").write_text("not committed")
    kept = remove_worktree(clone, path, BRANCH, origin_of(clone))
    assert (kept.removed, kept.reason) == (False, "uncommitted changes")
    assert (path / "new.txt").read_text() == "not committed"


def test_unpushed_commits_are_kept_and_counted(tmp_path: Path, clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    (path / "new.txt").write_text("committed")
    commit_all(path, "local only")
    kept = remove_worktree(clone, path, BRANCH, origin_of(clone))
    assert (kept.removed, kept.reason) == (False, "1 unpushed commit(s)")
    assert path.is_dir()


def test_a_clean_pushed_worktree_is_removed_and_comes_back_from_the_pushed_branch(
        tmp_path: Path, remote: Path, clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    (path / "new.txt").write_text("done")
    commit_all(path, "work")
    pushed = push_branch(path, BRANCH, origin_of(clone))
    assert git(remote, "rev-parse", BRANCH) == pushed
    gone = remove_worktree(clone, path, BRANCH, origin_of(clone))
    assert gone.removed and not path.exists()
    # a resume (or another machine with a fresh cache) picks the pushed branch up again
    fresh = ensure_clone(GitRemote(str(remote)), tmp_path / "other-cache")
    back = add_worktree(fresh, path, BRANCH, "main")
    assert back.head == pushed and (path / "new.txt").read_text() == "done"


def _pushed_worktree(clone: Path, path: Path) -> Path:
    """`path`: the run's worktree, clean and with every commit pushed."""
    add_worktree(clone, path, BRANCH, "main")
    push_branch(path, BRANCH, origin_of(clone))
    return path


def test_a_worktree_holding_git_ignored_files_is_kept_and_names_them(
        tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "ignoring", {"app.txt": "one\n",
                                                ".gitignore": ".env\nbuild/\n*.log\n"})
    clone = ensure_clone(GitRemote(str(remote)), tmp_path / "cache")
    path = _pushed_worktree(clone, tmp_path / "ws" / "web")
    (path / ".env").write_text("API_TOKEN=mine\n")
    (path / "build").mkdir()
    (path / "build" / "cache.bin").write_text("slow to make")
    kept = remove_worktree(clone, path, BRANCH, origin_of(clone))
    assert (kept.removed, kept.reason) == (False, "git-ignored files: .env, build/")
    assert (path / ".env").read_text() == "API_TOKEN=mine\n"
    assert (path / "build" / "cache.bin").read_text() == "slow to make"


def test_many_ignored_files_are_named_a_few_and_counted(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "logs", {".gitignore": "*.log\n"})
    clone = ensure_clone(GitRemote(str(remote)), tmp_path / "cache")
    path = _pushed_worktree(clone, tmp_path / "ws" / "web")
    for n in range(8):
        (path / f"run-{n}.log").write_text("x")
    kept = remove_worktree(clone, path, BRANCH, origin_of(clone))
    assert not kept.removed
    assert kept.reason == ("git-ignored files: run-0.log, run-1.log, run-2.log, run-3.log, "
                           "run-4.log and 3 more")


def test_a_folder_that_is_a_symlink_out_of_the_workspace_is_not_followed(
        tmp_path: Path, clone: Path) -> None:
    elsewhere = _pushed_worktree(clone, tmp_path / "elsewhere" / "web")
    (tmp_path / "ws").mkdir()
    link = tmp_path / "ws" / "web"
    link.symlink_to(elsewhere, target_is_directory=True)
    kept = remove_worktree(clone, link, BRANCH, origin_of(clone),
                           workspace=tmp_path / "ws")
    assert not kept.removed and kept.reason.startswith("a symlink to ")
    assert link.is_symlink() and (elsewhere / "app.txt").read_text() == "one\ntwo\n"


def test_a_folder_under_a_symlinked_directory_out_of_the_workspace_is_not_followed(
        tmp_path: Path, clone: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    _pushed_worktree(clone, elsewhere / "web")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "nested").symlink_to(elsewhere, target_is_directory=True)
    kept = remove_worktree(clone, tmp_path / "ws" / "nested" / "web", BRANCH,
                           origin_of(clone),
                           workspace=tmp_path / "ws")
    assert not kept.removed and "outside the workspace" in kept.reason
    assert (elsewhere / "web" / "app.txt").is_file()


def test_a_workspace_reached_through_a_symlink_still_has_its_worktrees_removed(
        tmp_path: Path, clone: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    (tmp_path / "ws").symlink_to(real, target_is_directory=True)
    path = _pushed_worktree(clone, tmp_path / "ws" / "web")
    gone = remove_worktree(clone, path, BRANCH, origin_of(clone),
                           workspace=tmp_path / "ws")
    assert gone.removed and not (real / "web").exists()


def test_a_worktree_of_another_branch_is_never_removed(tmp_path: Path, clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, "delivery/other", "main")
    kept = remove_worktree(clone, path, BRANCH, origin_of(clone))
    assert not kept.removed and "not this run's worktree" in kept.reason and path.is_dir()


def test_the_diff_counts_everything_against_the_merge_base(tmp_path: Path, remote: Path,
                                                          clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    assert diff_facts("web", path, "origin/main")["web.diff.empty"] is True
    (path / "app.txt").write_text("one\nTWO\nthree\n")  # unstaged: +2 -1
    (path / "untracked.txt").write_text("a\nb\n")  # untracked: +2
    status_before = git(path, "status", "--porcelain")
    # the base moves on: its changes are not the run's
    commit_to(remote, "main", {"elsewhere.txt": "x\n" * 10})
    ensure_clone(GitRemote(str(remote)), tmp_path / "cache")
    stats = diff_against_base(path, "main")
    assert (stats.files, stats.insertions, stats.deletions) == (2, 4, 1)
    assert git(path, "status", "--porcelain") == status_before  # the index is untouched


def test_a_missing_worktree_reads_as_absent_and_empty(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert worktree_facts("web", missing)["web.worktree.exists"] is False
    assert diff_facts("web", missing, "origin/main")["web.diff.files"] == 0


def test_commits_use_the_bot_identity_when_git_has_none(
        tmp_path: Path, clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                 "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    (path / "n.txt").write_text("n")
    commit_all(path, "by the bot")
    assert git(path, "log", "-1", "--format=%an <%ae>") == f"{BOT_NAME} <{BOT_EMAIL}>"


def test_commits_use_gits_configured_identity(tmp_path: Path, clone: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    config = tmp_path / "gitconfig"
    config.write_text("[user]\n\tname = Ada\n\temail = ada@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    (path / "n.txt").write_text("n")
    commit_all(path, "by ada")
    assert git(path, "log", "-1", "--format=%an <%ae>") == "Ada <ada@example.com>"


def test_nothing_to_commit_makes_no_commit(tmp_path: Path, clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    assert commit_all(path, "nothing") is None


def test_push_headers_reach_no_file_and_no_error_message(tmp_path: Path, remote: Path,
                                                         clone: Path) -> None:
    secret = "Authorization: Bearer ghs_SECRETSECRET"
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    (path / "n.txt").write_text("n")
    commit_all(path, "work")
    push_branch(path, BRANCH, origin_of(clone, (secret,)))
    commit_to(remote, BRANCH, {"other.txt": "someone else pushed"})
    (path / "m.txt").write_text("m")
    commit_all(path, "more")
    with pytest.raises(GitError) as rejected:  # non-fast-forward
        push_branch(path, BRANCH, origin_of(clone, (secret,)))
    assert "SECRETSECRET" not in str(rejected.value)
    assert "rejected" in str(rejected.value) or "fetch first" in str(rejected.value)
    for where in (tmp_path / "cache", remote):
        for file in where.rglob("*"):
            if file.is_file():
                assert b"SECRETSECRET" not in file.read_bytes(), file


def test_headers_go_to_git_through_its_environment_for_the_url_only() -> None:
    env = header_environment(["Authorization: Basic abc"],
                             {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.x",
                              "GIT_CONFIG_VALUE_0": "y"}, url="https://h.example/o/r.git")
    assert env == {"GIT_CONFIG_COUNT": "2",
                   "GIT_CONFIG_KEY_1": "http.https://h.example/o/r.git.extraHeader",
                   "GIT_CONFIG_VALUE_1": "Authorization: Basic abc"}


def test_a_forges_git_remote_keeps_the_callers_own_git_config_entries() -> None:
    from delivery.forges.base import GitRemote
    remote = GitRemote("https://example.invalid/o/r.git", ("Authorization: Basic abc",))
    env = remote.git_environment({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.x",
                                  "GIT_CONFIG_VALUE_0": "y"})
    assert env == header_environment(["Authorization: Basic abc"],
                                     {"GIT_CONFIG_COUNT": "1"}, url=remote.url)
    assert "GIT_CONFIG_KEY_0" not in env and env["GIT_CONFIG_COUNT"] == "2"


def _children_running(word: str) -> list[str]:
    """Command lines of this process's children that mention `word` (Linux /proc)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines()
                          if ":\t" in line)
            cmdline = (status.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if fields.get("PPid", "").strip() == str(os.getpid()) and word in cmdline:
            found.append(cmdline)
    return found


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux /proc")
def test_no_git_process_outlives_an_operation(tmp_path: Path, remote: Path,
                                              clone: Path) -> None:
    path = tmp_path / "ws" / "web"
    add_worktree(clone, path, BRANCH, "main")
    (path / "n.txt").write_text("n")
    worktree_facts("web", path)
    diff_against_base(path, "main")
    commit_all(path, "work")
    push_branch(path, BRANCH, origin_of(clone))
    remove_worktree(clone, path, BRANCH, origin_of(clone))
    assert _children_running("git") == []
