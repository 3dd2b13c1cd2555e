"""The `command:` backend: a CLI coding agent (Claude Code, Codex, aider, any program).

Each turn runs the profile's command in the run's workspace with the prompt on stdin and
reads the reply from stdout (`output = "text"`), or from a JSON object (`"json"`) or
JSON lines (`"jsonl"`) at `reply_key`. Each turn's stdout goes to the stage's
`stdout.txt`, and its command line, exit status, time and stderr to `stderr.txt`, through
the TurnSink (the engine redacts them).

A session continues in one of two ways, chosen by the profile:
* `resume_command` set (e.g. `claude -p --resume {session_id}`): the agent's own session id,
  read from its output at `session_key`, is passed to the next turn — the agent keeps the
  conversation;
* otherwise the transcript is replayed: a continued turn sends the earlier prompts and
  replies, then the new message, to a fresh process.

With `resume_command`, the session id of each `full` thread is saved in the checkpoint, so
that after `delivery resume` the thread continues where it was (`resume_thread`).

`output = "claude"` / `"codex"` (the built-in presets, delivery/agents/presets.py) read
those CLIs' own JSON (delivery/agents/cli_output.py): the CLI's error text and the tool
calls it refused fail the stage, and running totals are recorded as increases, with the
last total per session kept here (and, for threads, in the checkpoint).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from delivery.agents.base import AgentError, SessionRequest, TurnSink, Usage
from delivery.agents.cli_output import CliTurn, read_claude, read_codex
from delivery.agents.profiles import CommandProfile
from delivery.processes import holding_signals, register, running

_NO_SINK = TurnSink()
CLI_READERS = ("claude", "codex")  # outputs read by delivery/agents/cli_output.py
STDERR_TAIL = 300  # characters of stderr quoted in a failure reason
MODEL_ARGS = "{model_args}"  # a command word where the model's words go
MAX_STDERR = 256 * 1024  # bytes of stderr kept (the end)
# The forge's credentials are delivery's, for its own pushes and API calls: an agent (a
# prompt-injected one) holding them could push to any branch or approve its own PR. Its
# model key and the tools' own variables stay (SPEC §14, docs/agents.md "Secrets").
FORGE_CREDENTIALS = frozenset({
    "GITHUB_TOKEN", "GH_TOKEN", "GITHUB_PAT", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN",
    "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL"})


def agent_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The run's environment without the forge's credentials: those above and the Action's
    token inputs (`INPUT_GITHUB-TOKEN`, as the runner passes `github-token`)."""
    return {name: value for name, value in environ.items()
            if name.upper() not in FORGE_CREDENTIALS
            and not (name.upper().startswith("INPUT_") and "TOKEN" in name.upper())}


@dataclass
class _StageLog:
    """The traces of the turns of one stage (a `full` thread's session outlives stages)."""

    sink: TurnSink
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)


def dig(data: Any, path: str) -> Any:
    """The value at a dotted path in nested dicts, or None."""
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def usage_of(value: Any) -> Usage | None:
    """Usage from {input_tokens, output_tokens} or {prompt_tokens, completion_tokens}."""
    if not isinstance(value, dict):
        return None
    numbers = {k: v for k, v in value.items() if type(v) is int and v >= 0}
    inp = numbers.get("input_tokens", numbers.get("prompt_tokens"))
    out = numbers.get("output_tokens", numbers.get("completion_tokens"))
    if inp is None and out is None:
        return None
    return Usage(inp or 0, out or 0)


class CommandSession:
    def __init__(self, backend: CommandBackend, request: SessionRequest) -> None:
        self.backend = backend
        self.request = request
        self.session_id = ""
        self.restored = False  # continues a session of an earlier process (resume_thread)
        self.transcript: list[tuple[str, str]] = []  # (prompt, reply) of finished turns
        self._log: _StageLog | None = None

    def send(self, message: str, sink: TurnSink | None = None) -> str:
        sink = sink or _NO_SINK
        if sink.request is not None:
            self.request = sink.request  # the stage speaking (a thread serves several)
        if self._log is None or self._log.sink is not sink:
            self._log = _StageLog(sink)
        profile = self.backend.profile
        continued = bool(self.transcript) or self.restored
        if continued and profile.resume_command and self.session_id:
            argv, stdin, how = self._argv(profile.resume_command), message, "resume"
        elif continued:
            argv, stdin, how = self._argv(profile.command), self._replay(message), "transcript"
        else:
            argv, stdin, how = self._argv(profile.command), message, "new"
        reply = self._run(argv, stdin, how)
        self.transcript.append((message, reply))
        if self.request.thread and self.session_id:
            self.backend.threads[self.request.thread] = self.session_id
        return reply

    # -- one turn ---------------------------------------------------------------------
    def _argv(self, template: list[str]) -> list[str]:
        profile = self.backend.profile
        # a default model on every turn: a resumed session otherwise keeps the last one
        model = self.request.model or profile.model or profile.default_model
        words = list(template)
        if MODEL_ARGS in words:
            at = words.index(MODEL_ARGS)
            words[at:at + 1] = profile.model_args if model else []
        elif model:
            words += profile.model_args
        values = {"model": model, "session_id": self.session_id,
                  "provider": self.request.provider,
                  "reasoning_effort": self.request.reasoning_effort or profile.reasoning_effort}
        return [_fill(word, values) for word in words]

    def _replay(self, message: str) -> str:
        parts = ["The conversation so far (you are continuing it):", ""]
        for number, (prompt, reply) in enumerate(self.transcript, start=1):
            parts += [f"## turn {number}: prompt", "", prompt, "",
                      f"## turn {number}: your reply", "", reply, ""]
        parts += [f"## turn {len(self.transcript) + 1}: prompt", "", message]
        return "\n".join(parts)

    def _run(self, argv: list[str], stdin: str, how: str) -> str:
        assert self._log is not None
        log = self._log
        node = log.sink.node_id or self.request.node_id
        name = self.backend.label
        timeout = self.request.timeout or self.backend.profile.timeout
        # the profile's own variables win: an author may hand the agent a token of its own
        environ = {**agent_environment(self.backend.environ), **self.backend.profile.env}
        started = time.monotonic()
        # Files, not pipes: memory stays bounded whatever the agent prints, and children it
        # leaves running cannot hold the turn open.
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out_file, \
                tempfile.TemporaryFile() as err_file:
            given.write(stdin.encode("utf-8", errors="replace"))
            given.seek(0)
            try:
                with holding_signals():  # no Ctrl-C between the start and the registration
                    process = subprocess.Popen(argv, cwd=self.request.workspace, env=environ,
                                               stdin=given, stdout=out_file, stderr=err_file,
                                               start_new_session=True)
                    register(process.pid)
            except OSError as err:
                raise AgentError(f"{name}: cannot start {argv[0]!r} for node '{node}': "
                                 f"{err.strerror or err}") from None
            timed_out = False
            try:
                with running(process.pid):  # Ctrl-C ends it from any thread (parallel)
                    process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(process)
                process.wait()
            except BaseException:
                # Ctrl-C or SIGTERM reached delivery, not the agent (its own session): end
                # its group too, or a resume would run a second agent in the same worktree.
                _kill(process)
                process.wait()
                raise
            limit = self.backend.profile.max_output
            out, out_size = _head(out_file, limit)
            err_text = _tail(err_file, MAX_STDERR)
        seconds = round(time.monotonic() - started, 3)
        status = process.returncode
        turn = len(log.turns) + 1
        log.turns.append({"turn": turn, "how": how, "argv": argv, "exit_status": status,
                          "timed_out": timed_out, "seconds": seconds})
        log.stdout.append(f"## turn {turn} ({how})\n{out}")
        log.stderr.append(f"## turn {turn} ({how}): exit status {status}"
                          f"{' (timed out)' if timed_out else ''}, {seconds}s\n"
                          f"$ {shlex.join(argv)}\n{err_text}")
        log.sink.file("stdout.txt", "\n".join(log.stdout))
        log.sink.file("stderr.txt", "\n".join(log.stderr))
        if out_size > limit:
            raise AgentError(f"{name}: the agent for node '{node}' printed {out_size} bytes, "
                             f"more than the {limit} a reply may have (the profile's "
                             "max_output)")
        if timed_out:
            raise AgentError(f"{name}: the agent for node '{node}' did not finish within "
                             f"{timeout:g}s and was stopped; raise the node's timeout= or "
                             "the profile's timeout")
        if status != 0 and self.backend.profile.output in CLI_READERS:
            self._cli_reply(out, node, log.sink, how, failed=True)  # its own error text
        if status != 0:
            tail = err_text.strip()[-STDERR_TAIL:] or "(no stderr)"
            raise AgentError(f"{name}: the agent for node '{node}' exited with status "
                             f"{status}: {tail}")
        return self._reply(out, node, log.sink, how)

    def _reply(self, out: str, node: str, sink: TurnSink, how: str) -> str:
        profile = self.backend.profile
        name = self.backend.label
        if profile.output in CLI_READERS:
            return self._cli_reply(out, node, sink, how)
        if profile.output == "text":
            return out.strip()
        objects: list[Any] = []
        try:
            if profile.output == "json":
                objects = [json.loads(out)]
            else:
                objects = [json.loads(line) for line in out.splitlines() if line.strip()]
        except ValueError as err:
            raise AgentError(f"{name}: the output of the agent for node '{node}' is not "
                             f"{'JSON' if profile.output == 'json' else 'JSON lines'} "
                             f"({err}); set output = \"text\" in the profile if it prints "
                             "plain text") from None
        reply: str | None = None
        for obj in objects:
            session = dig(obj, profile.session_key)
            if isinstance(session, str) and session:
                self.session_id = session
            usage = usage_of(dig(obj, profile.usage_key))
            if usage is not None:
                sink.usage(usage)
            if all(str(dig(obj, k)) == v for k, v in profile.reply_match.items()):
                value = dig(obj, profile.reply_key)
                if isinstance(value, str):
                    reply = value
        if reply is None:
            raise AgentError(f"{name}: the output of the agent for node '{node}' holds no "
                             f"reply text at '{profile.reply_key}'; set reply_key in the "
                             "profile")
        return reply

    def _cli_reply(self, out: str, node: str, sink: TurnSink, how: str, *,
                   failed: bool = False) -> str:
        """A preset CLI's own JSON: usage as the increase this turn made, its error text
        and the tool calls it refused as the stage's failure. `failed` (a non-zero exit):
        only raise for an error the output states; the caller reports the exit status."""
        name = self.backend.label
        output = self.backend.profile.output
        turn = read_claude(out) if output == "claude" else read_codex(out)
        if turn.unreadable:
            if failed:
                return ""
            raise AgentError(f"{name}: the output of the agent for node '{node}' is not "
                             f"what {output} prints: {turn.unreadable}")
        if turn.session_id:
            self.session_id = turn.session_id
        if turn.usage is not None:
            sink.usage(self.backend.spent(self.session_id, turn))
        if turn.error:
            raise AgentError(f"{name}: the agent for node '{node}' reported an error: "
                             f"{turn.error}")
        if failed:
            return ""
        if turn.refused:
            raise AgentError(f"{name}: the agent for node '{node}' was refused "
                             f"{len(turn.refused)} tool call(s), so what it was asked to do "
                             f"may be undone: {'; '.join(turn.refused[:5])}; allow them in "
                             "the profile (docs/agents.md, permissions)")
        if turn.reply is None:
            raise AgentError(f"{name}: the output of the agent for node '{node}' holds no "
                             "reply")
        return turn.reply


def _head(file: IO[bytes], limit: int) -> tuple[str, int]:
    """The first `limit` bytes of a file as text, and the file's size."""
    size = file.seek(0, os.SEEK_END)
    file.seek(0)
    return file.read(limit).decode("utf-8", errors="replace"), size


def _tail(file: IO[bytes], limit: int) -> str:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - limit))
    text = file.read().decode("utf-8", errors="replace")
    return text if size <= limit else f"[... {size - limit} bytes cut ...]\n{text}"


def _fill(word: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        word = word.replace("{" + key + "}", value)
    return word


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Stop the agent and whatever it started (it runs in its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


class CommandBackend:
    name = "command"

    def __init__(self, profile: CommandProfile, *, environ: Mapping[str, str],
                 label: str = "") -> None:
        self.profile = profile
        self.environ = dict(environ)
        self.label = label or "command:" + " ".join(profile.command)
        self.threads: dict[str, str] = {}  # `full` thread key -> the agent's session id
        # session id -> the running totals the CLI last reported for it (Codex usage on
        # resume, Claude's cost), so that each turn records only its increase
        self.totals: dict[str, Usage] = {}

    def spent(self, session_id: str, turn: CliTurn) -> Usage:
        """What `turn` consumed, from what the CLI reported (a running total or not)."""
        assert turn.usage is not None
        before = self.totals.get(session_id, Usage()) if session_id else Usage()
        tokens = turn.usage - Usage(before.input_tokens, before.output_tokens) \
            if turn.usage_is_running_total else turn.usage
        cost = turn.usage.cost_usd - before.cost_usd if turn.cost_is_running_total \
            else turn.usage.cost_usd
        if session_id:
            self.totals[session_id] = Usage(
                turn.usage.input_tokens if turn.usage_is_running_total else 0,
                turn.usage.output_tokens if turn.usage_is_running_total else 0,
                turn.usage.cost_usd if turn.cost_is_running_total else 0.0)
        return Usage(tokens.input_tokens, tokens.output_tokens, max(0.0, round(cost, 9)))

    def missing_program(self) -> str | None:
        """The program the profile runs when it cannot be found, else None."""
        program = self.profile.command[0]
        path = {**self.environ, **self.profile.env}.get("PATH")
        if os.sep in program:
            return None if Path(program).is_file() else program
        return None if shutil.which(program, path=path) else program

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> CommandSession:
        return CommandSession(self, request or SessionRequest(node_id, workspace))

    def resume_thread(self, thread: str, request: SessionRequest) -> CommandSession | None:
        """The session of `thread` from before a resume, when the agent can continue it
        (a `resume_command` and the agent's session id, saved in the checkpoint)."""
        session_id = self.threads.get(thread)
        if not (self.profile.resume_command and session_id):
            return None
        session = CommandSession(self, request)
        session.session_id, session.restored = session_id, True
        return session

    def save_state(self) -> dict[str, Any]:
        if not self.threads:
            return {}
        # only the threads' totals: those sessions continue after `delivery resume`
        totals = {sid: [u.input_tokens, u.output_tokens, u.cost_usd]
                  for sid, u in self.totals.items() if sid in self.threads.values()}
        return {"threads": dict(self.threads), **({"totals": totals} if totals else {})}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        threads = state.get("threads")
        if isinstance(threads, Mapping):
            self.threads = {str(k): v for k, v in threads.items() if isinstance(v, str)}
        totals = state.get("totals")
        if isinstance(totals, Mapping):
            for sid, value in totals.items():
                if isinstance(value, list) and len(value) == 3 and all(
                        isinstance(v, (int, float)) and v >= 0 for v in value):
                    self.totals[str(sid)] = Usage(int(value[0]), int(value[1]),
                                                  float(value[2]))
