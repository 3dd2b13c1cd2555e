"""Which repositories a run works on (SPEC §12 "Choosing the repositories"): `--repo F=LOC`,
`--repos-from FILE` and `--org ORG` with `--topic`/`--search`, resolved into one
folder -> location map before anything runs. Shared by `delivery run`, `delivery preflight`
and whatever else takes a set of repositories (`delivery action init`).

    chosen = resolve_repositories(RepoSelection(org="octo", topics=("payments",)),
                                  environ=os.environ)
    chosen.repos        # {"api": "octo/api", "web_app": "octo/web-app"}
    chosen.lines()      # "api = octo/api (--org octo)", ... for a person to read

A folder name not given is made from the repository's name (`octo/my-api` -> `my_api`);
two repositories that would share one, or one repository given twice, are refused naming
both, since the second would silently replace the first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from delivery.errors import RunRefused
from delivery.forges.select import is_github_location, require_settings
from delivery.lang.declarations import IDENTIFIER, reserved_reason
from probes.github_client import DEFAULT_API_URL, GitHubClient
from probes.github_errors import GitHubError

# the name `foreach` stages give the folder they work on: a folder may not take it
RESERVED_FOLDER = "folder"
_ORG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\Z")
_TOPIC = re.compile(r"[a-z0-9][a-z0-9-]{0,49}\Z")  # GitHub's own rule for topics
_LOCATION = re.compile(r"\S+\Z")
PER_PAGE = 100
SEARCH_LIMIT = 1000  # GitHub's search answers its first 1,000 results, no more


@dataclass(frozen=True)
class RepoSelection:
    """What the caller asked for; `repos` are `F=LOC` items as given to `--repo`."""

    repos: Sequence[str] = ()
    repos_from: Path | None = None
    org: str = ""
    topics: Sequence[str] = ()
    search: str = ""

    @property
    def beyond_repo(self) -> bool:
        """More than `--repo`: the resolved list is worth printing."""
        return self.repos_from is not None or bool(self.org)


@dataclass(frozen=True)
class _Entry:
    folder: str
    location: str
    source: str  # where it was given: `--repo api=octo/api`, `repos.txt:3`, `--org octo`
    named: bool  # the folder name was given, not made from the repository's
    option: bool = False  # given by --repo


@dataclass(frozen=True)
class Chosen:
    """The resolved repositories, folder -> location, in the order given."""

    repos: dict[str, str]
    sources: dict[str, str] = field(default_factory=dict)  # folder -> where it came from

    def lines(self) -> list[str]:
        return [f"{folder} = {location} ({self.sources.get(folder, '--repo')})"
                for folder, location in self.repos.items()]


def resolve_repositories(selection: RepoSelection, *, environ: Mapping[str, str],
                         client: GitHubClient | None = None) -> Chosen:
    """The union of every source, or RunRefused (one line: the rule and the fix).
    `--repo` locations are kept as given (the caller resolves its paths); `--repos-from`
    paths are relative to the file. `client` answers the search (default: GitHub from
    `environ`)."""
    entries = _from_repo_options(selection.repos)
    if selection.repos_from is not None:
        entries += read_repos_file(selection.repos_from)
    if (selection.topics or selection.search) and not selection.org:
        raise RunRefused("--topic/--search", "narrow an --org search and no --org was "
                         "given", "add --org ORG")
    if selection.org:
        entries += search_org(selection.org, selection.topics, selection.search,
                              environ=environ, client=client)
    return _union(entries)


def folder_name(location: str) -> str:
    """The folder a repository gets when none is given: its name (the last part of
    owner/name or of the path, without `.git`) with every non-identifier character as `_`
    (and `_` before a leading digit)."""
    name = location.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    name = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return f"_{name}" if name[:1].isdigit() else name


def read_repos_file(path: Path) -> list[_Entry]:
    """`--repos-from FILE`: one `LOC` or `NAME=LOC` a line (owner/name or a path, relative
    to the file's folder), `#` comments (a whole line, or after a space), blank lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else \
            type(error).__name__
        raise RunRefused(f"--repos-from {path}", f"cannot be read ({reason})",
                         "give a UTF-8 text file with one owner/name or path a line") from None
    folder_of_file = path.expanduser().absolute().parent
    entries: list[_Entry] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*", "", raw).strip()
        if not line:
            continue
        where = f"{path}:{number}"
        name, equals, location = line.partition("=")
        if not equals:
            name, location = "", line
        name, location = name.strip(), location.strip()
        if not location:
            raise RunRefused(where, f"{line!r} names no repository",
                             "write NAME=owner/name, owner/name or a path")
        if not _LOCATION.match(location):
            raise RunRefused(where, f"{location!r} is not owner/name or a path",
                             "write one repository a line, without spaces")
        if name and not IDENTIFIER.match(name):
            raise RunRefused(where, f"the folder name {name!r} is not an identifier",
                             "folder names match [A-Za-z_][A-Za-z0-9_]*, e.g. web or api_v2")
        if not is_github_location(location, folder_of_file):
            location = str((folder_of_file / Path(location).expanduser()).resolve())
        entries.append(_Entry(name or folder_name(location), location, where, bool(name)))
    return entries


def search_org(org: str, topics: Sequence[str], search: str, *,
               environ: Mapping[str, str], client: GitHubClient | None = None) -> list[_Entry]:
    """The organisation's repositories that GitHub's repository search finds, each topic
    required, archived repositories and forks left out, every page read."""
    if not _ORG.match(org):
        raise RunRefused(f"--org {org!r}", "is not a GitHub organisation or user name",
                         "give the name as in github.com/NAME (letters, digits, '-')")
    for topic in topics:
        if not _TOPIC.match(topic):
            raise RunRefused(f"--topic {topic!r}", "is not a GitHub topic (lower-case "
                             "letters, digits and '-', at most 50)",
                             "give one topic per --topic, as GitHub shows it")
    query = " ".join(part for part in [f"org:{org}", *(f"topic:{t}" for t in topics),
                                       search.strip(), "archived:false"] if part)
    source = " ".join([f"--org {org}", *(f"--topic {t}" for t in topics),
                       *([f"--search {search.strip()!r}"] if search.strip() else [])])
    own = client is None
    if client is None:
        require_settings("github", environ)
        client = GitHubClient(environ["GITHUB_TOKEN"].strip(),
                              api_url=environ.get("GITHUB_API_URL") or DEFAULT_API_URL)
    try:
        found = _search_pages(client, org, query, source)
    except GitHubError as error:
        raise RunRefused(source, f"GitHub's repository search failed: {error.reason}",
                         "check GITHUB_TOKEN and GITHUB_API_URL, then run again") from None
    finally:
        if own:
            client.close()
    entries = [_Entry(folder_name(name), name, source, False) for name in sorted(
        found, key=str.lower)]
    if not entries:
        raise RunRefused(source, "found no repository (archived repositories and forks are "
                         "left out)", "check the names, or drop a --topic or the --search")
    return entries


def _search_pages(client: GitHubClient, org: str, query: str, source: str) -> list[str]:
    found: list[str] = []
    page = 1
    while True:
        answer = client.rest("GET", "/search/repositories?" + urlencode(
            {"q": query, "per_page": PER_PAGE, "page": page}))
        if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
            raise RunRefused(source, "GitHub's repository search answered no list",
                             "run again; check GITHUB_API_URL")
        total = answer.get("total_count")
        if isinstance(total, int) and total > SEARCH_LIMIT:
            raise RunRefused(source, f"matches {total} repositories, and GitHub's search "
                             f"answers only its first {SEARCH_LIMIT}",
                             "narrow it with --topic or --search")
        if answer.get("incomplete_results") is True:
            raise RunRefused(source, "GitHub's search timed out and answered in part",
                             "run again, or narrow it with --topic or --search")
        items = answer["items"]
        for item in items:
            # GitHub's qualifiers already leave these out; checked again so a query a
            # server reads otherwise (--search with its own qualifiers) takes no more
            if not isinstance(item, dict) or item.get("archived") or item.get("fork"):
                continue
            name = str(item.get("full_name") or "")
            owner = name.split("/", 1)[0]
            if name and owner.lower() == org.lower():
                found.append(name)
        if len(items) < PER_PAGE or page * PER_PAGE >= SEARCH_LIMIT:
            return found
        page += 1


def _from_repo_options(items: Sequence[str]) -> list[_Entry]:
    entries: list[_Entry] = []
    for item in items:
        name, equals, location = item.partition("=")
        if not equals or not name.strip():
            raise RunRefused(f"--repo {item!r}", "is not NAME=VALUE",
                             "write --repo name=value")
        entries.append(_Entry(name.strip(), location, f"--repo {name.strip()}={location}",
                              True, option=True))
    return entries


def _union(entries: Sequence[_Entry]) -> Chosen:
    by_folder: dict[str, _Entry] = {}
    by_repository: dict[str, _Entry] = {}
    for entry in entries:
        _check_folder(entry)
        key = entry.location.rstrip("/").removesuffix(".git").lower()
        twice = by_repository.get(key)
        # two --repo of one repository: the run refuses them itself, saying why a
        # repository cannot be two folders
        if twice is not None and not (twice.option and entry.option):
            raise RunRefused(entry.location, f"is given twice: by {twice.source} and by "
                             f"{entry.source}", "give each repository once")
        clash = by_folder.get(entry.folder)
        if clash is not None:
            fix = ("name one of them: NAME=owner/name in the --repos-from file, or "
                   "--repo NAME=LOC" if not (clash.named and entry.named)
                   else "give each folder its own name")
            raise RunRefused(f"folder '{entry.folder}'", f"would be both {clash.location} "
                             f"({clash.source}) and {entry.location} ({entry.source})", fix)
        by_folder[entry.folder] = entry
        by_repository[key] = entry
    return Chosen({f: e.location for f, e in by_folder.items()},
                  {f: e.source for f, e in by_folder.items()})


def _check_folder(entry: _Entry) -> None:
    how = "" if entry.named else f" (made from {entry.location})"
    fix = f"name it: NAME={entry.location} in the --repos-from file, or --repo " \
        f"NAME={entry.location}"
    if not IDENTIFIER.match(entry.folder):
        raise RunRefused(entry.source, f"the folder name {entry.folder!r}{how} is not an "
                         "identifier", fix if not entry.named else
                         "folder names match [A-Za-z_][A-Za-z0-9_]*")
    reason = "it is reserved for the folder a foreach stage works on" \
        if entry.folder == RESERVED_FOLDER else reserved_reason(entry.folder)
    if reason:
        raise RunRefused(entry.source, f"the folder name '{entry.folder}'{how} is taken: "
                         f"{reason}", fix if not entry.named else "choose another name")
