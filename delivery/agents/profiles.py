"""Agent profiles: named backends in `delivery.toml` (or `[tool.delivery]` in pyproject.toml).

    default = "claude"                       # used when neither --agent nor agent= says

    [profiles.claude]
    backend = "command"
    command = "claude -p --output-format json"
    resume_command = "claude -p --output-format json --resume {session_id}"
    model_args = ["--model", "{model}"]
    output = "json"                          # reply in "result", session id in "session_id"
    timeout = "30m"

    [profiles.local]
    backend = "openai"
    model = "qwen2.5-coder"
    base_url = "http://localhost:11434/v1"

A profile may also be written inline wherever a name is accepted (`--agent`, a node's
`agent=`): `command:<cmd>` (`command+json:<cmd>` etc. to say how its output is read),
`openai:<model>`, `replay:<file.json>` or `scripted:<file.toml>` (files relative to the
workspace). The built-in presets (`claude`, `codex`:
delivery/agents/presets.py) are names too; a profile file's profile of the same name wins.
"""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from delivery.errors import RunRefused
from delivery.lang.model import parse_duration

PROFILE_FILE = "delivery.toml"
INLINE_KINDS = ("command", "openai", "replay", "scripted")
# `command+FORMAT:<cmd>` says how to read the command's stdout (the profile's `output`)
COMMAND_FORMATS = ("text", "json", "jsonl", "claude", "codex")
INLINE_FORMS = ("command:<cmd> (or command+json:, +jsonl:, +claude:, +codex:), "
                "openai:<model>, replay:<file.json> or scripted:<file.toml>")


def _seconds(value: Any) -> Any:
    if isinstance(value, str):
        seconds = parse_duration(value)
        if seconds is None:
            raise ValueError(f"{value!r} is not a duration (write 30s, 15m, 2h or seconds)")
        return seconds
    return value


class _Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    env: dict[str, str] = Field(default_factory=dict)
    model: str = ""
    reasoning_effort: Literal["", "low", "medium", "high"] = ""
    timeout: float = Field(default=1800.0, gt=0)

    _seconds = field_validator("timeout", mode="before")(_seconds)


class CommandProfile(_Profile):
    """A CLI coding agent: prompt on stdin, reply on stdout, run in the workspace."""

    backend: Literal["command"] = "command"
    command: list[str]
    # the command for a turn that continues a session ({session_id}); without it a
    # continued turn replays the transcript to a fresh process
    resume_command: list[str] | None = None
    # added when a model is chosen: where a word of the command is "{model_args}", else
    # at the end
    model_args: list[str] = Field(default_factory=list)
    # "claude" and "codex" read those CLIs' own JSON (delivery/agents/cli_output.py):
    # usage with cached input, cost, running totals, errors and refused tool calls
    output: Literal["text", "json", "jsonl", "claude", "codex"] = "text"
    reply_key: str = "result"  # dotted path of the reply in the JSON output
    session_key: str = "session_id"  # dotted path of the agent's session id
    usage_key: str = "usage"  # {input_tokens, output_tokens} or prompt/completion_tokens
    reply_match: dict[str, str] = Field(default_factory=dict)  # jsonl: lines that hold it
    max_output: int = Field(default=16 * 1024 * 1024, gt=0)  # bytes of stdout per turn
    package: str = ""  # the npm package of the program, named when it is missing
    # the model passed when none is chosen, so that a resumed session does not keep the
    # model of the stage before ("default" for Claude Code); "": pass nothing
    default_model: str = ""

    @field_validator("command", "resume_command", "model_args", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return shlex.split(value)
        return value

    @field_validator("command")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("the command is empty")
        return value


class OpenAIProfile(_Profile):
    """An OpenAI-compatible chat completions server."""

    backend: Literal["openai"] = "openai"
    base_url: str = ""  # default: $OPENAI_BASE_URL, else https://api.openai.com/v1
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = Field(default=5, ge=0)
    timeout: float = Field(default=600.0, gt=0)
    temperature: float | None = None


class ReplayProfile(_Profile):
    backend: Literal["replay"] = "replay"
    file: str


class ScriptedProfile(_Profile):
    """The scripted editing agent, its turns in a TOML or JSON file (scripted_file.py)."""

    backend: Literal["scripted"] = "scripted"
    file: str


Profile = Annotated[CommandProfile | OpenAIProfile | ReplayProfile | ScriptedProfile,
                    Field(discriminator="backend")]


class ProfileFile(BaseModel):
    # other tables of the same file (e.g. [forge.local]) belong to other parts of delivery
    model_config = ConfigDict(extra="ignore")

    default: str = ""
    profiles: dict[str, Profile] = Field(default_factory=dict)


def inline_profile(spec: str) -> Profile | None:
    """The profile `command:…`, `openai:…`, `replay:…` or `scripted:…` stands for; None for
    a bare name."""
    kind, sep, arg = spec.partition(":")
    kind, arg = kind.strip(), arg.strip()
    kind, plus, output = kind.partition("+")
    if not sep or kind not in INLINE_KINDS:
        return None
    if plus and (kind != "command" or output not in COMMAND_FORMATS):
        raise RunRefused(f"agent profile '{spec}'",
                         f"'+{output}' is not an output format of {kind}: profiles",
                         f"write command+FORMAT:<cmd> with FORMAT one of "
                         f"{', '.join(COMMAND_FORMATS)}")
    if not arg:
        raise RunRefused(f"agent profile '{spec}'", f"names no {kind} argument",
                         f"write {INLINE_FORMS}")
    try:
        if kind == "command":
            # (the command is split into words by the model's validator)
            return CommandProfile.model_validate({"command": arg, "output": output or "text"})
        if kind == "openai":
            return OpenAIProfile(model=arg)
        if kind == "scripted":
            return ScriptedProfile(file=arg)
        return ReplayProfile(file=arg)
    except ValidationError as err:
        raise RunRefused(f"agent profile '{spec}'", _problems(err),
                         f"write {INLINE_FORMS}") from None


def load_profile_file(directory: Path) -> tuple[ProfileFile, Path | None]:
    """The profiles in `directory`'s delivery.toml, else its pyproject.toml's
    [tool.delivery]; an empty set when neither exists. RunRefused names a bad file."""
    for path, section in ((directory / PROFILE_FILE, None),
                          (directory / "pyproject.toml", ("tool", "delivery"))):
        if not path.is_file():
            continue
        try:
            data: Any = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise RunRefused(f"profile file {path}", f"cannot be read: {err}",
                             "fix the TOML") from None
        if section is not None:
            for key in section:
                data = data.get(key) if isinstance(data, dict) else None
            if data is None:
                continue
        try:
            return ProfileFile.model_validate(data), path
        except ValidationError as err:
            raise RunRefused(f"profile file {path}", _problems(err),
                             "see docs/agents.md \"The profile file\" for the fields of "
                             "command, openai and replay profiles") from None
    return ProfileFile(), None


def _problems(err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"{where}: {item['msg']}" if where else item["msg"])
    return "; ".join(parts)
