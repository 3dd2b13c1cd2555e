"""`delivery action init`: the Action set up in minutes (SPEC §13 "Setting it up").

    delivery action init --repos repos.txt --state-repo octo/control
    delivery action init --org octo --topic payments --state-repo octo/control --create-labels

writes into `--out` (default `.github/workflows`) the control workflow (`delivery.yml`), the
worker workflow (`delivery-work.yml`) and, under `relay/`, the relay each target repository
copies (GitHub reads only the files directly in `.github/workflows`, so the control
repository does not run it); the repositories go to `.github/delivery-repos` beside it (one
`F=owner/name` a line, which the action reads). Then it prints the GitHub App to create,
where to install it, the secrets to set and the labels to create (or creates the labels).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TextIO

from delivery.cli import action_files
from delivery.errors import RunRefused
from delivery.forges.labels import ensure_labels
from delivery.forges.repo_selection import RepoSelection, resolve_repositories
from delivery.forges.select import require_settings
from probes.github_client import DEFAULT_API_URL, GitHubClient
from probes.github_errors import GitHubError

_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}\Z")
_ACTION = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100})@([0-9a-f]{40})\Z")
LABELS = {"delivery": ("0e8a16", "Start a delivery of this issue"),
          "delivery:stop": ("b60205", "Stop this issue's delivery")}
# what the App is granted (the token steps ask for no more); events: none, the workflows
# are woken by GitHub Actions' own triggers
PERMISSIONS = (("Contents", "read and write", "branches, commits, the runs' state refs"),
               ("Pull requests", "read and write", "open, update and merge the PRs"),
               ("Issues", "read and write", "comments, labels, the ticket"),
               ("Checks", "read-only", "CI results"),
               ("Commit statuses", "read and write", "the change set's status on each PR; CI's"),
               ("Actions", "read-only", "is a stale claim's job still running?"),
               ("Metadata", "read-only", "GitHub grants it with any other"))


def cmd_action(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        return _init(args, out, err)
    except RunRefused as refused:
        print(f"delivery action init: {refused}", file=err)
        return 2


def _init(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    control = args.state_repo.strip()
    if not _REPOSITORY.match(control):
        raise RunRefused(f"--state-repo {control!r}", "is not owner/name",
                         "name the control repository as on GitHub, e.g. octo/control")
    owner_repo, pin = _action(args.action)
    repos = _repositories(args)
    strangers = sorted({loc for loc in repos.values() if loc.split("/")[0] !=
                        control.split("/")[0]})
    if strangers:  # one App installation's token reaches one owner's repositories
        raise RunRefused(", ".join(strangers), f"are not owned by {control.split('/')[0]} "
                         "like the control repository", "keep the control repository and "
                         "the targets under one owner (one GitHub App installation)")
    out_dir: Path = args.out
    files = {out_dir / "delivery.yml": _render(action_files.CONTROL, owner_repo, pin, control),
             out_dir / "delivery-work.yml": _render(action_files.WORKER, owner_repo, pin,
                                                    control),
             out_dir / "relay" / "delivery.yml": _render(action_files.RELAY, owner_repo,
                                                         pin, control),
             out_dir.parent / "delivery-repos": _repos_file(repos)}
    listing = out_dir.parent / "delivery-repos"
    own_list = any(_same_file(path, listing) for path in (args.repos, args.repos_from)
                   if path is not None)
    if own_list:
        # the list the user wrote where init writes it (the README's way): completed in
        # place, their lines and comments kept, not refused as a file init would overwrite
        files[listing] = _completed(listing.read_text(encoding="utf-8"), repos)
    existing = [str(path) for path in files
                if path.exists() and not (own_list and path == listing)]
    if existing and not args.force:
        raise RunRefused(", ".join(existing), "exist already, and init never overwrites "
                         "a file unasked", "move them away, or run again with --force")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    labels = _create_labels(control) if args.create_labels else {}
    _print_steps(out, control, repos, files, labels, bool(args.action))
    return 0


def _action(given: str) -> tuple[str, str]:
    if not given:
        return action_files.EXAMPLE_ACTION, action_files.EXAMPLE_PIN
    match = _ACTION.match(given.strip())
    if match is None:
        raise RunRefused(f"--action {given!r}", "is not OWNER/REPO@SHA with a 40-character "
                         "commit", "pin the action to the commit of the release you vetted")
    return match.group(1), match.group(2)


def _repositories(args: argparse.Namespace) -> dict[str, str]:
    if args.repos is None and not args.org and not args.repos_from:
        raise RunRefused("action init", "was given no repositories",
                         "add --repos FILE or --org ORG [--topic T]")
    if (args.topic or args.search) and not args.org:
        raise RunRefused("--topic/--search", "narrow an --org search and no --org was given",
                         "add --org ORG")
    files = [path for path in (args.repos, args.repos_from) if path is not None]
    chosen: dict[str, str] = {}
    for index, path in enumerate(files or [None]):
        selection = RepoSelection(repos_from=path, org=args.org if index == 0 else "",
                                  topics=args.topic if index == 0 else (),
                                  search=args.search if index == 0 else "")
        chosen.update(resolve_repositories(selection, environ=os.environ).repos)
    for folder, location in chosen.items():
        if not _REPOSITORY.match(location):
            raise RunRefused(f"{folder}={location}", "is not a GitHub owner/name (the Action "
                             "works on GitHub repositories)", "list owner/name a line")
    return chosen


def _render(template: str, owner_repo: str, pin: str, control: str) -> str:
    return (template.replace(action_files.EXAMPLE_ACTION, owner_repo)
            .replace(action_files.EXAMPLE_PIN, pin)
            .replace(action_files.EXAMPLE_CONTROL, control))


def _same_file(path: Path, other: Path) -> bool:
    return path.exists() and other.exists() and path.resolve() == other.resolve()


def _completed(text: str, repos: dict[str, str]) -> str:
    """The user's list with every `owner/name` line given its folder (`web=octo/web`, as
    the action reads it) and the repositories other options added appended."""
    folder_of = {location: folder for folder, location in repos.items()}
    lines, seen = [], set()
    for line in text.splitlines():
        entry = line.strip()
        if entry and not entry.startswith("#"):
            location = entry.partition("=")[2].strip() if "=" in entry else entry
            seen.add(location)
            if "=" not in entry and location in folder_of:
                line = f"{folder_of[location]}={location}"
        lines.append(line)
    lines += [f"{folder}={location}" for folder, location in repos.items()
              if location not in seen]
    return "\n".join(lines) + "\n"


def _repos_file(repos: dict[str, str]) -> str:
    lines = ["# The repositories of delivery's runs: one FOLDER=owner/name a line. Adding one",
             "# is a line here, plus the relay (workflows/relay/delivery.yml) in it.",
             *(f"{folder}={location}" for folder, location in repos.items())]
    return "\n".join(lines) + "\n"


def _create_labels(control: str) -> dict[str, str]:
    require_settings("github", os.environ)
    client = GitHubClient(os.environ["GITHUB_TOKEN"].strip(),
                          api_url=os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL)
    try:
        return ensure_labels(client, control, LABELS)
    except GitHubError as error:
        needs = " (the token needs Issues: write on it)" if error.status in (401, 403) else ""
        raise RunRefused(f"labels of {control}", f"could not be created: {error.reason}"
                         f"{needs}", "create them by hand (listed by a run without "
                         "--create-labels), or give a token that may") from None
    finally:
        client.close()


def _print_steps(out: TextIO, control: str, repos: dict[str, str], files: dict[Path, str],
                 labels: dict[str, str], pinned: bool) -> None:
    owner = control.split("/")[0]
    targets = sorted(set(repos.values()))
    say = out.write
    say("delivery action init: wrote\n")
    for path in files:
        say(f"  {path}\n")
    if not pinned:
        say(f"\nThe workflows use {action_files.EXAMPLE_ACTION}@{action_files.EXAMPLE_PIN}: "
            "run again with --action OWNER/REPO@SHA (the release you vetted), or edit "
            "the `uses:` lines.\n")
    say("\n1. Create a GitHub App (github.com/organizations/" + owner +
        "/settings/apps/new; webhook off, subscribe to no events) with these repository "
        "permissions:\n")
    for name, level, why in PERMISSIONS:
        say(f"     {name}: {level}  ({why})\n")
    say(f"2. Install it on {control} and on each target repository:\n")
    for target in targets:
        say(f"     {target}\n")
    say(f"3. Set, in {control} and in each target repository (or once for the "
        f"organisation {owner}):\n"
        "     variable DELIVERY_APP_ID            the App's id\n"
        "     secret   DELIVERY_APP_PRIVATE_KEY   a private key of the App\n"
        "     secret   ANTHROPIC_API_KEY          for the claude agent\n"
        "   The default GITHUB_TOKEN cannot do the work: it reaches no other repository "
        "and its pushes start no CI; the workflows mint an App installation token.\n")
    say("4. Copy " + str(next(p for p in files if p.parent.name == "relay")) +
        " to .github/workflows/delivery.yml in each target repository (its `workflows: "
        "[ci]` names that repository's CI workflows).\n")
    if labels:
        say(f"5. Labels in {control}: " + ", ".join(f"{name} ({state})" for name, state in
                                                   labels.items()) + "\n")
    else:
        say(f"5. Create the labels in {control} (or run again with --create-labels):\n")
        for name, (color, description) in LABELS.items():
            say(f"     {name}  #{color}  {description}\n")
    say("6. Commit and push the files; label an issue `delivery` to start a delivery.\n"
        "Adding a repository later: one line in .github/delivery-repos, the relay file in "
        "it, and the App installed on it.\n")
