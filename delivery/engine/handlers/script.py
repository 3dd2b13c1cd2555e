"""Script stages (SPEC §6): `bash -c` in the workspace (or `folder=`), facts via $DELIVERY_FACTS.

The facts file uses GitHub's `$GITHUB_OUTPUT` format: `name=value` lines, or
`name<<DELIM` … `DELIM` blocks for multi-line values. The stage writes exactly its
declared facts plus `<node>.failed`; it succeeds when the exit code is 0, every declared
fact was written and no undeclared one was. Declared facts written by a failing script
are still recorded, so a failing test run can report its counts.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.errors import FactsFormatError as FactsFormatError
from delivery.errors import TemplateRenderError
from delivery.lang.model import Node, parse_duration

DEFAULT_TIMEOUT = 3600.0


def parse_facts_file(text: str) -> dict[str, str]:
    facts: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            name, delimiter = name.strip(), delimiter.strip()
            if not delimiter:
                raise FactsFormatError(f"line {i}: '{name}<<' needs a delimiter")
            body: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise FactsFormatError(f"'{name}<<{delimiter}' is never closed by {delimiter}")
            i += 1
            facts[name] = "\n".join(body)
            continue
        if "=" not in line:
            raise FactsFormatError(f"line {i}: expected name=value, found {line[:60]!r}")
        name, value = line.split("=", 1)
        facts[name.strip()] = value
    return facts


def working_directory(node: Node, env: StageEnv) -> Path:
    folder = node.folder
    if not folder:
        return env.workspace
    return env.folders.get(folder, env.workspace / folder)


def run_script(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    failed_key = f"{node.id}.failed"
    try:
        script = env.renderer.render(node.script, context, folders=list(env.folders), shell=True)
    except TemplateRenderError as err:
        return StageResult.fail(f"script template: {err}", {failed_key: True})
    stage_dir = env.stage_dir(node.id, attempt)
    env.write_stage_file(node.id, attempt, "prompt.md", script)
    facts_path = stage_dir / "facts.env"
    facts_path.write_text("", encoding="utf-8")
    cwd = working_directory(node, env)
    if not cwd.is_dir():
        return StageResult.fail(f"working directory {cwd} does not exist", {failed_key: True})
    timeout = parse_duration(node.attr("timeout")) if node.attr("timeout") else DEFAULT_TIMEOUT
    environment = dict(os.environ)
    environment["DELIVERY_FACTS"] = str(facts_path)
    stdout_path, stderr_path = stage_dir / "stdout.txt", stage_dir / "stderr.txt"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            ["bash", "-c", script], cwd=cwd, stdout=stdout, stderr=stderr,
            stdin=subprocess.DEVNULL, env=environment, start_new_session=True,
        )
        timed_out = False
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
            timed_out = True
    try:
        written = parse_facts_file(facts_path.read_text(encoding="utf-8", errors="replace"))
    except FactsFormatError as err:
        problem = f"$DELIVERY_FACTS: {err}"
        if timed_out:
            problem = f"script timed out after {node.attr('timeout')}; {problem}"
        return StageResult.fail(problem, {failed_key: True})
    declared = [fact.name for fact in node.facts]
    updates: dict[str, object] = {name: written[name] for name in declared if name in written}
    problems: list[str] = []
    if timed_out:
        # a killed script fails, but what it reported before the kill is still recorded
        problems.append(f"script timed out after {node.attr('timeout')}")
    elif code != 0:
        problems.append(f"script exited with code {code}")
    missing = [name for name in declared if name not in written]
    if missing:
        problems.append(f"declared fact(s) not written: {', '.join(missing)}")
    undeclared = sorted(set(written) - set(declared))
    if undeclared:
        problems.append(
            f"undeclared fact(s) written: {', '.join(undeclared)} "
            f"(declared: {', '.join(declared) or 'none'})"
        )
    updates[failed_key] = bool(problems)
    if problems:
        return StageResult.fail("; ".join(problems), updates)
    return StageResult("succeeded", updates=updates)
