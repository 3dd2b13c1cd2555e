"""The real Claude Code and Codex CLIs against the scripted model servers of
delivery.testing.model_servers: where to find them, the environment that points them at
the servers (an empty HOME, no network), and scripted steps in each CLI's own tools.

The CLIs are looked for in .ci/node (where .ci/run installs the pinned versions) and then
on PATH. When one is missing its tests skip saying how to install it — except in CI
(CI=true), where they fail: CI must run them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from delivery.testing.model_servers import (
    AnthropicServer,
    ResponsesServer,
    Step,
    Tokens,
    say,
    tool,
)

ROOT = Path(__file__).resolve().parent.parent
NODE_BIN = ROOT / ".ci" / "node" / "node_modules" / ".bin"
PINNED = {"claude": ("@anthropic-ai/claude-code", "2.1.332"),
          "codex": ("@openai/codex", "0.171.0")}
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def find_cli(name: str) -> Path:
    """The CLI's program, or skip (fail in CI) saying how to install it."""
    package, version = PINNED[name]
    found = NODE_BIN / name if (NODE_BIN / name).exists() else None
    if found is None:
        on_path = shutil.which(name)
        found = Path(on_path) if on_path else None
    if found is None:
        reason = (f"{name} is not installed: npm install --prefix .ci/node "
                  f"{package}@{version} (.ci/run does it)")
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(reason + "; in CI these tests must run")
        pytest.skip(reason)
    return found


@dataclass
class RealCli:
    """One CLI with its scripted model server."""

    name: str
    program: Path
    server: AnthropicServer | ResponsesServer

    def environ(self, home: Path) -> dict[str, str]:
        """The environment of a run: an empty HOME, the CLI and git on PATH, the model
        server as the CLI's API."""
        home.mkdir(parents=True, exist_ok=True)
        env = {"PATH": f"{self.program.parent}:{SYSTEM_PATH}", "HOME": str(home),
               "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1"}
        if isinstance(self.server, AnthropicServer):
            env.update(ANTHROPIC_BASE_URL=self.server.url, ANTHROPIC_API_KEY="sk-ant-test",
                       DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        else:
            self.server.codex_config(home / ".codex")
            env["CODEX_HOME"] = str(home / ".codex")
        return env

    def write(self, path: str, content: str, usage: Tokens | None = None) -> Step:
        """A step that writes `content` to `path` (relative to the agent's directory) with
        the CLI's own edit tool: Claude's Write; Codex's exec_command (0.171 offers no
        apply_patch tool for a custom model)."""
        if self.name == "claude":
            return tool("Write", usage, file_path="{cwd}/" + path, content=content)
        return tool("exec_command", usage,
                    cmd=f"printf %s {shlex.quote(content)} > {shlex.quote(path)}")

    def run(self, command: str, usage: Tokens | None = None) -> Step:
        """A step that runs a shell command (Claude's Bash, Codex's exec_command)."""
        if self.name == "claude":
            return tool("Bash", usage, command=command)
        return tool("exec_command", usage, cmd=command)

    def say(self, text: str, usage: Tokens | None = None) -> Step:
        return say(text, usage)


def version_of(program: Path) -> str:
    done = subprocess.run([str(program), "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    return done.stdout.strip()
