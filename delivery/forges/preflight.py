"""`delivery preflight` (SPEC §7.1, §12): what the token may do where, before a run writes.

For each folder: can the token read the repository, push the run's branch and open PRs;
its default branch; what branch protection of that branch requires (status checks, among
them `delivery/change-set`, and approving reviews); which merge methods the repository
allows, against the one the workflow merges with. For the state repository (`--state`):
can the token push `refs/delivery/*`. Every problem is one line naming the folder, the
field and the fix; a report with a problem is blocked, and a run it blocks is refused
before anything is written.

On GitHub the folders cost ONE GraphQL request (up to 50 repositories, aliased; more are
split into requests of 50): `viewerPermission`, `isArchived`, `defaultBranchRef` with its
`branchProtectionRule` and ruleset `rules`, and the three `…MergeAllowed` settings. Pushing
and opening PRs both need `WRITE` (or `MAINTAIN`/`ADMIN`): GitHub reports the user's
permission; a fine-grained token narrower than its user is only found out by the write
itself (the state ref's push check below is the real one).

The state ref's check is `git push --dry-run` of a commit made in a scratch repository to
`refs/delivery/preflight`: git asks the remote's receive-pack for its advertisement, which
GitHub answers only to a token that may push (403 otherwise), and stops there — nothing is
sent, no ref is created, nothing is left behind if the process is killed, no webhook fires.
A push-then-delete of a scratch ref would also see a server hook refusing that one ref,
but it writes twice and can leave the ref behind; GitHub has no hook or ruleset on refs
outside branches and tags, so the advertisement is the check that matters there.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from delivery.errors import DeliveryError
from delivery.forges.change_set import CHANGE_SET_CONTEXT
from delivery.git.network import header_environment
from delivery.git.problems import mask_headers

if TYPE_CHECKING:  # PyGithub loads only for GitHub
    from delivery.forges.github_auth import Installation, InstallationTokens

PUSH_PERMISSIONS = frozenset({"ADMIN", "MAINTAIN", "WRITE"})
MERGE_METHODS = ("merge", "squash", "rebase")
BATCH = 50  # repositories per GraphQL request (SPEC §7: one request for N <= 50)
STATE_REF = "refs/delivery/preflight"

REPOSITORY_FIELDS = """
fragment PreflightRepository on Repository {
  nameWithOwner
  isArchived
  viewerPermission
  mergeCommitAllowed
  squashMergeAllowed
  rebaseMergeAllowed
  defaultBranchRef {
    name
    branchProtectionRule {
      pattern
      requiresStatusChecks
      requiredStatusCheckContexts
      requiresApprovingReviews
      requiredApprovingReviewCount
    }
    rules(first: 50) {
      nodes {
        type
        parameters {
          __typename
          ... on RequiredStatusChecksParameters { requiredStatusChecks { context } }
          ... on PullRequestParameters { requiredApprovingReviewCount allowedMergeMethods }
        }
      }
    }
  }
}
"""


class Problem(BaseModel):
    model_config = ConfigDict(frozen=True)
    folder: str  # the folder, or "state" for the state repository
    field: str
    problem: str
    fix: str

    def line(self) -> str:
        return f"{self.folder}: {self.field}: {self.problem}; fix: {self.fix}"


class FolderCheck(BaseModel):
    folder: str
    repository: str
    readable: bool = False
    permission: str = ""  # GitHub's viewerPermission; the local forge: WRITE or READ
    can_push: bool = False
    can_open_prs: bool = False
    default_branch: str = ""
    required_checks: list[str] = Field(default_factory=list)
    required_approvals: int = 0
    requires_change_set: bool = False
    merge_methods: list[str] = Field(default_factory=list)  # allowed by the repository
    merge_method: str = "merge"  # the workflow's
    # a GitHub App's: "<id> on <owner>" covering the repository, and what it may do
    installation: str = ""
    app_permissions: dict[str, str] = Field(default_factory=dict)


class StateCheck(BaseModel):
    spec: str
    can_push: bool = False
    detail: str = ""


class PreflightReport(BaseModel):
    forge: str
    auth: str = ""  # what authenticates on GitHub: GITHUB_TOKEN, or the GitHub App
    folders: list[FolderCheck]
    state: StateCheck | None = None
    problems: list[Problem] = Field(default_factory=list)
    requests: int = 0  # API requests the folders' checks cost

    @property
    def blocked(self) -> bool:
        return bool(self.problems)

    def refusal(self) -> str:
        """The problems, one line each (what a refused run prints)."""
        return "\n".join(problem.line() for problem in self.problems)


@runtime_checkable
class GraphQLReader(Protocol):
    """What preflight needs of the GitHub forge: one read-only GraphQL request, its whole
    answer (`data` beside `errors`: one missing repository must not hide the others)."""

    def graphql_read(self, operation: str, repository: str, query: str,
                     variables: Mapping[str, Any]) -> dict[str, Any]: ...


# -- GitHub ------------------------------------------------------------------------------
def github_query(count: int) -> str:
    """The query for `count` repositories: aliases r0…, variables o0/n0…."""
    params = ", ".join(f"$o{i}: String!, $n{i}: String!" for i in range(count))
    body = "\n".join(f"  r{i}: repository(owner: $o{i}, name: $n{i}) {{ ...PreflightRepository }}"
                     for i in range(count))
    return f"query Preflight({params}) {{\n{body}\n}}\n{REPOSITORY_FIELDS}"


def github_folders(reader: GraphQLReader, repos: Mapping[str, str],
                   merge_method: str, *, per_owner: bool = False
                   ) -> tuple[list[FolderCheck], int]:
    """Every folder's check from GitHub, and the requests it cost. `per_owner`: each
    request reads one owner's repositories (an App's installation token reads no other)."""
    owners: dict[str, list[tuple[str, str]]] = {}
    for folder, repository in repos.items():
        owner = repository.partition("/")[0].lower() if per_owner else ""
        owners.setdefault(owner, []).append((folder, repository))
    batches = [folders[start:start + BATCH] for folders in owners.values()
               for start in range(0, len(folders), BATCH)]
    checks: list[FolderCheck] = []
    requests = 0
    for batch in batches:
        variables: dict[str, str] = {}
        for i, (_, repository) in enumerate(batch):
            owner, _, name = repository.partition("/")
            variables[f"o{i}"], variables[f"n{i}"] = owner, name.removesuffix(".git")
        answer = reader.graphql_read("check what the token may do",
                                     ", ".join(repository for _, repository in batch),
                                     github_query(len(batch)), variables)
        requests += 1
        data = answer.get("data") if isinstance(answer.get("data"), dict) else {}
        for i, (folder, repository) in enumerate(batch):
            node = (data or {}).get(f"r{i}")
            checks.append(_github_folder(folder, repository, node, merge_method))
    return checks, requests


def _github_folder(folder: str, repository: str, node: Any, merge_method: str) -> FolderCheck:
    check = FolderCheck(folder=folder, repository=repository, merge_method=merge_method)
    if not isinstance(node, dict):
        return check
    permission = str(node.get("viewerPermission") or "")
    writable = permission in PUSH_PERMISSIONS and not node.get("isArchived")
    branch = node.get("defaultBranchRef") if isinstance(node.get("defaultBranchRef"), dict) \
        else {}
    contexts, approvals, allowed = _protection(branch or {})
    methods = [m for m, key in (("merge", "mergeCommitAllowed"),
                                ("squash", "squashMergeAllowed"),
                                ("rebase", "rebaseMergeAllowed")) if node.get(key)]
    if allowed is not None:  # a ruleset narrows the methods further
        methods = [m for m in methods if m in allowed]
    return check.model_copy(update={
        "readable": True, "permission": permission, "can_push": writable,
        "can_open_prs": writable, "default_branch": str((branch or {}).get("name") or ""),
        "required_checks": contexts, "required_approvals": approvals,
        "requires_change_set": CHANGE_SET_CONTEXT in contexts, "merge_methods": methods})


def _protection(branch: Mapping[str, Any]) -> tuple[list[str], int, set[str] | None]:
    """Required status contexts, approvals and (from rulesets) allowed merge methods."""
    contexts: list[str] = []
    approvals = 0
    allowed: set[str] | None = None
    rule = branch.get("branchProtectionRule")
    if isinstance(rule, dict):
        if rule.get("requiresStatusChecks"):
            contexts += [str(c) for c in rule.get("requiredStatusCheckContexts") or []]
        if rule.get("requiresApprovingReviews"):
            approvals = int(rule.get("requiredApprovingReviewCount") or 0)
    rules = branch.get("rules") if isinstance(branch.get("rules"), dict) else {}
    for item in (rules or {}).get("nodes") or []:
        parameters = item.get("parameters") if isinstance(item, dict) else None
        if not isinstance(parameters, dict):
            continue
        for required in parameters.get("requiredStatusChecks") or []:
            if isinstance(required, dict) and required.get("context"):
                contexts.append(str(required["context"]))
        if parameters.get("__typename") == "PullRequestParameters":
            approvals = max(approvals, int(parameters.get("requiredApprovingReviewCount") or 0))
            methods = parameters.get("allowedMergeMethods")
            if methods:
                named = {str(m).lower() for m in methods}
                allowed = named if allowed is None else allowed & named
    return list(dict.fromkeys(contexts)), approvals, allowed


# -- a GitHub App's installations -----------------------------------------------------------
def app_installations(tokens: InstallationTokens, repos: Mapping[str, str], merge_method: str
                      ) -> tuple[dict[str, Installation], list[FolderCheck], list[Problem]]:
    """The installation covering each folder's repository (one request each); the checks
    of the folders none covers, and the problems: no installation, or one that may not
    write contents and pull requests."""
    covered: dict[str, Installation] = {}
    uncovered: list[FolderCheck] = []
    problems: list[Problem] = []
    for folder, repository in repos.items():
        installation = tokens.installation(repository)
        owner, _, name = repository.partition("/")
        if installation is None:
            uncovered.append(FolderCheck(folder=folder, repository=repository,
                                         merge_method=merge_method))
            problems.append(Problem(
                folder=folder, field="app installation",
                problem=f"{tokens.name} is not installed on {repository}",
                fix=f"install the App on {owner} (with access to {name})"))
            continue
        covered[folder] = installation
        missing = installation.missing()
        if missing:
            problems.append(Problem(
                folder=folder, field="app permissions",
                problem=f"the GitHub App's installation on {installation.owner} has "
                        f"{', '.join(missing)}",
                fix="give the App contents and pull requests read and write (its settings, "
                    "Permissions), then accept the new permissions on the installation"))
    return covered, uncovered, problems


def with_installation(check: FolderCheck, installation: Installation) -> FolderCheck:
    return check.model_copy(update={
        "installation": f"{installation.id} on {installation.owner}",
        "app_permissions": dict(installation.permissions)})


# -- the local forge -----------------------------------------------------------------------
def local_folders(repos: Mapping[str, str], merge_method: str, *,
                  checks: Mapping[str, str], required_approvals: int) -> list[FolderCheck]:
    """What can be known of local repositories: readable, writable (push and the PR
    records are files beside the repository), the default branch; the local forge merges
    with merge commits only, its checks are the configured commands."""
    from delivery.forges.local import LocalForge, git_dir_of

    forge = LocalForge()
    found: list[FolderCheck] = []
    for folder, repository in repos.items():
        check = FolderCheck(folder=folder, repository=repository, merge_method=merge_method,
                            merge_methods=["merge"], required_approvals=required_approvals,
                            required_checks=[folder] if checks.get(folder) else [])
        try:
            git_dir = git_dir_of(repository)
            branch = forge.default_branch(repository)
        except DeliveryError:
            found.append(check)
            continue
        writable = os.access(git_dir / "refs", os.W_OK) and \
            os.access(git_dir / "objects", os.W_OK)
        found.append(check.model_copy(update={
            "readable": True, "permission": "WRITE" if writable else "READ",
            "can_push": writable, "can_open_prs": writable, "default_branch": branch}))
    return found


# -- the state repository --------------------------------------------------------------------
def state_push_check(spec: str, remote: str, headers: Sequence[str],
                     environ: Mapping[str, str]) -> StateCheck:
    """Can `refs/delivery/*` be pushed to `remote`? A dry-run push (see the module's
    docstring): nothing is written to the remote."""
    with tempfile.TemporaryDirectory(prefix="delivery-preflight-") as scratch:
        env = {**environ, "GIT_TERMINAL_PROMPT": "0", "GIT_DIR": scratch,
               "GIT_AUTHOR_NAME": "delivery", "GIT_AUTHOR_EMAIL": "delivery@invalid",
               "GIT_COMMITTER_NAME": "delivery", "GIT_COMMITTER_EMAIL": "delivery@invalid"}
        try:
            subprocess.run(["git", "init", "--quiet", "--bare", scratch], env=env,
                           capture_output=True, check=True)
            tree = _git_out(["git", "hash-object", "-w", "-t", "tree", "--stdin"], env, b"")
            commit = _git_out(["git", "commit-tree", tree, "-m", "delivery preflight"], env)
        except (OSError, subprocess.CalledProcessError) as error:
            return StateCheck(spec=spec, detail=f"git could not run: {error}")
        push_env = ({**env, **header_environment(headers, base=env, url=remote)} if headers
                    else env)
        done = subprocess.run(["git", "push", "--dry-run", "--porcelain", remote,
                               f"{commit}:{STATE_REF}"], env=push_env, capture_output=True,
                              check=False, timeout=120)
    if done.returncode == 0:
        return StateCheck(spec=spec, can_push=True)
    text = mask_headers(done.stderr.decode(errors="replace"), headers)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return StateCheck(spec=spec, detail=" / ".join(lines[-2:]) or "git push was refused")


def _git_out(command: list[str], env: Mapping[str, str], stdin: bytes | None = None) -> str:
    return subprocess.run(command, env=dict(env), input=stdin, capture_output=True,
                          check=True).stdout.decode().strip()


# -- the verdict ---------------------------------------------------------------------------
def problems_of(folders: Sequence[FolderCheck], state: StateCheck | None,
                forge: str) -> list[Problem]:
    found: list[Problem] = []
    for check in folders:
        name = check.folder
        if not check.readable:
            found.append(Problem(
                folder=name, field="read", problem=f"{check.repository} cannot be read (it "
                "does not exist, or the token cannot see it)",
                fix="check the repository's name in --repo and that the token can read it"))
            continue
        if not check.can_push:
            held = check.permission.lower() or "no"
            found.append(Problem(
                folder=name, field="push",
                problem=f"the token has {held} permission on {check.repository}: it cannot "
                        "push the run's branch or open pull requests",
                fix=("give the token write access (contents: write, pull-requests: write)"
                     if forge == "github" else
                     "make the repository writable for this user")))
        if check.merge_method not in check.merge_methods:
            allowed = ", ".join(check.merge_methods) or "none"
            found.append(Problem(
                folder=name, field="merge method",
                problem=f"{check.repository} does not allow '{check.merge_method}' merges "
                        f"(allowed: {allowed})",
                fix=(f"set method={check.merge_methods[0]} on the workflow's merge node"
                     if check.merge_methods else "allow a merge method in the settings")
                    + f" or allow {check.merge_method} merges in the repository's settings"))
    if state is not None and not state.can_push:
        found.append(Problem(
            folder="state", field="push refs/delivery/*",
            problem=f"the state repository {state.spec} refuses the push"
                    + (f" ({state.detail})" if state.detail else ""),
            fix="give the token contents: write on the state repository, or name another "
                "with --state"))
    return found


def table(report: PreflightReport) -> list[str]:
    """The report as text lines: one row per folder, then the state, then the problems."""
    header = ("folder", "repository", "read", "push+PRs", "default", "requires", "merge")
    rows = [header]
    for check in report.folders:
        needs = [*check.required_checks]
        if check.required_approvals:
            needs.append(f"{check.required_approvals} approval(s)")
        methods = ",".join(check.merge_methods) or "-"
        rows.append((check.folder, check.repository, _yes(check.readable),
                     _yes(check.can_push and check.can_open_prs), check.default_branch or "-",
                     ", ".join(needs) or "-", f"{check.merge_method} ({methods})"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
             for row in rows]
    if report.state is not None:
        lines.append(f"state {report.state.spec}: push refs/delivery/* "
                     f"{_yes(report.state.can_push)}")
    unguarded = [c.folder for c in report.folders
                 if c.readable and not c.requires_change_set and report.forge == "github"]
    if unguarded:
        lines.append(f"note: branch protection of {', '.join(unguarded)} does not require "
                     f"{CHANGE_SET_CONTEXT}: one PR of the set can be merged alone")
    if report.auth and report.auth != "GITHUB_TOKEN":
        lines.append(f"authenticated as {report.auth}")
        for check in report.folders:
            if check.installation:
                granted = ", ".join(f"{k}: {v}" for k, v in sorted(
                    check.app_permissions.items()))
                app = report.auth.removeprefix("the ")
                lines.append(f"{check.folder}: {app} installation {check.installation} "
                             f"({granted})")
    lines += [f"blocked: {problem.line()}" for problem in report.problems]
    lines.append("blocked" if report.blocked else "ok")
    return lines


def _yes(value: bool) -> str:
    return "yes" if value else "NO"

