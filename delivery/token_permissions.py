"""Which permission of a GitHub App (or fine-grained token) a refused write needed (SPEC §13:
token errors say what the Action needs). GitHub answers a write the token may not do with a
403 ("Resource not accessible by integration", or git's "Permission … denied"); the
operation tells which of the App's repository permissions was missing.

    missing("open a PR for delivery/t-1", "octo/api")
    # ("the token may not write pull requests of octo/api",
    #  "give the GitHub App 'Pull requests: read and write' …")
"""

from __future__ import annotations

# (words of the operation, the permission as GitHub's App settings name it, the Action's
# token-step input); the first match wins: merging a PR writes the branch (contents)
_NEEDS = (
    (("merge",), "Contents", "contents"),
    (("git push", "branch", "ref"), "Contents", "contents"),
    (("status",), "Commit statuses", "statuses"),
    (("comment", "issue", "label"), "Issues", "issues"),
    (("pr ", "pr #", "pull request"), "Pull requests", "pull-requests"),
)


def needed(operation: str) -> tuple[str, str] | None:
    """(App permission, the token step's `permission-…` name) `operation` writes with."""
    lowered = f"{operation.lower()} "
    for words, permission, step in _NEEDS:
        if any(word in lowered for word in words):
            return permission, step
    return None


def missing(operation: str, repository: str) -> tuple[str, str]:
    """(problem, fix) of a write refused with 403."""
    found = needed(operation) or ("Contents", "contents")
    permission, step = found
    return (f"the token may not write {permission.lower()} of {repository}",
            f"give the GitHub App '{permission}: read and write' on {repository} and accept "
            f"it on the installation (in an Action, the App token step's "
            f"permission-{step}: write); the default GITHUB_TOKEN cannot do this work")
