"""A folder's worktree as saved with a run's state (SPEC §13): the record only; taking and
re-creating the snapshot is git's work (`delivery.git.restore`). Here, in the store layer,
because a store that keeps runs between machines hands these back (`RunStore.saved_worktrees`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class SavedWorktree:
    """What a folder's worktree was at a save: `base` (a commit on the remote), the
    branch, and the patch from `base` to the files (empty: the worktree was `base`)."""

    branch: str
    base: str
    patch: bytes = b""
    # files whose secrets (SPEC §14) were masked as `***` in the patch: the state ref
    # never holds them in the clear, and these files come back masked
    masked: tuple[str, ...] = ()

    def meta(self) -> bytes:
        fields: dict[str, object] = {"branch": self.branch, "base": self.base,
                                     "patch_bytes": len(self.patch)}
        if self.masked:
            fields["masked"] = list(self.masked)
        return json.dumps(fields, sort_keys=True).encode()

    @classmethod
    def parse(cls, meta: bytes | None, patch: bytes | None) -> SavedWorktree | None:
        """From the state ref's files; None when they are missing or malformed (the
        worktree then comes back from the pushed branch, as before snapshots existed)."""
        try:
            data = json.loads(meta or b"")
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        branch, base = data.get("branch"), data.get("base")
        if not (isinstance(branch, str) and isinstance(base, str) and _is_sha(base)):
            return None
        masked = data.get("masked")
        names = tuple(name for name in masked if isinstance(name, str)) \
            if isinstance(masked, list) else ()
        return cls(branch, base, patch or b"", names)


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
