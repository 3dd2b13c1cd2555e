"""What a run is given on its command line or by its caller, read before anything runs:
`NAME=VALUE` options, a gate's answers, and the branch a run's ticket names.
(Apart from the runner: the CLI's light commands read options without loading the engine.)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from delivery.errors import RunRefused


def run_branch(values: Mapping[str, Any], run_id: str) -> str:
    """`delivery/<ticket slug>` when the run has a `ticket` input, else `delivery/<run id>`.
    (A resumed run keeps the branch run.json recorded, whatever this names now.)"""
    slug = ticket_slug(str(values.get("ticket") or ""))
    return f"delivery/{slug or run_id}"


# hex digits of the ticket's hash in its slug: two tickets whose readable parts collide
# (`…/ENG-42/fix-login` and `…/ENG-97/fix-login`, `octo/web#12` and `acme/web#12`) get
# branches of their own (SPEC §14 "Branches are the run's own")
SLUG_HASH = 6


def ticket_slug(ticket: str) -> str:
    """`https://github.com/o/web/issues/12` -> `web-12-<hash>`; `https://x/browse/T-1` ->
    `t-1-<hash>`, where <hash> is the first hex digits of the whole ticket's SHA-256."""
    ticket = ticket.strip()
    readable = _readable_slug(ticket)
    if not readable:
        return ""
    return f"{readable}-{hashlib.sha256(ticket.encode()).hexdigest()[:SLUG_HASH]}"


def _readable_slug(ticket: str) -> str:
    parts = [part for part in re.split(r"[/?#]", ticket.split("://", 1)[-1]) if part][1:]
    if not parts:
        return ""
    words = parts[-1:]
    if parts[-1].isdigit() and len(parts) >= 3:
        words = [parts[-3], parts[-1]]  # owner/name/issues/12: the name and the number
    slug = re.sub(r"[^a-z0-9._-]+", "-", "-".join(words).lower()).strip("-.")
    return slug[:40].rstrip("-.")


def answer_lists(answers: Mapping[str, str | Sequence[str]]) -> dict[str, list[str]]:
    return {node: [given] if isinstance(given, str) else list(given)
            for node, given in answers.items()}


def parse_answers(items: Sequence[str]) -> dict[str, list[str]]:
    """Repeated `--answer NODE=LABEL`: a gate's answers in the order given."""
    answers: dict[str, list[str]] = {}
    for item in items:
        for node_id, label in parse_assignments([item], "--answer").items():
            answers.setdefault(node_id, []).append(label)
    return answers


def parse_assignments(items: Sequence[str], option: str) -> dict[str, str]:
    """`K=V` items of a repeated option; RunRefused names the bad one, or the name given
    twice (the second value would silently win)."""
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise RunRefused(f"{option} {item!r}", "is not NAME=VALUE",
                             f"write {option} name=value")
        name = name.strip()
        if name in values:
            raise RunRefused(f"{option} {name}=", "is given twice",
                             f"give {option} {name}=VALUE once")
        values[name] = value
    return values
