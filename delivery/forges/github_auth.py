"""Who the GitHub forge is on GitHub (SPEC §7.1 "Long runs keep a valid token", §14): a
token (`GITHUB_TOKEN`), or a GitHub App (`GITHUB_APP_ID` with `GITHUB_APP_PRIVATE_KEY` or
`GITHUB_APP_PRIVATE_KEY_FILE`) whose installation tokens are minted per owner and renewed
before they expire — an installation token lasts an hour, a campaign longer.

`InstallationTokens` is asked for a token at every use (each REST and GraphQL request,
each git fetch and push), so a run of hours never sends a stale one: a token is renewed
when less than five minutes (or half its lifetime, for short-lived ones) are left. One
provider serves a run's threads (folder stages run at once): minting happens under a lock,
so threads asking together share one token. Tokens stay in memory, are handed to git as a
header for one process, and each minted one is told to the run's redactor (`on_token`).

The App's JWT is signed by PyGithub (`AppAuth`) on the provider's clock; the installation
and the token come from PyGithub's `GithubIntegration`.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import requests
from github import Auth, GithubException, GithubIntegration

from delivery.errors import ForgeError
from delivery.forges.app_credentials import APP_ID, AppCredentials, app_credentials
from delivery.git.network import GitRemote
from probes.github_errors import GitHubError, NotFound, TokenRefused, Transient, classify_answer
from probes.retry import RetryBudget, call_with_retries

RENEW_BEFORE = 300.0  # seconds left at which a token is renewed
JWT_SECONDS = 540  # GitHub refuses more than 600; room for a clock a little ahead
# what the run writes with (docs/forges.md): below `write` on these, preflight refuses
WRITE_PERMISSIONS = ("contents", "pull_requests")
T = TypeVar("T")


class TokenSource(Protocol):
    """A token for a repository, current at the time of asking."""

    @property
    def name(self) -> str:
        """As a person knows it: "GITHUB_TOKEN", "the GitHub App 123"."""
        ...

    def token(self, repository: str) -> str: ...

    def key(self, repository: str) -> str:
        """Which token serves `repository`: repositories with the same key share one."""
        ...


@dataclass(frozen=True)
class StaticToken:
    """`GITHUB_TOKEN`: one token for every repository."""

    value: str = field(repr=False)
    name: str = "GITHUB_TOKEN"

    def token(self, repository: str) -> str:
        return self.value

    def key(self, repository: str) -> str:
        return ""


@dataclass(frozen=True)
class Installation:
    id: int
    owner: str
    permissions: Mapping[str, str]
    selection: str  # "all" or "selected"

    def missing(self) -> list[str]:
        """The permissions the run writes with that the installation lacks."""
        return [f"{name}: {self.permissions.get(name) or 'none'}" for name in WRITE_PERMISSIONS
                if self.permissions.get(name) not in ("write", "admin")]


class _ClockedAppAuth(Auth.AppAuth):
    """PyGithub's App authentication, its JWT stamped by the provider's clock (a test's
    fake GitHub and the provider then agree on what expired)."""

    def __init__(self, credentials: AppCredentials, clock: Callable[[], float]) -> None:
        self._sign = Auth.AppAuth.create_jwt_sign(credentials.private_key, "RS256")
        super().__init__(credentials.app_id, sign_func=self._sign)
        self._clock = clock

    def create_jwt(self, expiration: int | None = None) -> str:
        now = int(self._clock())
        signed = self._sign({"iat": now - 60, "exp": now + (expiration or JWT_SECONDS),
                             "iss": str(self.app_id)})
        return signed.decode() if isinstance(signed, bytes) else str(signed)


@dataclass
class _Minted:
    token: str
    expires_at: float
    renew_at: float


class InstallationTokens:
    """`TokenSource` for a GitHub App: an installation token per owner, renewed before it
    expires; thread-safe."""

    def __init__(self, credentials: AppCredentials, *, api_url: str,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, timeout: int = 30,
                 budget: RetryBudget | None = None,
                 on_token: Callable[[str], None] | None = None) -> None:
        self.app_id = credentials.app_id
        self.name = f"the GitHub App {credentials.app_id}"
        self._clock = clock
        self._sleep = sleep
        self._budget = budget or RetryBudget()
        self._on_token = on_token
        self._integration = GithubIntegration(
            auth=_ClockedAppAuth(credentials, clock), base_url=api_url.rstrip("/"),
            timeout=timeout, retry=None, seconds_between_requests=None,
            seconds_between_writes=None)
        self._lock = threading.Lock()
        self._installations: dict[str, Installation] = {}  # by owner (lower case)
        self._tokens: dict[str, _Minted] = {}  # by owner (lower case)

    def __repr__(self) -> str:
        return f"InstallationTokens(app_id={self.app_id!r})"

    def key(self, repository: str) -> str:
        return repository.partition("/")[0].lower()

    def close(self) -> None:
        self._integration.close()

    def installation(self, repository: str) -> Installation | None:
        """The App's installation covering `repository`; None when none does."""
        owner, _, name = repository.partition("/")
        try:
            found = self._call(repository, "find the App's installation",
                               lambda: self._integration.get_repo_installation(owner, name))
        except NotFound:
            return None
        installation = Installation(int(found.id), owner, dict(found.permissions or {}),
                                    str(found.repository_selection or ""))
        with self._lock:
            self._installations.setdefault(owner.lower(), installation)
        return installation

    def token(self, repository: str) -> str:
        """A token for `repository`'s owner with more than the renewal margin left."""
        owner = self.key(repository)
        with self._lock:
            minted = self._tokens.get(owner)
            if minted is not None and self._clock() < minted.renew_at:
                return minted.token
            installation = self._installations.get(owner)
        if installation is None:
            installation = self.installation(repository)
        if installation is None:
            account, _, name = repository.partition("/")
            raise ForgeError("github", repository, "authenticate as the GitHub App",
                             f"{self.name} is not installed on {repository}",
                             f"install the App on {account} (with access to {name})")
        with self._lock:  # one mint per owner, whichever thread asks first
            minted = self._tokens.get(owner)
            if minted is None or self._clock() >= minted.renew_at:
                minted = self._mint(repository, installation)
                self._tokens[owner] = minted
            return minted.token

    def _mint(self, repository: str, installation: Installation) -> _Minted:
        answer = self._call(repository,
                            f"get a token for the App's installation on {installation.owner}",
                            lambda: self._integration.get_access_token(installation.id))
        token = str(answer.token)
        if self._on_token is not None:
            self._on_token(token)  # masked wherever the run writes, before it is used
        now = self._clock()
        expires = answer.expires_at.timestamp() if answer.expires_at else now + 3600
        margin = min(RENEW_BEFORE, max(0.0, expires - now) / 2)
        return _Minted(token, expires, expires - margin)

    def _call(self, repository: str, operation: str, call: Callable[[], T]) -> T:
        """`call()` retried on GitHub's transient answers; its refusals said as ForgeError
        (a 404 is raised as NotFound: an installation that does not cover the repository)."""
        def classified() -> T:
            try:
                return call()
            except GithubException as error:
                raise classify_answer(error.status, error.headers or {}, error.data,
                                      now=self._clock()) or GitHubError(
                    f"HTTP {error.status}", status=error.status) from None
            except requests.RequestException as error:
                raise Transient(f"connection failed ({type(error).__name__})") from None

        try:
            return call_with_retries(classified, self._budget, self._sleep)
        except NotFound:
            if "token" in operation:
                raise ForgeError("github", repository, operation,
                                 "the installation is gone",
                                 "install the App again, then resume") from None
            raise
        except TokenRefused as error:
            raise ForgeError("github", repository, "authenticate as the GitHub App",
                             f"GitHub refused the App's JWT ({error.reason})",
                             f"check that {APP_ID} and the private key belong to the same "
                             "App, and that this machine's clock is right") from None
        except Transient as error:
            raise ForgeError("github", repository, operation, error.reason,
                             "try again later (a resumed run repeats this step safely)"
                             ) from None
        except GitHubError as error:
            raise ForgeError("github", repository, operation, error.reason,
                             f"check the App's installation on {repository.partition('/')[0]} "
                             "(suspended, or new permissions not accepted yet)") from None


def token_source(environ: Mapping[str, str], *, api_url: str, **options: Any) -> TokenSource:
    """The App when its variables are set (it wins over a `GITHUB_TOKEN` beside them: an
    Actions job often has one it did not choose), else `GITHUB_TOKEN`."""
    credentials = app_credentials(environ)
    if credentials is not None:
        return InstallationTokens(credentials, api_url=api_url, **options)
    return StaticToken(environ.get("GITHUB_TOKEN", ""))


def git_remote_for(source: TokenSource, url: str, repository: str) -> GitRemote:
    """How git reaches `repository` at `url`: the token as a Basic header, never in the URL.
    An App's is asked for at each fetch and push: a stage may hold the remote past a
    token's life."""
    def headers() -> tuple[str, ...]:
        pair = base64.b64encode(f"x-access-token:{source.token(repository)}".encode())
        return (f"Authorization: Basic {pair.decode()}",)

    if isinstance(source, StaticToken):
        return GitRemote(url=url, http_headers=headers(), token_name=source.name)
    return GitRemote(url=url, token_name=source.name, header_source=headers)
