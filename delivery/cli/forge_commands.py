"""`delivery probe` (multi-repository PR status) and `delivery review` (local-forge reviews)."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from delivery.cli.run_lookup import find_run
from delivery.engine.run_inputs import parse_assignments
from delivery.errors import DeliveryError, RunRefused
from delivery.forges.local import LocalForge
from delivery.forges.select import forge_kind, is_github_location, local_settings, open_forge
from delivery.store.runstore import RunDirectory
from probes.evidence import PrQuery
from probes.facts import pr_facts
from probes.worktree import diff_facts, worktree_facts, worktree_state

EXIT_OK, EXIT_FAILED = 0, 1


@dataclass(frozen=True)
class Target:
    folder: str
    repository: str
    number: int | None = None
    branch: str | None = None


def parse_location(folder: str, location: str, base: Path) -> Target:
    """`LOC`, `LOC#12` or `LOC@branch` (a path that exists as written is taken whole)."""
    if (base / location).exists() or is_github_location(location, base):
        return Target(folder, location)
    number = re.fullmatch(r"(.+)#([0-9]+)", location)
    if number:
        return Target(folder, number.group(1), number=int(number.group(2)))
    head, at, branch = location.rpartition("@")
    if at and head and branch:
        return Target(folder, head, branch=branch)
    return Target(folder, location)


def _local_path(target: Target, base: Path) -> Path | None:
    path = Path(target.repository).expanduser()
    path = path if path.is_absolute() else base / path
    return path.resolve() if path.exists() else None


def cmd_probe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    base = Path.cwd()
    targets = [parse_location(name, loc, base)
               for name, loc in parse_assignments(args.repo, "--repo").items()]
    kind = forge_kind([t.repository for t in targets], args.forge, base)
    configured, approvals = local_settings(base)
    forge = open_forge(kind, checks={**configured, **parse_assignments(args.check, "--check")},
                       required_approvals=approvals)
    queries: list[PrQuery] = []
    worktrees: dict[str, Path] = {}
    for target in targets:
        repository, branch = target.repository, target.branch
        path = _local_path(target, base) if kind == "local" else None
        if path is not None:
            repository = str(path)
            state = worktree_state(path)
            if state.exists:
                worktrees[target.folder] = path
                if target.number is None and branch is None:
                    branch = state.branch or None  # a working tree: the PR of its branch
        queries.append(PrQuery(target.folder, repository, target.number, branch))
    observed = pr_facts(forge.pull_requests(queries), [t.folder for t in targets])
    facts: dict[str, Any] = dict(observed.facts)
    for query in queries:
        path = worktrees.get(query.folder)
        if path is None:
            continue
        facts.update(worktree_facts(query.folder, path))
        try:
            base_branch = forge.default_branch(query.repository)
            facts.update(diff_facts(query.folder, path, base_branch))
        except (DeliveryError, ValueError) as problem:
            print(f"delivery probe: folder '{query.folder}': no diff: {problem}", file=err)
    if args.json:
        print(json.dumps(facts, indent=2, sort_keys=True), file=out)
    else:
        for key in sorted(facts, key=lambda k: (k.count(".") < 2, k)):
            print(f"{key} = {_shown(facts[key])}", file=out)
    for failure in observed.failures:
        print(f"delivery probe: folder '{failure.folder}': {failure.reason}", file=err)
    return EXIT_FAILED if observed.failures else EXIT_OK


def _shown(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, bool) else str(value)
    return text if len(text) <= 200 else text[:197] + "..."


def cmd_review(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    where, hash_, number_text = args.target.rpartition("#")
    if not hash_ or not number_text.isdigit() or not where:
        raise RunRefused(f"target {args.target!r}", "does not name a pull request",
                         "write FOLDER#N or PATH#N")
    number = int(number_text)
    repos = parse_assignments(args.repo, "--repo")
    if args.run:
        recorded = RunDirectory.open(find_run(args.run)).read_run_info().repos
        repos = {**recorded, **repos}
    repository = repos.get(where, where)
    base = Path.cwd()
    if is_github_location(repository, base):
        raise RunRefused(f"target {args.target!r}", "is a GitHub pull request",
                         "review it on GitHub; delivery review serves the local forge")
    forge = LocalForge()
    if args.approve:
        forge.review(repository, number, "APPROVED", args.body, author=args.author)
        print(f"{args.target}: approved", file=out)
    elif args.request_changes is not None:
        forge.review(repository, number, "CHANGES_REQUESTED", args.request_changes,
                     author=args.author)
        print(f"{args.target}: changes requested", file=out)
    elif args.comment is not None:
        thread = forge.comment(repository, number, args.comment, path=args.path,
                               line=args.line, author=args.author)
        print(f"{args.target}: thread {thread} opened", file=out)
    else:
        forge.resolve_thread(repository, number, args.resolve)
        print(f"{args.target}: thread {args.resolve} resolved", file=out)
    return EXIT_OK
