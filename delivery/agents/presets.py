"""The built-in profiles for the coding agents people use (SPEC §5): `claude` (Claude
Code) and `codex` (Codex CLI). A profile of the same name in delivery.toml replaces one.

What each grants, and why (docs/agents.md has the table and how to widen or narrow it):
* claude: `--permission-mode acceptEdits` lets it edit files in the workspace, and
  `--allowedTools "Bash Edit Write Read"` lets it run commands (the project's tests) without
  a person. `bypassPermissions` / `--dangerously-skip-permissions` are not used: Claude
  Code refuses them as root (CI and containers run as root) unless told it is sandboxed,
  and they would also allow web access. The same flags are passed on `--resume`, which
  does not keep them. `--model default` when no model is chosen: a resumed session would
  otherwise keep the model of the stage before.
* codex: `-c sandbox_mode="workspace-write" -c approval_policy="never"`: writes inside the
  workspace (and the temp directory), commands run without asking, no network. Passed as
  config (`-c`) because `codex exec resume` has no `--sandbox` and does not keep it from
  the first turn. `--skip-git-repo-check`: a run's workspace is not a git repository (its
  folders are). Without a model, Codex takes its config's model on every turn.
"""

from __future__ import annotations

from delivery.agents.profiles import CommandProfile

CLAUDE_FLAGS = ["-p", "--output-format", "json", "--permission-mode", "acceptEdits",
                "--allowedTools", "Bash Edit Write Read"]
CODEX_FLAGS = ["--json", "--skip-git-repo-check", "-c", 'sandbox_mode="workspace-write"',
               "-c", 'approval_policy="never"']

PRESETS: dict[str, CommandProfile] = {
    "claude": CommandProfile(
        command=["claude", *CLAUDE_FLAGS],
        resume_command=["claude", *CLAUDE_FLAGS, "--resume", "{session_id}"],
        model_args=["--model", "{model}"], default_model="default", output="claude",
        package="@anthropic-ai/claude-code"),
    "codex": CommandProfile(
        command=["codex", "exec", *CODEX_FLAGS, "{model_args}", "-"],
        resume_command=["codex", "exec", "resume", *CODEX_FLAGS, "{model_args}",
                        "{session_id}", "-"],
        model_args=["-m", "{model}"], output="codex", package="@openai/codex"),
}
