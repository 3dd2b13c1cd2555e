"""Which run a command means: a run directory, a run id or `--last`. Apart from the
commands so that `delivery review --run` (forge_commands) finds a run the same way without
importing them, which import it."""

from __future__ import annotations

from pathlib import Path

from delivery.errors import RunRefused


def find_run(reference: str | None, *, last: bool = False,
             workspace: Path | None = None) -> Path:
    """A run directory from a path, a run id (under the workspace's .delivery/runs/), or
    `last`: the newest run there."""
    runs = (workspace or Path.cwd()) / ".delivery" / "runs"
    if last:
        if reference:
            raise RunRefused("--last", f"was given with a run ({reference})",
                             "pass either a run or --last")
        found = [p.parent for p in runs.glob("*/run.json") if p.is_file()] \
            if runs.is_dir() else []
        if not found:
            raise RunRefused("--last", f"there is no run under {runs}",
                             "start one with delivery run, or pass --workspace")
        return max(found, key=_started)
    if not reference:
        raise RunRefused("RUN", "no run was named", "pass a run directory, a run id or --last")
    candidate = Path(reference)
    if (candidate / "run.json").is_file():
        return candidate
    by_id = runs / reference
    if "/" not in reference and "\\" not in reference and (by_id / "run.json").is_file():
        return by_id
    raise RunRefused(f"run {reference!r}", f"is neither a run directory nor a run id under "
                     f"{runs}", "pass the run directory printed by delivery run, or --last")


def _started(run: Path) -> tuple[int, str]:
    """When a run started: its workflow copy is written once, first (run ids sort by the
    second only)."""
    try:
        return (run / "workflow.dot").lstat().st_mtime_ns, run.name
    except OSError:
        return 0, run.name
