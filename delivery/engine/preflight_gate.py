"""Preflight before a run's first write (SPEC §7.1 `delivery preflight`).

A start calls `refuse_before_start` after the run's settings are checked and before
anything is written — no run directory, no state ref, no push, no PR: a token that cannot
push a folder, a merge method a repository does not allow, a state repository refusing
`refs/delivery/*` refuse the run (exit 2) with one line per problem. It runs whenever the
workflow has stages that write to a forge (publish, merge, respond) with real handlers;
`preflight=false` on the graph turns it off. `deliver.dot` therefore runs it by default.
A resume does not repeat it: the run has written already, and its stages say what fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from delivery.engine.run_setup import FolderSetup
from delivery.engine.world import World
from delivery.errors import DeliveryError, ForgeError, RunRefused
from delivery.forges import preflight as pf
from delivery.forges.base import Forge
from delivery.forges.select import open_forge
from delivery.lang.model import NodeType, Workflow
from delivery.store.base import RemoteTarget

if TYPE_CHECKING:  # PyGithub loads only for GitHub
    from delivery.forges.github_auth import InstallationTokens

WRITING_TYPES = (NodeType.PUBLISH, NodeType.MERGE, NodeType.RESPOND)


def merge_method(workflow: Workflow) -> str:
    """The merge method of the workflow's merge nodes (`method=`, default merge)."""
    for node in workflow.nodes_of(NodeType.MERGE):
        named = node.attr("method").strip().lower()
        if named and named not in pf.MERGE_METHODS:
            raise RunRefused(f"merge node '{node.id}' method={named}", "is not a merge method",
                             "write method=merge, method=squash or method=rebase")
        if named:
            return named
    return "merge"


def preflight(forge: Forge, repos: Mapping[str, str], *, merge_method: str = "merge",
              state: RemoteTarget | None = None,
              environ: Mapping[str, str], checks: Mapping[str, str] | None = None,
              required_approvals: int = 0) -> pf.PreflightReport:
    """The report for `repos` (folder -> repository) on `forge`, and the state repository."""
    requests = 0
    app_problems: list[pf.Problem] = []
    auth = ""
    if forge.name == "github":
        if not isinstance(forge, pf.GraphQLReader):
            raise ForgeError("github", "-", "check what the token may do",
                             "this GitHub forge cannot send the preflight query",
                             "set preflight=false on the graph")
        source = getattr(forge, "token_source", None)
        auth = str(getattr(source, "name", ""))
        if source is not None and hasattr(source, "installation"):  # a GitHub App
            folders, requests, app_problems = _app_folders(forge, source, repos, merge_method)
        else:
            folders, requests = pf.github_folders(forge, repos, merge_method)
    else:
        folders = pf.local_folders(repos, merge_method, checks=checks or {},
                                   required_approvals=required_approvals)
    state_check = None if state is None else pf.state_push_check(
        state.spec, state.remote, state.headers, environ)
    # a folder no installation covers is named once, for that (not as unreadable too)
    named = {problem.folder for problem in app_problems if problem.field == "app installation"}
    problems = pf.problems_of([f for f in folders if f.folder not in named], state_check,
                              forge.name)
    return pf.PreflightReport(forge=forge.name, auth=auth, folders=folders,
                              state=state_check, problems=[*app_problems, *problems],
                              requests=requests)


def _app_folders(reader: pf.GraphQLReader, tokens: InstallationTokens,
                 repos: Mapping[str, str], merge_method: str
                 ) -> tuple[list[pf.FolderCheck], int, list[pf.Problem]]:
    """A GitHub App's folders: the installation covering each repository first (no token
    can be minted for one none covers), then the query per owner for the covered ones."""
    covered, uncovered, problems = pf.app_installations(tokens, repos, merge_method)
    checks, requests = pf.github_folders(
        reader, {folder: repos[folder] for folder in covered}, merge_method, per_owner=True)
    by_folder = {check.folder: pf.with_installation(check, covered[check.folder])
                 for check in checks}
    by_folder.update({check.folder: check for check in uncovered})
    return [by_folder[folder] for folder in repos], requests + len(repos), problems


def wanted(workflow: Workflow, setup: FolderSetup,
           handlers: Mapping[NodeType, object] | None) -> bool:
    if workflow.attr("preflight", "true").strip().lower() in ("false", "0", "no", "off"):
        return False
    real = [t for t in WRITING_TYPES if t not in (handlers or {})]
    return bool(setup.repos) and bool(workflow.nodes_of(*real))


def refuse_blocked_run(report: pf.PreflightReport) -> None:
    if not report.blocked:
        return
    first, *rest = report.problems
    more = f" (and {len(rest)} more: {'; '.join(p.line() for p in rest)})" if rest else ""
    raise RunRefused("preflight", f"{first.folder}: {first.field}: {first.problem}{more}",
                     first.fix + "; `delivery preflight` shows everything it checked")


def refuse_before_start(workflow: Workflow, setup: FolderSetup, world: World) -> None:
    """What the token may do where, checked before the first write (SPEC §7.1): RunRefused
    for a blocked run, or for a forge whose answers could not be read."""
    forge = world.forge or open_forge(setup.forge or "local", checks=setup.checks,
                                      environ=world.environ,
                                      required_approvals=setup.required_approvals)
    try:
        report = preflight(forge, setup.repos, merge_method=merge_method(workflow),
                           state=world.stores.remote_target(), environ=world.environ,
                           checks=setup.checks, required_approvals=setup.required_approvals)
    except RunRefused:
        raise
    except DeliveryError as err:  # GitHub unreachable, the token refused: nothing written
        raise RunRefused("preflight", f"the token's permissions could not be read: {err}",
                         "check GITHUB_TOKEN and the repositories, or set preflight=false "
                         "on the graph to skip the check") from None
    finally:
        if world.forge is None and hasattr(forge, "close"):
            forge.close()
    refuse_blocked_run(report)
