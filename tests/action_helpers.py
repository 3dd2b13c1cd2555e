"""A simulated GitHub Actions job: runs the steps action.yml executes (not the setup ones),
with the variables, event payload file, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY a runner
gives them. Each job gets a fresh RUNNER_TEMP and clone cache: a new machine."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from delivery.testing.actions.graph import read_outputs
from delivery.testing.actions.world import RUNNER_ENV

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
_EXPR = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")
_jobs = itertools.count(1)


def action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    return loaded


def step(step_id: str) -> dict[str, Any]:
    for entry in action()["runs"]["steps"]:
        if entry.get("id") == step_id:
            found: dict[str, Any] = entry
            return found
    raise KeyError(step_id)


@dataclass
class Job:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str


class Actions:
    """Runs jobs of one repository against the fake GitHub."""

    def __init__(self, root: Path, github_env: dict[str, str], repository: str) -> None:
        self.root = root
        self.github_env = github_env
        self.repository = repository
        self.workspace = root / "checkout"
        self.workspace.mkdir(parents=True, exist_ok=True)

    def job(self, event_name: str, payload: dict[str, Any], inputs: dict[str, str],
            *, actor: str = "alice", cache: Path | None = None,
            checkout: Path | None = None) -> Job:
        """One job on a fresh runner; `cache`: a self-hosted runner's clone cache, kept
        from job to job (HOME is still new); `checkout`: its workspace, kept too (the
        repository's files checked out again over what earlier jobs left there)."""
        number = next(_jobs)
        home = self.root / f"job-{number}"
        home.mkdir()
        # a hosted runner checks the repository out anew for every job: the run works in
        # that checkout (SPEC §13), so nothing an earlier job left there is seen by the next
        checkout = checkout or home / "workspace"
        shutil.copytree(self.workspace, checkout, dirs_exist_ok=True)
        event_path = home / "event.json"
        event_path.write_text(json.dumps(payload), encoding="utf-8")
        output, summary = home / "output", home / "summary.md"
        declared = action()["inputs"]
        values = {name: str(inputs.get(name, spec.get("default", "")))
                  for name, spec in declared.items()}
        deliver = step("deliver")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "LANG": "C.UTF-8", **self.github_env,
               "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_REPOSITORY": self.repository,
               "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(event_path),
               "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary),
               "GITHUB_WORKSPACE": str(checkout), "GITHUB_RUN_ID": str(1000 + number),
               "GITHUB_RUN_ATTEMPT": "1", "GITHUB_ACTOR": actor,
               "GITHUB_ACTION_PATH": str(ROOT), "RUNNER_TEMP": str(home / "tmp"),
               "XDG_CACHE_HOME": str(cache or home / "cache"),
               "DELIVERY_PYTHON": sys.executable, **RUNNER_ENV}
        env.pop("GITHUB_TOKEN", None)  # the token comes in through the input only
        for name, template in deliver["env"].items():
            env[name] = _EXPR.sub(lambda m: values[m.group(1)], str(template))
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               deliver["run"]], env=env, cwd=checkout,
                              capture_output=True, text=True, timeout=120, check=False)
        return Job(done.returncode, done.stdout, done.stderr, read_outputs(output),
                   summary.read_text(encoding="utf-8") if summary.exists() else "")


def runner_commands(stdout: str) -> list[str]:
    """The workflow commands a runner would act on in `stdout`, as GitHub's runner reads
    them: `::name…::data` lines (leading blanks ignored) and the older `##[name…]data`
    anywhere in a line, none between `::stop-commands::TOKEN` and `::TOKEN::`."""
    stopped = ""
    found: list[str] = []
    for line in stdout.replace("\r", "\n").split("\n"):
        text = line.strip()
        if stopped:
            if text == f"::{stopped}::":
                stopped = ""
            continue
        if text.startswith("::stop-commands::"):
            stopped = text[len("::stop-commands::"):]
        elif text.startswith("::") and "::" in text[2:]:
            found.append(text)
        elif "##[" in line:
            found.append(line)
    return found


def zizmor_findings(path: Path) -> list[str]:
    """zizmor's findings of medium or high severity in a workflow or action file (offline:
    the audits that ask GitHub are left out), as `ident: description` lines."""
    zizmor = Path(sys.executable).parent / "zizmor"
    done = subprocess.run([str(zizmor), "--offline", "--no-progress", "--format", "json",
                           "--min-severity", "medium", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    # 0: nothing found; 10-14: findings by their highest severity
    assert done.returncode == 0 or done.returncode >= 10, done.stderr
    findings = json.loads(done.stdout or "[]")
    return [f"{finding['ident']}: {finding['desc']}" for finding in findings]
