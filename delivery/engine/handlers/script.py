"""Script stages (SPEC §6): `bash -c` in the workspace (or `folder=`), facts via $DELIVERY_FACTS.

The facts file uses GitHub's `$GITHUB_OUTPUT` format: `name=value` lines, or
`name<<DELIM` … `DELIM` blocks for multi-line values. The stage writes exactly its
declared facts plus `<node>.failed`; it succeeds when the exit code is 0, every declared
fact was written and no undeclared one was. Declared facts written by a failing script
are still recorded, so a failing test run can report its counts.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from delivery.agents.command import agent_environment
from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.errors import FactsFormatError as FactsFormatError
from delivery.errors import TemplateRenderError, write_failure
from delivery.lang.model import Node
from delivery.lang.outcomes import StageOutcome
from delivery.processes import holding_signals, register, running

DEFAULT_TIMEOUT = 3600.0
TOOL_OUTPUT = "tool.output"


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


_CHUNK = 1 << 16
_BACKGROUND_WAIT = 2.0  # seconds to drain the pipes after the script ended


def _copy_redacted(source: IO[bytes], target: Path, redact: Callable[[str], str],
                   failures: list[str]) -> None:
    """Copy a pipe to `target`, redacting each piece. Pieces end at a newline where one
    comes within 64 KiB (else at a blank), so a secret is cut in two only inside 64 KiB
    without a blank. A write that fails (a full disk) is added to `failures` in one line,
    and the pipe is still read to its end: the script must not block on a full pipe."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    try:
        out: IO[str] | None = target.open("w", encoding="utf-8")
    except OSError as error:
        failures.append(write_failure(target, error))
        out = None
    try:
        while True:
            try:
                block = source.read1(_CHUNK) if hasattr(source, "read1") else \
                    source.read(_CHUNK)
            except (OSError, ValueError):  # the pipe was closed under us: nothing more
                block = b""
            pending += decoder.decode(block, final=not block)
            cut = len(pending) if not block else pending.rfind("\n") + 1
            if not cut and len(pending) >= _CHUNK:
                # a long line: cut after a blank (no token holds one), else anywhere
                cut = max(pending.rfind(" "), pending.rfind("\t")) + 1 or len(pending)
            if cut:
                if out is not None:
                    try:
                        out.write(redact(pending[:cut]))
                        out.flush()
                    except OSError as error:
                        failures.append(write_failure(target, error))
                        with contextlib.suppress(OSError):
                            out.close()
                        out = None
                pending = pending[cut:]
            if not block:
                break
    finally:
        if out is not None:
            with contextlib.suppress(OSError):
                out.close()


def script_environment(node: Node, environ: Mapping[str, str]) -> dict[str, str]:
    """The script's environment: the run's, without the forge's credentials unless the node
    says `forge_token=true` — a script may run code the agent wrote (the checks' tests, a
    conftest.py), and the token is delivery's, for its own pushes (SPEC §14). Model keys
    and the tools' variables stay; what a script prints of any secret is masked."""
    if node.attr("forge_token").strip().lower() in ("true", "1", "yes", "on"):
        return dict(environ)
    return agent_environment(environ)


def _run_redacted(script: str, cwd: Path, environment: dict[str, str], timeout: float | None,
                  stage_dir: Path, redact: Callable[[str], str],
                  failures: list[str]) -> tuple[int, bool]:
    """Run `bash -c script`; its stdout and stderr reach the stage folder redacted (a write
    that failed is added to `failures`). Returns (exit code, timed out)."""
    with holding_signals():  # no Ctrl-C between the start and the registration
        process = subprocess.Popen(
            ["bash", "-c", script], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, env=environment, start_new_session=True,
        )
        register(process.pid)
    assert process.stdout is not None and process.stderr is not None
    copiers = [
        threading.Thread(target=_copy_redacted,
                         args=(pipe, stage_dir / name, redact, failures), daemon=True)
        for pipe, name in ((process.stdout, "stdout.txt"), (process.stderr, "stderr.txt"))
    ]
    for copier in copiers:
        copier.start()
    timed_out = False
    try:
        with running(process.pid):  # Ctrl-C ends it from any thread (parallel branches)
            code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        code = process.wait()
        timed_out = True
    except BaseException:
        # Ctrl-C or SIGTERM reached delivery, not the script (its own session): no orphan
        # may go on working while the run is resumed.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    deadline = time.monotonic() + _BACKGROUND_WAIT
    for copier in copiers:
        # A background child (`server &`) may hold the pipe open after the script ended:
        # the stage does not wait for it; its copier goes on writing (redacted) until the
        # child closes the pipe, as the child went on writing a plain file before.
        copier.join(timeout=max(0.0, deadline - time.monotonic()))
        if not copier.is_alive():
            (process.stdout if copier is copiers[0] else process.stderr).close()
    return code, timed_out


def _last_line(path: Path, limit: int = 300) -> str:
    """The last non-empty line a script wrote to stderr (already redacted), cut to `limit`:
    a failing script says why in the stage's failure_reason."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(handle.tell() - 4096, 0))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if len(lines[-1]) <= limit else lines[-1][: limit - 1] + "…"


def run_script(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    failed_key = f"{node.id}.failed"
    try:
        script = env.renderer.render(node.script, context, folders=list(env.folders), shell=True,
                                     plain=node.template == "plain")
    except TemplateRenderError as err:
        return StageResult.fail(f"script template: {err}", {failed_key: True})
    stage_dir = env.stage_dir(node.id, attempt)
    env.write_stage_file(node.id, attempt, "prompt.md", script)
    cwd = working_directory(node, env)
    if not cwd.is_dir():
        return StageResult.fail(f"working directory {cwd} does not exist", {failed_key: True})
    timeout = node.timeout if node.timeout is not None else DEFAULT_TIMEOUT
    # The script writes its facts outside the run directory; the stage folder gets them
    # redacted (SPEC §14), as it gets stdout and stderr.
    with tempfile.TemporaryDirectory(prefix="delivery-facts-") as private:
        # <node>/<attempt>/facts.env, as the stage folder names it
        facts_path = Path(private) / node.id / str(attempt) / "facts.env"
        facts_path.parent.mkdir(parents=True)
        facts_path.write_text("", encoding="utf-8")
        environment = script_environment(node, os.environ)
        environment["DELIVERY_FACTS"] = str(facts_path)
        failures: list[str] = []
        code, timed_out = _run_redacted(script, cwd, environment, timeout, stage_dir,
                                        env.redact, failures)
        if failures:  # the stage's own record could not be written: nothing else counts
            return StageResult.fail(failures[0], {failed_key: True})
        facts_text = env.redact(facts_path.read_text(encoding="utf-8", errors="replace"))
    (stage_dir / "facts.env").write_text(facts_text, encoding="utf-8")
    try:
        written = parse_facts_file(facts_text)
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
        said = _last_line(stage_dir / "stderr.txt")
        problems.append(f"script exited with code {code}" + (f": {said}" if said else ""))
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
    # Attractor's tool handler: stdout, trimmed (a large one is offloaded by the context)
    stdout = (stage_dir / "stdout.txt").read_text(encoding="utf-8", errors="replace")
    updates[TOOL_OUTPUT] = stdout.strip()
    if problems:
        return StageResult.fail("; ".join(problems), updates)
    return StageResult(StageOutcome.SUCCEEDED, updates=updates)
