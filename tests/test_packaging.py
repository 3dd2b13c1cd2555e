"""The wheel carries the bundled workflow and the typing marker; the editable install finds
the bundled workflow through importlib.resources."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_SKIP = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", ".hypothesis",
                               "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
                               ".delivery")


def _local_setuptools_is_enough() -> bool:
    """pyproject.toml needs setuptools >= 77 (SPDX license); without it, build in isolation
    (pip fetches the build requirements from PyPI)."""
    try:
        major = int(importlib.metadata.version("setuptools").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return major >= 77


def test_wheel_contains_the_bundled_workflow_and_py_typed(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=_SKIP)  # keep build litter out of the checkout
    out = tmp_path / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
               "--disable-pip-version-check", "-w", str(out), "."]
    if _local_setuptools_is_enough():
        command.insert(5, "--no-build-isolation")
    result = subprocess.run(command, cwd=source, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr
    (wheel,) = out.glob("delivery-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "delivery/bundled/workflows/deliver.dot" in names
    assert "delivery/py.typed" in names
    assert "delivery/lang/parser.py" in names and "delivery/validation/validator.py" in names
    bundled = zipfile.ZipFile(wheel).read("delivery/bundled/workflows/deliver.dot")
    assert bundled == (ROOT / "workflows" / "deliver.dot").read_bytes()


def test_editable_install_finds_the_bundled_workflow() -> None:
    folder = importlib.resources.files("delivery.bundled.workflows")
    workflow = folder.joinpath("deliver.dot")
    assert workflow.is_file()
    assert workflow.read_text(encoding="utf-8").startswith("// The bundled delivery workflow")
    assert "deliver.dot" in {entry.name for entry in folder.iterdir()}
