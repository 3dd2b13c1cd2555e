"""Who steers a run on GitHub (SPEC §14 "Only people who may merge steer a run").

Reviews, review threads and labels count only when their author may merge: a user with
`admin`, `maintain` or `write` permission on the repository, or a bot account the
workflow names in `trusted_bots`. Everyone else — anyone who may comment on a public
repository, and bots (`…[bot]`, GraphQL's `Bot`) not named — is listed by login as
ignored, and their words never reach a prompt.

Review opinions are filtered by GitHub itself (`latestOpinionatedReviews(writersOnly:
true)`). Thread authors and label setters are looked up with the repository's
`collaborators(login:)` connection, batched into one GraphQL query per probe round for
the logins not seen before, and remembered for the rest of the run's process (`Stewards`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

BOT_SUFFIX = "[bot]"
WRITE_PERMISSIONS = frozenset({"ADMIN", "MAINTAIN", "WRITE"})
MAX_LOOKUPS_PER_QUERY = 100
# a GitHub login: letters, digits and single hyphens (an App's bot adds `[bot]`)
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")

NO_PERMISSION = "no write permission"
UNTRUSTED_BOT = "bot account, not in trusted_bots"
NO_ACCOUNT = "deleted account"


def actor_login(actor: Any) -> str:
    """The login of a GraphQL actor, a bot's spelled as REST spells it (`name[bot]`):
    GraphQL answers a `Bot`'s login without the suffix. "" for a deleted account."""
    if not isinstance(actor, Mapping):
        return ""
    login = str(actor.get("login") or "")
    if login and actor.get("__typename") == "Bot" and not is_bot(login):
        login += BOT_SUFFIX
    return login


def is_bot(login: str) -> bool:
    return login.lower().endswith(BOT_SUFFIX)


def trusted_bots(text: str) -> frozenset[str]:
    """`trusted_bots="renovate[bot], dependabot"` as lower-case `name[bot]` logins; a
    ValueError naming the first word that is not a login."""
    names: set[str] = set()
    for word in (part.strip() for part in text.split(",")):
        if not word:
            continue
        if not _LOGIN.fullmatch(word):
            raise ValueError(f"'{word}' is not a GitHub login")
        names.add(word.lower() if is_bot(word) else f"{word.lower()}{BOT_SUFFIX}")
    return frozenset(names)


def permissions_query(lookups: Sequence[tuple[str, str]]) -> tuple[str, dict[str, Any]]:
    """One query reading the permission of each (`owner/name`, login), aliases `u0`, `u1`,
    …; a login with no edge is no collaborator (no write permission)."""
    decls: list[str] = []
    fields: list[str] = []
    variables: dict[str, Any] = {}
    for i, (repository, login) in enumerate(lookups):
        owner, _, name = repository.partition("/")
        decls += [f"$o{i}: String!", f"$n{i}: String!", f"$l{i}: String!"]
        variables.update({f"o{i}": owner, f"n{i}": name.removesuffix(".git"), f"l{i}": login})
        fields.append(f"  u{i}: repository(owner: $o{i}, name: $n{i}) "
                      f"{{ collaborators(login: $l{i}, first: 1) "
                      "{ edges { permission node { login } } } }")
    text = f"query Stewards({', '.join(decls)}) {{\n" + "\n".join(fields) + "\n}\n"
    return text, variables


def permissions_answer(lookups: Sequence[tuple[str, str]], data: Mapping[str, Any]
                       ) -> dict[tuple[str, str], bool | None]:
    """Whether each looked-up login may merge; None where the answer holds nothing (the
    repository or its collaborators could not be read)."""
    found: dict[tuple[str, str], bool | None] = {}
    for i, (repository, login) in enumerate(lookups):
        collaborators = (data.get(f"u{i}") or {}).get("collaborators")
        if not isinstance(collaborators, Mapping):
            found[(repository, login)] = None
            continue
        edges = [e for e in collaborators.get("edges") or [] if isinstance(e, Mapping)
                 and str((e.get("node") or {}).get("login") or "").lower() == login.lower()]
        found[(repository, login)] = any(e.get("permission") in WRITE_PERMISSIONS
                                         for e in edges)
    return found


class Stewards:
    """Who may steer, per repository: the trusted bots and what was learnt of users'
    permissions (kept for the run's process: a permission rarely changes mid-run, and a
    probe round stays one request once its authors are known)."""

    def __init__(self, bots: Iterable[str] = ()) -> None:
        self.bots = frozenset(bots)
        self._writers: dict[tuple[str, str], bool] = {}

    def trust(self, bots: Iterable[str]) -> None:
        self.bots = frozenset(bots)

    @staticmethod
    def _key(repository: str, login: str) -> tuple[str, str]:
        return repository.lower().removesuffix(".git"), login.lower()

    def learn(self, repository: str, login: str, writer: bool) -> None:
        if login and not is_bot(login):
            self._writers[self._key(repository, login)] = writer

    def unknown(self, repository: str, logins: Iterable[str]) -> list[str]:
        """The users among `logins` whose permission here is not known yet (bots and
        deleted accounts need no look-up)."""
        seen: dict[str, str] = {}
        for login in logins:
            if login and not is_bot(login) and \
                    self._key(repository, login) not in self._writers:
                seen.setdefault(login.lower(), login)
        return list(seen.values())

    def why_ignored(self, repository: str, login: str) -> str | None:
        """None when `login` steers here, else why not (a login never looked up is
        treated as one without permission: nothing unverified steers)."""
        if not login:
            return NO_ACCOUNT
        if is_bot(login):
            return None if login.lower() in self.bots else UNTRUSTED_BOT
        return None if self._writers.get(self._key(repository, login)) else NO_PERMISSION
