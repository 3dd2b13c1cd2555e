"""The CLI's start-up imports only what the command uses (issue 23): checked in a fresh child
process, which prints its own sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("jinja2", "github", "httpx", "git", "pydantic", "delivery.engine")
CHILD = ("import json, sys\nfrom delivery.cli.main import main\n"
         "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
         "print(json.dumps(sorted(sys.modules)))")


def _loaded(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True,
                          text=True, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _heavy(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_version_and_help_load_no_parser() -> None:
    for argv in (("--version",), ("--help",)):
        loaded = _loaded(*argv)
        assert _heavy(loaded) == []
        assert "delivery.validation.loader" not in loaded, argv


def test_validate_of_the_bundled_workflow_loads_no_engine_forge_or_git() -> None:
    # deliver.dot's templates use filters and loops: Jinja2's parser checks them (so jinja2
    # is loaded), but nothing of the engine, the forges or git.
    loaded = _loaded("validate", "workflows/deliver.dot")
    assert [m for m in _heavy(loaded) if not m.startswith("jinja2")] == []
