"""Which forge a run uses (SPEC §7.1, §12) and the forge settings of `delivery.toml`.

`--repo NAME=LOCATION`: a local path means the local forge, `owner/name` GitHub; `--forge`
overrides. The local forge's check commands come from `delivery.toml`
(`[forge.local.checks] web = "pytest -q"`) and `--check NAME=COMMAND`.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from delivery.errors import RunRefused
from delivery.forges.app_credentials import app_credentials
from delivery.forges.base import Forge
from delivery.forges.local import LocalForge
from delivery.forges.pacing import Pacer
from delivery.redact import Redactor

FORGES = ("local", "github")
CONFIG_FILE = "delivery.toml"
_OWNER_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def is_github_location(location: str, base: Path) -> bool:
    """`owner/name` that is not also a path that exists here."""
    return bool(_OWNER_NAME.fullmatch(location)) and not (base / location).exists() \
        and not location.startswith((".", "/"))


def forge_kind(locations: Iterable[str], requested: str | None, base: Path) -> str:
    if requested:
        if requested not in FORGES:
            raise RunRefused(f"--forge {requested}", "is not a forge",
                             f"use one of {', '.join(FORGES)}")
        return requested
    return "github" if any(is_github_location(loc, base) for loc in locations) else "local"


def open_forge(kind: str, *, checks: Mapping[str, str] | None = None,
               environ: Mapping[str, str] | None = None,
               required_approvals: int = 0, redactor: Redactor | None = None,
               pacer: Pacer | None = None) -> Forge:
    """The forge of a run: the local one with its check commands, or GitHub as inside
    Actions (`GITHUB_TOKEN`, `GITHUB_API_URL`, `GITHUB_GRAPHQL_URL`, `GITHUB_SERVER_URL`
    from `environ`, default this process's environment; the token stays in memory).
    `redactor` masks the local checks' output before it is stored (default: one for the
    secrets of this process's environment). `pacer` spaces GitHub's writes on the run's
    clock (default: real time)."""
    if kind == "local":
        return LocalForge(checks, required_approvals=required_approvals, redactor=redactor)
    if kind == "github":
        from delivery.forges.github import GitHubForge  # PyGithub loads only when needed

        # Without GITHUB_TOKEN (or an App) this raises ForgeError naming it. Each token an
        # App mints is masked by the run's redactor (SPEC §14).
        return GitHubForge.from_environment(environ if environ is not None else os.environ,
                                            pacer=pacer, on_token=None if redactor is None
                                            else redactor.learn)
    raise RunRefused(f"--forge {kind}", "is not a forge", f"use one of {', '.join(FORGES)}")


def require_settings(kind: str, environ: Mapping[str, str]) -> None:
    """RunRefused when the forge cannot work with this environment (GitHub: no token, or
    a GitHub App's credentials incomplete or not a key)."""
    if kind == "github" and app_credentials(environ) is not None:
        return
    if kind == "github" and not environ.get("GITHUB_TOKEN", "").strip():
        raise RunRefused("GITHUB_TOKEN", "is not set, and the GitHub forge needs a token to "
                         "push, open and merge pull requests and to read them",
                         "export GITHUB_TOKEN, or a GitHub App's GITHUB_APP_ID and "
                         "GITHUB_APP_PRIVATE_KEY (in an Action: a GitHub App installation "
                         "token with contents, pull-requests and issues write, made by "
                         "actions/create-github-app-token — the default GITHUB_TOKEN reaches "
                         "no other repository and its pushes start no CI); a resume reads "
                         "them from the environment again")


class _LocalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    checks: dict[str, str] = {}
    required_approvals: int = Field(default=0, ge=0)


class _ForgeSettings(BaseModel):
    model_config = ConfigDict(extra="allow")
    local: _LocalSettings = _LocalSettings()


class _Settings(BaseModel):
    model_config = ConfigDict(extra="allow")  # other sections belong to other features
    forge: _ForgeSettings = _ForgeSettings()


def local_settings(workspace: Path) -> tuple[dict[str, str], int]:
    """`[forge.local]` of `<workspace>/delivery.toml`: the check commands by folder and the
    approvals a PR needs before it is ready (none and 0 when there is no file)."""
    path = workspace / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, 0
    except OSError as err:
        raise RunRefused(str(path), f"cannot be read: {err}", "fix its permissions") from None
    except UnicodeDecodeError as err:
        raise RunRefused(str(path), f"is not UTF-8 text ({err.reason} at byte {err.start})",
                         "save the file as UTF-8") from None
    try:
        settings = _Settings.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as err:
        raise RunRefused(str(path), f"is not valid TOML: {err}", "fix the file") from None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RunRefused(str(path), f"{where}: {first['msg']}",
                         "write [forge.local] as required_approvals = N and "
                         "[forge.local.checks] as folder = \"command\" lines") from None
    local = settings.forge.local
    return dict(local.checks), local.required_approvals


def configured_checks(workspace: Path) -> dict[str, str]:
    """`[forge.local.checks]` of `<workspace>/delivery.toml` (none when there is no file)."""
    return local_settings(workspace)[0]
