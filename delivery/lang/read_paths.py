"""What a template read is, shared by the three readers of delivery/lang: template_reads
(plain `{{ x.y }}` text and the dispatch), light_reads (the subset the bundled workflows
use) and jinja_reads (Jinja2's own parse). A module below all three, so that none of them
imports another to get it (they used to import template_reads, which imports them).
"""

from __future__ import annotations

from typing import NamedTuple


class TemplateRead(NamedTuple):
    """(A named tuple: one per name of every template of a file, built in C.)"""

    key: str  # normalised dotted path; 'context.' prefix removed
    lineno: int  # line inside the template, from 1


def record_read(root: str, segments: list[str], lineno: int,
                reads: list[TemplateRead]) -> None:
    """Append the read of `root.segments...`: `context.x.y` reads `x.y`, `context` alone
    reads nothing."""
    if root == "context":
        if not segments:
            return
        root, segments = segments[0], segments[1:]
    reads.append(TemplateRead(".".join([root, *segments]), lineno))
