"""Local git calls in a repository an agent could write (SPEC §14: "A worktree's git
configuration is not trusted").

A run's worktree shares the configuration and the hooks of its repository (the clone
cache), and the agent working in it can write both: a `post-commit` or
`reference-transaction` hook, `core.hooksPath`, `core.fsmonitor`, a signing program, a
`filter`, `diff` or `merge` driver named by a `.gitattributes`. Each would run — outside
the agent's stage, when delivery commits, reads the status or moves a ref. So every local
git call of delivery and of the probes runs

- with no hook (`core.hooksPath=/dev/null`), no fsmonitor, no signing;
- with the drivers the repository's own configuration defines (`local` and `worktree`
  scope, includes followed) made inert: filters pass content through, a textconv is `cat`,
  a merge driver is git's own text merge. The person's global and system configuration
  (git-lfs' filter, say) stays in force;
- without the environment's secrets (variables named like `*TOKEN`, `*KEY`, `*SECRET`,
  `*PASSWORD`): a local call needs none.

The overrides travel as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`, which outrank every file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

# (key, value) always set
_FIXED = (("core.hooksPath", os.devnull), ("core.fsmonitor", "false"),
          ("commit.gpgSign", "false"), ("tag.gpgSign", "false"))
# the last part of a driver key -> what makes it inert
_INERT = {"clean": "", "smudge": "", "process": "", "required": "false",
          "textconv": "cat", "command": "", "driver": "git merge-file --marker-size=%L %A %O %B"}
_DRIVERS = r"^(filter|diff|merge)\..+\.(clean|smudge|process|required|textconv|command|driver)$"
_UNTRUSTED_SCOPES = ("local", "worktree")
_SECRET_SUFFIXES = ("TOKEN", "KEY", "SECRET", "PASSWORD")
# a caller's repository variables would point the call at another repository
_REPOSITORY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
                         "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES")


def _without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in environ.items()
            if not name.upper().endswith(_SECRET_SUFFIXES)
            and name not in _REPOSITORY_VARIABLES}


def config_entries(environ: Mapping[str, str], pairs: Sequence[tuple[str, str]]
                   ) -> dict[str, str]:
    """The GIT_CONFIG_COUNT/KEY_n/VALUE_n variables that add `pairs` to one git process's
    configuration after the entries already in `environ` (which stay in force)."""
    try:
        first = int(environ.get("GIT_CONFIG_COUNT", "0") or 0)
    except ValueError:
        first = 0
    entries = {"GIT_CONFIG_COUNT": str(first + len(pairs))}
    for offset, (key, value) in enumerate(pairs):
        entries[f"GIT_CONFIG_KEY_{first + offset}"] = key
        entries[f"GIT_CONFIG_VALUE_{first + offset}"] = value
    return entries


def repository_drivers(path: Path, environ: Mapping[str, str]) -> list[str]:
    """The filter, diff and merge driver keys the repository at `path` defines itself."""
    done = subprocess.run(["git", "config", "--includes", "--show-scope", "--get-regexp",
                           _DRIVERS], cwd=path, env=dict(environ), capture_output=True,
                          check=False)
    keys = []
    for line in done.stdout.decode(errors="replace").splitlines():
        scope, _, rest = line.partition("\t")
        if scope in _UNTRUSTED_SCOPES:
            keys.append(rest.split(" ", 1)[0])
    return keys


def git_environment(path: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a local git call in the repository at `path` (see the module
    doc); `base`: the caller's (default this process's), its own GIT_CONFIG_* kept."""
    environ = _without_secrets(os.environ if base is None else base)
    pairs = list(_FIXED)
    pairs += [(key, _INERT[key.rsplit(".", 1)[1]]) for key in repository_drivers(path, environ)]
    environ.update(config_entries(environ, pairs))
    return environ


def run_git(path: Path, *args: str, env: Mapping[str, str] | None = None,
            stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """`git <args>` in `path` with `git_environment`, plus `env` (GIT_INDEX_FILE, an
    identity); never raises for git's exit status."""
    environ = git_environment(path)
    environ.update(env or {})
    return subprocess.run(["git", *args], cwd=path, env=environ, input=stdin,
                          capture_output=True, check=False)


__all__ = ["config_entries", "git_environment", "repository_drivers", "run_git"]
