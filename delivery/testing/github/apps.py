"""GitHub Apps on the fake GitHub: an App with its own RSA key, installed on owners (all
their repositories, or a selection), and the two endpoints an App's client needs —
`GET /repos/{owner}/{repo}/installation` and `POST /app/installations/{id}/access_tokens`,
both answered only to a JWT signed with the App's key (RS256, `iss` the App's id, `exp` in
the future and at most ten minutes after `iat`, on the fake's clock), as GitHub checks it.

Installation tokens (`ghs_…`) expire after the App's `token_lifetime` seconds (an hour, as
GitHub's, unless a test makes it short); a request with an expired one is answered GitHub's
401 and recorded as `expired`, every request with one records the token's expiry, so a test
can tell that none was sent late. A token used on a repository its installation does not
cover is answered 403 (REST and git); GraphQL answers NOT_FOUND for such a repository.

A token request may narrow the token (GitHub's body: `repositories`, names of the
installation's, and `permissions`, each at most the installation's level; more is answered
422). A token minted with `permissions` carries only those: a write needing one it lacks,
or has only `read`, is refused as GitHub refuses it (`limits.permission_refusal`). Without
`permissions` (or with `{}`, as PyGithub asks) it has all the installation's, as on GitHub.
"""

from __future__ import annotations

import base64
import itertools
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

Answer = tuple[int, dict[str, str], Any]
# what the run's GitHub App is given in the docs (docs/forges.md)
DEFAULT_PERMISSIONS = {"contents": "write", "pull_requests": "write", "issues": "write",
                       "statuses": "write", "checks": "write", "actions": "read",
                       "metadata": "read"}
MAX_JWT_SECONDS = 600  # GitHub refuses a JWT whose exp is more than 10 minutes after iat
_INSTALLATION = re.compile(r"/api/v3/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)/installation")
_ACCESS_TOKENS = re.compile(r"/api/v3/app/installations/(?P<id>\d+)/access_tokens")
_REST_REPO = re.compile(r"/api/v3/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)(?:/|$)")
_GIT_REPO = re.compile(r"/(?P<owner>[^/]+)/(?P<name>[^/]+?)\.git(?:/|$)")
_ids = itertools.count(1001)


@dataclass
class Installation:
    id: int
    owner: str
    repositories: tuple[str, ...] | None  # names (without owner); None: all of them
    permissions: dict[str, str]

    def covers(self, full_name: str) -> bool:
        owner, _, name = full_name.partition("/")
        if owner.lower() != self.owner.lower():
            return False
        return self.repositories is None or name.lower() in {
            r.lower() for r in self.repositories}

    def json(self, app_id: int) -> dict[str, Any]:
        return {"id": self.id, "app_id": app_id, "target_type": "Organization",
                "account": {"login": self.owner, "type": "Organization"},
                "repository_selection": "all" if self.repositories is None else "selected",
                "permissions": dict(self.permissions),
                "access_tokens_url": f"/app/installations/{self.id}/access_tokens"}


_LEVELS = {"read": 1, "write": 2, "admin": 3}


class TokenRequestError(ValueError):
    """A token request GitHub answers 422 (more than the installation may give)."""


@dataclass(frozen=True)
class IssuedToken:
    token: str
    installation: Installation
    expires_at: float  # whole seconds, as the answer's `expires_at` says it
    # what the token may do: the installation's, or the narrower set it was minted with
    permissions: Mapping[str, str] = field(default_factory=dict)
    repositories: tuple[str, ...] | None = None  # names it was narrowed to; None: all

    def covers(self, full_name: str) -> bool:
        return self.installation.covers(full_name) and (
            self.repositories is None or full_name.partition("/")[2].lower()
            in {name.lower() for name in self.repositories})

    def may_write(self, permission: str) -> bool:
        return _LEVELS.get(self.permissions.get(permission, ""), 0) >= _LEVELS["write"]


@dataclass(frozen=True)
class Credential:
    """What a request's `Authorization` header is, as the fake sees it."""

    authorized: bool
    message: str = "Bad credentials"  # the 401's, when not authorized
    app: FakeApp | None = None  # a valid JWT of this App (App endpoints only)
    token: IssuedToken | None = None  # an installation token
    expired: bool = False


class FakeApp:
    """One GitHub App: its id, its private key (PEM, as GitHub lets one download it),
    where it is installed, the tokens it minted."""

    def __init__(self, app_id: int, *, clock: Callable[[], float],
                 token_lifetime: float = 3600.0) -> None:
        self.id = app_id
        self.clock = clock
        self.token_lifetime = token_lifetime
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.private_key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption()).decode()
        self.public_key = key.public_key()
        self.installations: dict[int, Installation] = {}
        self.issued: list[IssuedToken] = []
        # a message: minting answers 403 with it (a suspended installation)
        self.refuse_tokens = ""
        self.token_prefix = "ghs_"  # GitHub's; another tests masking by value alone

    def install(self, owner: str, *, repositories: tuple[str, ...] | None = None,
                permissions: Mapping[str, str] | None = None) -> Installation:
        """The App installed on `owner`: all its repositories, or these names."""
        installation = Installation(next(_ids), owner, repositories,
                                    dict(DEFAULT_PERMISSIONS if permissions is None
                                         else permissions))
        self.installations[installation.id] = installation
        return installation

    def installation_of(self, full_name: str) -> Installation | None:
        return next((i for i in self.installations.values() if i.covers(full_name)), None)

    def env(self) -> dict[str, str]:
        return {"GITHUB_APP_ID": str(self.id), "GITHUB_APP_PRIVATE_KEY": self.private_key_pem}


@dataclass
class Apps:
    """The fake's Apps and every installation token they minted."""

    clock: Callable[[], float]
    apps: dict[int, FakeApp] = field(default_factory=dict)
    tokens: dict[str, IssuedToken] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def register(self, app_id: int, token_lifetime: float) -> FakeApp:
        app = FakeApp(app_id, clock=self.clock, token_lifetime=token_lifetime)
        self.apps[app_id] = app
        return app

    def credential(self, header: str | None, path: str, *, git: bool) -> Credential | None:
        """The credential when the header holds an App's JWT or an installation token;
        None when it is neither (a plain token, checked by the server)."""
        if not header or not self.apps:
            return None
        scheme, _, value = header.partition(" ")
        value = value.strip()
        if git and scheme.lower() == "basic":
            try:
                value = base64.b64decode(value).decode().partition(":")[2]
            except ValueError:
                return None
        elif scheme.lower() not in ("token", "bearer"):
            return None
        with self.lock:
            issued = self.tokens.get(value)
        if issued is not None:
            if self.clock() >= issued.expires_at:
                return Credential(False, token=issued, expired=True)
            return Credential(True, token=issued)
        if value.count(".") == 2 and not git:
            return self._jwt(value, path)
        return None

    def _jwt(self, value: str, path: str) -> Credential:
        try:
            claims = jwt.decode(value, options={"verify_signature": False})
            app = self.apps.get(int(claims.get("iss", "")))
        except (jwt.PyJWTError, ValueError, TypeError):
            return Credential(False, "A JSON web token could not be decoded")
        if app is None:
            return Credential(False, "Integration not found")
        try:  # the signature with the App's public key; times on the fake's clock below
            jwt.decode(value, app.public_key, algorithms=["RS256"],
                       options={"verify_exp": False, "verify_iat": False,
                                "require": ["iat", "exp", "iss"]})
        except jwt.PyJWTError:
            return Credential(False, "A JSON web token could not be decoded")
        now = self.clock()
        issued, expires = float(claims["iat"]), float(claims["exp"])
        if expires <= now:
            return Credential(False, "'Expiration time' claim ('exp') must be a numeric value "
                                     "representing the future time at which the assertion "
                                     "expires")
        if issued > now + 60 or expires - issued > MAX_JWT_SECONDS:
            return Credential(False, "'Issued at' claim ('iat') must be an Integer "
                                     "representing the time that the assertion was issued")
        if not (_INSTALLATION.fullmatch(path) or _ACCESS_TOKENS.fullmatch(path)):
            return Credential(False, "A JSON web token could not be decoded")
        return Credential(True, app=app)

    def answer(self, app: FakeApp, method: str, path: str, body: Any = None) -> Answer:
        """An App endpoint, answered to `app`'s valid JWT."""
        found = _INSTALLATION.fullmatch(path)
        if found is not None and method == "GET":
            installation = app.installation_of(f"{found['owner']}/{found['name']}")
            if installation is None:
                return 404, {}, {"message": "Not Found", "documentation_url":
                                 "https://docs.github.com/rest/apps/apps#get-a-repository-"
                                 "installation-for-the-authenticated-app"}
            return 200, {}, installation.json(app.id)
        found = _ACCESS_TOKENS.fullmatch(path)
        if found is not None and method == "POST":
            installation = app.installations.get(int(found["id"]))
            if installation is None:
                return 404, {}, {"message": "Not Found"}
            if app.refuse_tokens:
                return 403, {}, {"message": app.refuse_tokens}
            asked = body if isinstance(body, dict) else {}
            names = asked.get("repositories")
            try:
                issued = self.mint(app, installation, permissions=asked.get("permissions"),
                                   repositories=tuple(names) if names else None)
            except TokenRequestError as error:
                return 422, {}, {"message": str(error), "documentation_url":
                                 "https://docs.github.com/rest/apps/apps#create-an-"
                                 "installation-access-token-for-an-app"}
            stamp = datetime.fromtimestamp(issued.expires_at, UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
            return 201, {}, {"token": issued.token, "expires_at": stamp,
                             "permissions": dict(issued.permissions),
                             "repository_selection": "all" if issued.repositories is None
                             and installation.repositories is None else "selected"}
        return 404, {}, {"message": "Not Found"}

    def mint(self, app: FakeApp, installation: Installation, *,
             permissions: Mapping[str, str] | None = None,
             repositories: tuple[str, ...] | None = None) -> IssuedToken:
        """An installation token, narrowed as asked (GitHub's rules: no permission above
        the installation's, no repository it does not cover); TokenRequestError else."""
        granted = dict(installation.permissions)
        if permissions:  # PyGithub sends `{}` for "all": GitHub reads it so
            for name, level in permissions.items():
                if _LEVELS.get(str(level), 99) > _LEVELS.get(granted.get(name, ""), 0):
                    raise TokenRequestError("The permissions requested are not granted to "
                                            "this installation.")
            granted = {str(name): str(level) for name, level in permissions.items()}
        if repositories is not None and not all(
                installation.covers(f"{installation.owner}/{name}") for name in repositories):
            raise TokenRequestError("There is at least one repository that does not exist "
                                    "or is not accessible to the parent installation.")
        expires = float(int(self.clock() + app.token_lifetime))
        issued = IssuedToken(app.token_prefix + secrets.token_hex(18), installation, expires,
                             granted, repositories)
        with self.lock:
            self.tokens[issued.token] = issued
            app.issued.append(issued)
        return issued


def out_of_scope(credential: Credential | None, path: str) -> bool:
    """Whether an installation token is used on a repository its installation does not
    cover (REST and git paths; GitHub answers 403)."""
    if credential is None or credential.token is None:
        return False
    found = _REST_REPO.match(path) or _GIT_REPO.match(path)
    if found is None or _INSTALLATION.fullmatch(path):
        return False
    return not credential.token.covers(f"{found['owner']}/{found['name']}")
