"""Observing the outside world: pull requests, review threads, diffs, worktrees (SPEC §7)."""
