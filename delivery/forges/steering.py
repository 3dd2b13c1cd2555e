"""Who steers a run, on the forge side (SPEC §14): the workflow's `trusted_bots` are
handed to a forge that tells people apart (GitHub, `probes.steering`); the local forge's
PRs are records on this machine, written by nobody else, so it has no strangers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from delivery.errors import RunRefused
from probes.steering import trusted_bots


@runtime_checkable
class SteeredForge(Protocol):
    def trust_bots(self, logins: Iterable[str]) -> None: ...


def workflow_bots(text: str) -> tuple[str, ...]:
    """The bots named by the graph's `trusted_bots="a[bot],b"` (RunRefused when the text
    is no list of logins: validation says so first; a library caller may skip it)."""
    try:
        return tuple(trusted_bots(text))
    except ValueError as error:
        raise RunRefused("trusted_bots", str(error),
                         'write logins separated by commas: trusted_bots="renovate[bot]"'
                         ) from None


def trust_workflow_bots(forge: object, bots: Iterable[str]) -> None:
    """Give `forge` the workflow's trusted bots, if it tells people apart."""
    if isinstance(forge, SteeredForge):
        forge.trust_bots(bots)
