"""The stop switch (SPEC §7.1): the label `delivery:stop` on any open PR of the run, or on
the ticket when it is a GitHub issue, pauses the run at the next stage boundary (status
`paused`, reason `stopped`), naming who set it; removing the label and resuming goes on.

Read at the boundary before each stage that spends (agents), writes to the PRs (publish,
merge, respond) or asks people (human gates), and before parallel sections and manager
loops, which hold such stages — one GraphQL request over the whole set. A probe reads the
labels too, in its one request (the GitHub forge's `observe`): the boundary right after it
uses that read, whatever the next stage, so a run looping probe → route → wait stops
within one interval at no extra request, and a stage that spends right after a probe
needs no read of its own. Other boundaries (scripts, worktree stages, waits not after a
probe) spend nothing and leave the PRs alone, and are not read at.
A read that fails does not stop the run (it is recorded, and the next boundary reads
again): a flaky read must not be mistaken for a person's decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from delivery.engine.context import Context
from delivery.errors import DeliveryError, PauseReason, PauseRequested
from delivery.forges.stop_label import (
    PROBED_KEY,
    STOP_LABEL,
    Stop,
    StopLabelForge,
    StopTarget,
    ticket_issue,
)
from delivery.lang.model import Node, NodeType

# the stages a stop label holds back (see the module docstring)
CHECKED: Final = frozenset({NodeType.AGENT, NodeType.PROMPT, NodeType.PUBLISH,
                            NodeType.MERGE, NodeType.RESPOND, NodeType.HUMAN,
                            NodeType.PARALLEL, NodeType.MANAGER_LOOP})


class StopPause(PauseRequested):
    """The stop label is set: the run pauses before `node_id`."""

    reason = PauseReason.STOP_LABEL

    def __init__(self, node_id: str, stop: Stop) -> None:
        who = f" by {stop.by}" if stop.by else ""
        when = f" at {stop.at}" if stop.at else ""
        super().__init__(node_id, message=(
            f"stopped: the label {STOP_LABEL} was set on {stop.where}{who}{when}; the run "
            f"paused before '{node_id}' — remove the label and resume the run to go on"),
            event_fields={"where": stop.where, "by": stop.by, "at": stop.at,
                          "url": stop.url})


class StopSwitch:
    """Asked by the engine before each stage of the main path."""

    def __init__(self, forge: StopLabelForge, targets: Callable[[], Sequence[StopTarget]],
                 event: Callable[..., object]) -> None:
        self.forge = forge
        self.targets = targets  # read at each boundary: the ticket is in the context
        self.event = event
        self.reported: set[tuple[str, str, str]] = set()  # ignored labels already said
        self.context: Context | None = None  # where a probe leaves its read (PROBED_KEY)

    def _probed(self) -> Stop | None:
        """The read of the probe that ran last, if it read everything (consumed: a
        later boundary reads afresh); an empty `Stop` when it found no label."""
        seen = self.context.get(PROBED_KEY) if self.context is not None else None
        if not isinstance(seen, dict):
            return None
        assert self.context is not None
        self.context.delete(PROBED_KEY)
        if not seen:
            return Stop("", "", "", "")
        return Stop(str(seen.get("where") or ""), str(seen.get("by") or ""),
                    str(seen.get("at") or ""), str(seen.get("url") or ""),
                    ignored=str(seen.get("ignored") or ""))

    @classmethod
    def for_run(cls, forge: object, repos: Mapping[str, str], branch: str, context: Context,
                event: Callable[..., object]) -> StopSwitch | None:
        """The switch of a run: where the forge has labels (GitHub) and the run has
        folders on it; None otherwise (the local forge has no labels). The ticket is read
        from the context at each boundary; it counts when it is an issue on the forge's
        own server."""
        if not isinstance(forge, StopLabelForge) or not branch or not repos:
            return None
        server = str(getattr(forge, "server_url", "") or "")

        def targets() -> list[StopTarget]:
            found = [StopTarget(folder, repository, head_branch=branch)
                     for folder, repository in repos.items() if repository]
            ticket = ticket_issue(str(context.get("ticket") or ""), server)
            if ticket is not None:
                found.append(StopTarget("ticket", ticket[0], issue=ticket[1]))
            return found

        switch = cls(forge, targets, event)
        switch.context = context
        return switch

    def check(self, node: Node) -> None:
        stop = self._probed()
        if stop is None:
            if node.type not in CHECKED:
                return
            try:
                stop = self.forge.stop_label(self.targets())
            except DeliveryError as error:
                self.event("stop_switch_unread", node=node.id, problem=str(error))
                return
        elif not stop.where:
            return  # the probe read every PR and the ticket: no label
        if stop is not None and stop.ignored:
            # set by someone who may not steer the run (SPEC §14): said once, not obeyed
            if (stop.where, stop.by, stop.at) not in self.reported:
                self.reported.add((stop.where, stop.by, stop.at))
                self.event("stop_label_ignored", node=node.id, where=stop.where,
                           by=stop.by, at=stop.at, why=stop.ignored)
            return
        if stop is not None:
            raise StopPause(node.id, stop)
