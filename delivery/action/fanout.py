"""The Action's side of a stage fanned out across runners (SPEC §13 "Fan-out across
runners", "Setting it up"): the `max-runners` input, the `chunks` a paused run hands to the
matrix, mode `work` (one chunk, `delivery work`), and the repositories read from
`.github/delivery-repos` when the `repos` input is empty.

    max_runners_option("20")                 # 20, or RunRefused naming the rule
    chunks_of(outcome_json)                  # [1, 2, 3] when the run paused for a fan-out
    repos_text(inputs, workspace)            # the `repos` input, or the file's lines
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from delivery.errors import RunRefused
from delivery.git.runref import is_run_id

DEFAULT_MAX_RUNNERS = 20
MATRIX_LIMIT = 256  # GitHub's limit on the jobs of one matrix
REPOS_FILE = Path(".github") / "delivery-repos"
FAN_OUT = "fan_out"


def max_runners_option(text: str) -> int:
    """The `max-runners` input: 1 (every stage on this runner) to GitHub's 256."""
    value = text.strip() or str(DEFAULT_MAX_RUNNERS)
    if not value.isdigit() or not 1 <= int(value) <= MATRIX_LIMIT:
        raise RunRefused(f"max-runners {text!r}", f"is not a number from 1 to {MATRIX_LIMIT} "
                         "(GitHub runs at most 256 jobs of one matrix)",
                         f"give how many worker jobs a stage may use, e.g. "
                         f"{DEFAULT_MAX_RUNNERS}")
    return int(value)


def chunks_of(outcome: Mapping[str, Any]) -> list[int]:
    """The chunk numbers of a run that paused to fan a stage out (its `--json` object:
    status `paused`, reason `fan_out`, `chunks`); none otherwise."""
    if outcome.get("status") != "paused" or outcome.get("reason") != FAN_OUT:
        return []
    chunks = outcome.get("chunks")
    if not isinstance(chunks, list):
        return []
    return [chunk for chunk in chunks if isinstance(chunk, int) and not isinstance(chunk, bool)]


def repos_text(given: str, workspace: Path) -> str:
    """The `repos` input, or — empty — the checkout's `.github/delivery-repos` (one
    `F=owner/name` a line), so that adding a repository is one line in one file."""
    if given.strip():
        return given
    path = workspace / REPOS_FILE
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as err:
        raise RunRefused(str(REPOS_FILE), f"cannot be read: {err}",
                         "write one F=owner/name a line in it (delivery action init "
                         "writes it), or give the action's repos input") from None


def work_arguments(state: str, run_id: str, chunk: str) -> list[str]:
    """`delivery work` for one chunk, or RunRefused when the inputs cannot name one."""
    if not run_id:
        raise RunRefused("mode work", "needs the run whose chunk to run",
                         "give run-id: ${{ needs.deliver.outputs.run-id }}")
    if not chunk.isdigit():
        raise RunRefused(f"chunk {chunk!r}", "is not a chunk number",
                         "give chunk: ${{ matrix.chunk }}, over the chunks output")
    return ["work", "--state", state, run_id, "--chunk", chunk, "--json"]


def join_run_id(run_id: str) -> str:
    """Mode join's run: the one the round of workers ran for."""
    if not is_run_id(run_id):
        raise RunRefused(f"mode join run-id {run_id!r}", "is not a run id",
                         "give the run the workers ran for: run-id: ${{ inputs.run-id }}")
    return run_id


def run_work(arguments: list[str], env: Mapping[str, str], workspace: Path,
             ) -> dict[str, Any]:
    """`delivery work …` in `workspace` (its delivery.toml); its `--json` object, with the
    text it wrote on stderr as `failure_reason` when it printed none (a refusal)."""
    command = [sys.executable, "-c", "from delivery.cli import entry; entry()", *arguments]
    done = subprocess.run(command, env=dict(env),
                          cwd=workspace, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stderr)
    answer = _json_object(done.stdout)
    if not isinstance(answer, dict) or "status" not in answer:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else \
            f"delivery work exited {done.returncode}"
        return {"status": "refused" if done.returncode == 2 else "failed",
                "failure_reason": why, "exit": done.returncode}
    return {**answer, "exit": done.returncode}


def _json_object(text: str) -> Any:
    """The object `--json` printed: indented over many lines, and between the CLI's own
    `::stop-commands::` lines on a runner (GITHUB_ACTIONS=true), so never one line."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return {}
    try:
        return json.loads(text[start:end + 1])
    except ValueError:
        return {}
