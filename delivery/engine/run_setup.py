"""What a run is checked against before its first stage, and what it starts from: the
initial context from the goal and inputs, the folders' setup for run.json, and the
refusals of what would otherwise fail a folder stage after the agent has worked (SPEC §12).
Refusals name the command line's options or RunRequest's fields (`Spelling`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delivery.engine.run_request import RunRequest
from delivery.engine.world import World
from delivery.errors import RunRefused
from delivery.forges.select import forge_kind, is_github_location, local_settings
from delivery.git import run_worktree_around
from delivery.lang.declarations import IDENTIFIER, reserved_reason
from delivery.lang.model import NodeType, Workflow
from delivery.store.records import GateMode
from delivery.validation.validator import reads_goal

# Stages that reach the forge or the folders' git repositories.
FORGE_TYPES = frozenset({NodeType.PROBE, NodeType.PUBLISH, NodeType.MERGE, NodeType.RESPOND,
                         NodeType.WORKTREE_ADD, NodeType.WORKTREE_REMOVE})


@dataclass(frozen=True)
class Spelling:
    """How a refusal tells the caller what to pass: the command line's options, or, for a
    library caller, RunRequest's fields (a library user has no --input to pass)."""

    cli: bool = False

    def goal(self) -> str:
        return "--goal TEXT" if self.cli else "RunRequest(goal=...)"

    def input(self, name: str) -> str:
        return f"--input {name}=VALUE" if self.cli else f"RunRequest(inputs={{{name!r}: ...}})"

    def repo(self, name: str = "NAME", location: str = "LOCATION") -> str:
        return f"--repo {name}={location}" if self.cli else f"repos[{name!r}]={location!r}"

    def option(self, option: str, field: str) -> str:
        return option if self.cli else f"RunRequest.{field}"


def gate_mode(value: object, subject: str) -> GateMode:
    """RunRequest.gates as the vocabulary has it (a library caller may pass its text); a
    value that is none of them is refused before anything is written (a run.json holding
    it could not be resumed)."""
    if isinstance(value, str) and value in GateMode.__members__.values():
        return GateMode(value)
    listed = ", ".join(mode.value for mode in GateMode)
    raise RunRefused(subject, f"{value!r} is not a gate mode", f"use one of {listed}")


def max_parallel_option(value: object, subject: str) -> int | None:
    """`--max-parallel` (RunRequest.max_parallel, the Action's `max-parallel`): how many
    folders a stage works on at once (SPEC §8.1) as a whole number of 1 or more, given as
    a number or its text; None (or "") when not given. Anything else is refused before
    anything is written."""
    if value is None or value == "":
        return None
    number: object = value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    if isinstance(number, int) and not isinstance(number, bool) and number >= 1:
        return number
    raise RunRefused(subject, f"{value!r} is not a whole number of 1 or more",
                     "give how many folders a stage may work on at once, e.g. 4 "
                     "(the default is 8)")


# GitHub's matrix limit: a fan-out never makes more chunks than one matrix may hold
MAX_CHUNKS = 256


def max_runners_option(value: object, subject: str) -> int | None:
    """`--max-runners` (the Action's `max-runners`): how many worker jobs a foreach stage
    may be fanned out to in event mode, a whole number of 1 or more (above 256 it is
    256, GitHub's matrix limit); None when not given."""
    if value is None or value == "":
        return None
    number: object = value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    if isinstance(number, int) and not isinstance(number, bool) and number >= 1:
        return min(number, MAX_CHUNKS)
    raise RunRefused(subject, f"{value!r} is not a whole number of 1 or more",
                     "give how many worker jobs a foreach stage may spread over, e.g. 20 "
                     "(1, the default, runs it on this job alone)")


def initial_context(workflow: Workflow, goal: str | None, inputs: Mapping[str, str],
                    spelling: Spelling = Spelling()) -> dict[str, Any]:
    """The context a run starts with, or RunRefused naming the input that is wrong."""
    declared = {decl.name: decl for decl in workflow.inputs}
    for name in inputs:
        if name not in declared:
            listed = ", ".join(declared) or "none"
            raise RunRefused(f"input '{name}'", "is not declared by the workflow",
                             f"declared inputs: {listed}; declare it in inputs= or drop it")
    defaults = {d.name: d.value for d in workflow.defaults}
    resolved_goal = goal if goal else defaults.get("goal") or workflow.goal
    if not resolved_goal and reads_goal(workflow):  # otherwise empty, as in Attractor
        raise RunRefused("goal", "the run has no goal, and the workflow reads it",
                         f"pass {spelling.goal()}, or set goal= or defaults=\"goal='...'\" "
                         "in the graph")
    values: dict[str, Any] = {"goal": resolved_goal}
    for name, attr in workflow.attrs.items():
        values[f"graph.{name}"] = attr.text
    values["graph.goal"] = workflow.goal or resolved_goal
    for name, decl in declared.items():
        if name in inputs:
            value = inputs[name]
        elif name in defaults:
            value = defaults[name]
        elif decl.optional:
            value = ""
        else:
            raise RunRefused(f"input '{name}'", "is required and was not given",
                             f"pass {spelling.input(name)} or give it a default")
        values[f"inputs.{name}"] = value
        values[name] = value
    return values


@dataclass(frozen=True)
class FolderSetup:
    """What run.json records about the folders: the forge, their repositories on it
    (`repos`), their working directories (`folders`), the local check commands and the
    approvals a local merge needs."""

    forge: str  # "local" | "github"
    repos: dict[str, str]
    folders: dict[str, str]
    checks: dict[str, str]
    required_approvals: int = 0


def folder_setup(request: RunRequest, workflow: Workflow, workspace: Path) -> FolderSetup:
    """What run.json records about the folders: their repositories on the forge (`repos`),
    their working directories (`folders`), the forge and the local check commands.

    A folder works in `<workspace>/<name>` (where `worktree_add` puts it); a workflow that
    creates no worktrees works in a local LOCATION itself (a folder given as a path)."""
    kind = forge_kind(request.repos.values(), request.forge or None, workspace)
    spelling = Spelling(request.cli)
    creates_worktrees = bool(workflow.nodes_of(NodeType.WORKTREE_ADD))
    repos: dict[str, str] = {}
    folders: dict[str, str] = {}
    for name, location in request.repos.items():
        _refuse_folder_name(name, spelling.repo(name, location))
        if kind == "github":
            if not is_github_location(location, workspace):
                local = spelling.option("--forge local", 'forge="local"')
                raise RunRefused(spelling.repo(name, location), "is not owner/name on GitHub, "
                                 "and a run uses one forge for all its folders",
                                 f"give every folder as owner/name, or use {local} with "
                                 "local paths")
            repos[name] = location
            folders[name] = str(workspace / name)
            continue
        path = local_location(name, location, workspace, spelling)
        repos[name] = str(path)
        folders[name] = str(workspace / name if creates_worktrees else path)
    _refuse_misplaced(workspace, request.run_dir, folders, spelling)
    configured, approvals = local_settings(workspace)
    checks = {**configured, **request.checks}
    unknown = sorted(set(checks) - set(repos))
    if unknown and request.repos:
        raise RunRefused(f"check for folder '{unknown[0]}'", "names no folder of the run",
                         f"the folders are: {', '.join(repos)}")
    return FolderSetup(forge=kind, repos=repos, folders=folders, checks=checks,
                       required_approvals=int(approvals or 0))


def folder_values(setup: FolderSetup) -> dict[str, Any]:
    """What the context starts with about each folder: its own local check command as
    `<f>.check_command` (SPEC §8.1), so a foreach script runs it in the folder's worktree.
    A folder without one gets no key: the workflow says what it falls back to
    (`folder.check_command | default(check_command)` in the bundled ones)."""
    return {f"{name}.check_command": command for name, command in setup.checks.items()
            if name in setup.repos}


def local_location(name: str, location: str, workspace: Path,
                   spelling: Spelling = Spelling()) -> Path:
    """A local forge's `location` as an absolute path (relative to `workspace`); RunRefused
    when it is no directory."""
    path = Path(location).expanduser()
    path = (path if path.is_absolute() else workspace / path).resolve()
    if not path.is_dir():
        github = spelling.option("--forge github", 'forge="github"')
        raise RunRefused(spelling.repo(name, location), "is not a local directory, "
                         "which the local forge needs",
                         "give the path of a git repository, or owner/name for every "
                         f"folder with {github}")
    return path


def _refuse_misplaced(workspace: Path, run_dir: Path | None, folders: Mapping[str, str],
                      spelling: Spelling) -> None:
    """A workspace or run directory whose files a publish would commit: inside a delivery
    run's worktree (another run's, or a folder of this one), or a run directory holding
    the workspace (its worktrees would be saved as the run's files)."""
    option = spelling.option("--workspace", "workspace")
    around = run_worktree_around(workspace)
    if around is not None:
        raise RunRefused(f"{option} {workspace}", f"is inside {around}, a delivery run's "
                         "worktree: this run's files and worktrees would be changes of "
                         "that folder, which its publish commits into a pull request",
                         "choose a workspace outside every worktree, e.g. the one that "
                         "holds it")
    if run_dir is None:
        return  # WORKSPACE/.delivery/runs/RUN_ID
    option = spelling.option("--run-dir", "run_dir")
    path = run_dir.expanduser().resolve()
    fix = "leave --run-dir out (the run directory is then WORKSPACE/.delivery/runs/RUN_ID)"
    if workspace.is_relative_to(path):
        raise RunRefused(f"{option} {run_dir}", f"holds the workspace {workspace}: the "
                         "run's worktrees would be among its files", fix)
    for name, folder in folders.items():
        if path.is_relative_to(Path(folder).resolve()):
            raise RunRefused(f"{option} {run_dir}", f"is inside folder '{name}' ({folder}): "
                             "the run's files would be committed by its publish", fix)
    around = run_worktree_around(path)
    if around is not None:
        raise RunRefused(f"{option} {run_dir}", f"is inside {around}, a delivery run's "
                         "worktree: the run's files would be committed by its publish", fix)


def _refuse_folder_name(name: str, subject: str) -> None:
    """A folder is named by an identifier (SPEC §0): its worktree is `<workspace>/<name>`,
    so `../web`, `a/b`, `.git` or `.delivery` would put it outside the workspace, nested,
    or over the workspace's own files; its facts are `<name>.*` in the context."""
    if not IDENTIFIER.match(name):
        raise RunRefused(subject, "the folder name is not an identifier (it names the "
                         "folder's directory in the workspace and its facts)",
                         "folder names match [A-Za-z_][A-Za-z0-9_]*, e.g. web or api_v2")
    reason = reserved_reason(name)
    if reason:
        raise RunRefused(subject, f"the folder name is taken: {reason}",
                         "choose another folder name")


def _refuse_shared_repository(repos: Mapping[str, str], spelling: Spelling) -> None:
    """Each folder's worktree is on the run's one branch, which git checks out once per
    repository: a second folder of the same repository would take the branch from the
    first, whose work would go on unpublished in a detached HEAD."""
    seen: dict[str, str] = {}
    for name, repository in repos.items():
        key = repository.rstrip("/").removesuffix(".git").lower()
        if key in seen:
            raise RunRefused(spelling.repo(name, repository), f"is the repository of folder "
                             f"'{seen[key]}' too: each folder is a worktree on the run's "
                             "branch, which one repository can check out only once",
                             "give each repository once, as one folder")
        seen[key] = name


def refuse_folder_problems(workflow: Workflow, setup: FolderSetup, world: World,
                           spelling: Spelling = Spelling()) -> None:
    """RunRefused for what would otherwise fail a folder stage after the agent has worked
    (SPEC §12): folder stages and no folder, a node's folder= that is not a run folder, a
    local repository that is a plain directory, one whose base branch is checked out in a
    working tree that a merge stage would have to write into."""
    real = {t for t in FORGE_TYPES if t not in (world.handlers or {})}
    stages = [node for node in workflow.nodes.values() if node.type in real]
    repos = setup.repos
    # A probe without folders sees no PR and removing no worktree is nothing: only these
    # cannot do their work without a folder.
    needing = [node for node in stages if node.type in (NodeType.WORKTREE_ADD,
                                                        NodeType.PUBLISH, NodeType.MERGE)]
    if needing and not repos:
        listed = ", ".join(f"{n.type.value if n.type else '?'} '{n.id}'" for n in needing[:3])
        raise RunRefused(spelling.option("--repo", "repos"), f"no folder was given, and the "
                         f"workflow has folder stages ({listed})", f"pass {spelling.repo()} "
                         "for each repository "
                         "(a local path, or owner/name on GitHub)")
    if any(node.type is NodeType.WORKTREE_ADD for node in stages):
        _refuse_shared_repository(repos, spelling)
    for node in stages:
        if node.folder and node.folder not in repos:
            raise RunRefused(f"node '{node.id}'", f"works on folder '{node.folder}', which "
                             f"is not one of the run's folders ({', '.join(repos)})",
                             f"pass {spelling.repo(node.folder)}")
    if not stages or setup.forge != "local" or world.forge is not None:
        return  # scripts and agents may work in any directory; a forge brought is its own
    merges = any(node.type is NodeType.MERGE for node in stages)
    for name, location in repos.items():
        refuse_local_repository(name, location, merges=merges, spelling=spelling)


def refuse_local_repository(name: str, location: str, *, merges: bool,
                            spelling: Spelling = Spelling()) -> None:
    """RunRefused for a local forge's repository at `location` (a resolved path) that a
    folder stage could not work with: a plain directory, or — when the run merges — a
    working tree with its base branch checked out. `delivery preflight` asks the same."""
    path = Path(location)
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return  # a bare repository: what the local forge is made for
    if not (path / ".git" / "HEAD").is_file():
        raise RunRefused(spelling.repo(name, location), "is a plain directory, not a git "
                         "repository", "give the path of a git repository (a bare one, "
                         "git init --bare, for the local forge to merge into)")
    checked_out = _checked_out_branch(path)
    if merges and checked_out:
        bare = f"{location.rstrip('/')}.git"
        raise RunRefused(spelling.repo(name, location), f"is a repository with a working "
                         f"tree whose base branch {checked_out!r} is checked out, so the "
                         "merge stage could not write into it (a person's files are never "
                         "overwritten)", f"give a bare clone: git clone --bare {location} "
                         f"{bare}, then {spelling.repo(name, bare)}")


def _checked_out_branch(path: Path) -> str:
    """The branch checked out in a working tree ("" when HEAD is detached)."""
    head = (path / ".git" / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else ""
