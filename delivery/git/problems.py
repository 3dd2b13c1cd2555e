"""git's stderr in one line a person can act on (SPEC §14: "A full disk, a stale
`index.lock` and similar faults end the stage with one line naming the path and the fix").

git explains a stale lock over six lines, the path in the first; a refused token as "could
not read Username" (it asked for a password it may not prompt for); a stalled transfer as
curl's error 28. These become one line naming the path or the token and what to do; any
other failure is git's last lines, joined. Header values (a token) are blanked either way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from delivery.token_permissions import missing

_LOCK = re.compile(r"Unable to create '(?P<path>[^']+\.lock)': File exists")
_REFUSED = ("could not read username", "could not read password", "authentication failed",
            "returned error: 401", "invalid username or password")
_FORBIDDEN = ("returned error: 403", "permission to ")
_SLOW = re.compile(r"Operation too slow\. Less than \d+ bytes/sec transferred the last "
                   r"(?P<seconds>\d+) seconds")
_DUBIOUS = re.compile(r"detected dubious ownership in repository at '(?P<path>[^']+)'")
_FULL = re.compile(r"(?P<line>[^\n]*No space left on device[^\n]*)")


def mask_headers(text: str, headers: Sequence[str]) -> str:
    """`text` with every header blanked: the whole header, its value, and the credential
    after a scheme (`Basic …`)."""
    for header in headers:
        _, _, value = header.partition(":")
        for secret in (header, value.strip(), value.strip().rpartition(" ")[2]):
            if secret:
                text = text.replace(secret, "***")
    return text


def last_lines(text: str, count: int = 4) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " / ".join(lines[-count:])


def describe(stderr: str, headers: Sequence[str], *, remote: str = "", token_name: str = "",
             what: str = "") -> tuple[str, str]:
    """(problem, fix) for git's `stderr`; the fix is empty when git's own words are all
    there is to say (the caller's fix then stands)."""
    text = mask_headers(stderr, headers)
    lock = _LOCK.search(text)
    if lock:
        path = lock.group("path")
        return (f"another git process seems to be running ({path} exists)",
                f"if none is, remove {path}, then resume")
    dubious = _DUBIOUS.search(text)
    if dubious:
        # git will not work in a repository another user owns (safe.directory): on a
        # shared runner, a clone cache another job's user made
        path = dubious.group("path")
        return (f"{path} is owned by another user, so git will not use it",
                "give this user a clone cache of its own (--cache DIR or XDG_CACHE_HOME), "
                "or remove that one, then resume")
    full = _FULL.search(text)
    if full:
        return (f"no space left on device: {full.group('line').strip()}",
                "free space on that disk, then resume")
    slow = _SLOW.search(text)
    if slow:
        return (f"{what or 'git'} stalled: no progress for {slow.group('seconds')} s",
                f"check that {host_of(remote) or 'the server'} can be reached, then resume")
    lowered = text.lower()
    if remote and headers and what.startswith("git push") and any(
            sign in lowered for sign in _FORBIDDEN):
        # a valid token without the right to write this repository (an App's Contents)
        return missing("git push", _repository_of(remote))
    if remote and any(sign in lowered for sign in _REFUSED):
        host = host_of(remote)
        if headers:
            token = f"the token ({token_name})" if token_name else "the token"
            return (f"{host} refused {token}: it may be revoked or expired, or not allowed "
                    f"to reach {remote}",
                    f"give a valid token{f' in {token_name}' if token_name else ''} "
                    "that may read and push to the repository, then resume")
        return (f"{host} asks for credentials for {remote} and none were given",
                "give a token that may read and push to the repository, then resume")
    return last_lines(text) or "git failed", ""


def _repository_of(url: str) -> str:
    """`owner/name` of a remote URL (`…/octo/api.git`), else the URL."""
    parts = url.rstrip("/").removesuffix(".git").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 else url


def host_of(url: str) -> str:
    """`scheme://host:port` of a URL; a path as it is."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else url
