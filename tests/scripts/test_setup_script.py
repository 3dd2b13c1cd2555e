"""scripts/setup: progress lines while it installs, and no reinstall while pyproject.toml
and the Python are unchanged (the stamp in .venv). Run against a copy of the script with a
stand-in Python that records what it is asked, so no package is fetched."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$CALLS"
if [ "$1" = "--version" ]; then echo "Python 3.99.0"; exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
echo "Collecting pydantic"
echo "  Downloading pydantic-2.0.whl"
echo "Installing collected packages: pydantic"
exit ${PIP_EXIT:-0}
"""


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup", project / "scripts" / "setup")
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "CALLS": str(tmp_path / "calls.log")}
    env.pop("SETUP_FORCE", None)
    return project, env


def _setup(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/setup"], cwd=project, env=env, text=True,
                          capture_output=True, check=False)


def _installs(tmp_path: Path) -> int:
    return sum("-m pip install" in line for line in
               (tmp_path / "calls.log").read_text().splitlines())


def test_first_setup_shows_progress_and_installs(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    done = _setup(project, env)
    assert done.returncode == 0, done.stderr
    assert "creating .venv with Python 3.99.0" in done.stderr
    assert "  fetching pydantic" in done.stderr and ".venv is ready" in done.stderr
    assert _installs(tmp_path) == 1


def test_setup_again_with_nothing_changed_installs_nothing(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    assert _setup(project, env).returncode == 0
    again = _setup(project, env)
    assert (again.returncode, again.stderr) == (0, "")
    assert _installs(tmp_path) == 1


def test_a_changed_pyproject_installs_again(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    assert _setup(project, env).returncode == 0
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '2'\n")
    assert _setup(project, env).returncode == 0
    assert _installs(tmp_path) == 2


def test_a_failed_install_prints_the_log_and_leaves_no_stamp(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    done = _setup(project, {**env, "PIP_EXIT": "1"})
    assert done.returncode == 1
    assert "Downloading pydantic-2.0.whl" in done.stderr  # the whole log, not just progress
    assert "installing delivery into .venv failed" in done.stderr
    assert not (project / ".venv" / ".setup-stamp").exists()
