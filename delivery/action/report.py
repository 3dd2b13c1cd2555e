"""What the Action tells GitHub: step outputs (`GITHUB_OUTPUT`) and the job summary
(`GITHUB_STEP_SUMMARY`: the path, the graph as Mermaid with the path highlighted, one row
per PR with its state and link)."""

from __future__ import annotations

import json
import string
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from delivery.errors import WorkflowInvalid, WorkflowSyntaxError
from delivery.lang.drawing import to_mermaid
from delivery.validation.loader import load_workflow
from probes.waiting import run_waiting_for, waiting_summary

if TYPE_CHECKING:
    from delivery.action.main import Result


def _append(path: str | None, text: str) -> None:
    if path:
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(text)


def _output(name: str, value: str) -> str:
    """One output; a value with a newline uses the heredoc form with a random delimiter."""
    if "\n" not in value and "\r" not in value:  # a CR ends a line for some readers too
        return f"{name}={value}\n"
    delimiter = f"ghadelimiter_{uuid.uuid4()}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def primary(results: Sequence[Result]) -> Result | None:
    """The result the outputs describe: the first run that did something."""
    for result in results:
        if result.status not in ("ignored", "superseded"):
            return result
    return results[0] if results else None


def write_outputs(environ: Mapping[str, str], results: Sequence[Result]) -> None:
    main = primary(results)
    context: Mapping[str, Any] = main.outcome.context if main and main.outcome else {}
    values = {"status": main.status if main else "ignored",
              "pr-state": str(context.get("pr.state") or ""),
              "run-id": main.run_id if main else "",
              # a JSON list for `strategy.matrix` (`fromJSON`): `[]` runs no worker job
              "chunks": json.dumps(main.chunks if main else [], separators=(",", ":")),
              "runs": ",".join(f"{r.run_id}:{r.status}" for r in results if r.run_id)}
    _append(environ.get("GITHUB_OUTPUT"), "".join(_output(k, v) for k, v in values.items()))


def summary_markdown(results: Sequence[Result]) -> str:
    parts: list[str] = []
    for result in results:
        title = f"run `{result.run_id}`" if result.run_id else "no run"
        parts.append(f"## delivery: {title} — {result.status}\n")
        if result.reason:
            parts.append(f"{_as_written(result.reason)}\n")
        parts += _fan_out(result)
        outcome = result.outcome
        if outcome is None:
            continue
        parts.append("**Path:** " + " → ".join(f"`{node}`" for node in outcome.path) + "\n")
        waits = run_waiting_for(outcome.context, result.status, list(result.repos))
        if waits:  # what the run waits for, per folder (SPEC §7.1 `wait`)
            parts.append(f"**Waiting for:** {_cell(waiting_summary(waits))}\n")
        if outcome.budget:  # the run's agent budget (SPEC §7.1), and its 80% warning
            parts.append(f"**Budget used:** {_cell(str(outcome.budget.get('text', '')))}\n")
            if outcome.budget.get("warned"):
                parts.append("> **Warning:** the run has used 80% or more of its budget; at "
                             "100% it pauses before its next agent stage (`resume --budget` "
                             "raises it)\n")
        drawing = _mermaid(result.workflow, outcome.path)
        if drawing:
            parts.append(f"```mermaid\n{drawing}\n```\n")
        rows = _pr_rows(outcome.context, result.repos)
        if rows:
            parts.append("| Folder | Repository | Pull request | State |\n"
                         "| --- | --- | --- | --- |")
            parts += rows
            parts.append("")
    return "\n".join(parts) + "\n"


def _fan_out(result: Result) -> list[str]:
    """The fan-out as a person follows it: the chunks handed to worker jobs, and a
    worker's chunk with its folders done, running and failed."""
    parts = []
    if result.chunks:
        listed = ", ".join(str(chunk) for chunk in result.chunks)
        parts.append(f"**Fan-out:** {len(result.chunks)} chunk"
                     f"{'' if len(result.chunks) == 1 else 's'} for worker jobs ({listed})\n")
    if result.work:
        folders = result.work.get("folders")
        counts = {"done": 0, "running": 0, "failed": 0}
        if isinstance(folders, dict):
            for state in folders.values():
                key = {"succeeded": "done", "success": "done", "partial_success": "done",
                       "fail": "failed"}.get(str(state), str(state))
                if key in counts:
                    counts[key] += 1
        parts.append(f"**Chunk {_cell(str(result.work.get('chunk', '?')))}:** "
                     + ", ".join(f"{n} folder{'' if n == 1 else 's'} {state}"
                                 for state, n in counts.items()) + "\n")
    return parts


def write_summary(environ: Mapping[str, str], results: Sequence[Result]) -> None:
    _append(environ.get("GITHUB_STEP_SUMMARY"), summary_markdown(results))


def _mermaid(workflow: Path | None, path: Sequence[str]) -> str:
    if workflow is None:
        return ""
    try:
        return to_mermaid(load_workflow(workflow), path)
    except (WorkflowSyntaxError, WorkflowInvalid, OSError):
        return ""


def _pr_rows(context: Mapping[str, Any], repos: Mapping[str, str]) -> list[str]:
    rows = []
    for folder, repository in repos.items():
        url = str(context.get(f"{folder}.pr.url") or "")
        number = str(context.get(f"{folder}.pr.number") or "")
        state = str(context.get(f"{folder}.pr.state") or "")
        link = f"[#{number or '?'}]({url})" if url else "—"
        rows.append(f"| {_cell(folder)} | {_cell(repository)} | {link} | {_cell(state) or '—'} |")
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Every ASCII punctuation character may be backslash-escaped in Markdown (CommonMark
# §2.4), and then is only itself: no heading, list, quote, link, image, HTML tag, entity,
# emphasis or table cell can start at it.
_AS_WRITTEN: Final = {ord(ch): "\\" + ch for ch in string.punctuation}


def _as_written(text: str) -> str:
    """`text` shown as it is written, on one line: a failure reason may quote a script's
    output or an agent's reply, which must not draw a heading, a link or an image in the
    job's summary."""
    return " ".join(text.split()).translate(_AS_WRITTEN)
