"""The CLI's start-up imports only what the command uses (issue 23): checked in a fresh child
process, which prints its own sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_validate_of_the_bundled_workflows_loads_no_jinja_engine_forge_or_git() -> None:
    # deliver.dot's templates use filters, loops and namespaces: light_reads reads them,
    # so not even Jinja2 is imported
    for workflow in ("workflows/deliver.dot", "workflows/review-prs.dot"):
        loaded = _loaded("validate", workflow)
        assert _heavy(loaded) == [], workflow
        assert "delivery.lang.jinja_reads" not in loaded


def test_validate_of_an_attractor_file_with_templates_loads_no_jinja(tmp_path: Path) -> None:
    # a file with nothing of delivery's own is checked for non-Jinja prompts (Helm's
    # `{{ .Values.x }}`); a plain `{{ x }}` prompt needs no Jinja2 to know it is Jinja
    dot = tmp_path / "attractor.dot"
    dot.write_text('digraph a { start [shape=Mdiamond]; exit [shape=Msquare]\n'
                   '  work [prompt="Fix {{ goal }} and {% if x %}{{ x }}{% endif %}"]\n'
                   '  start -> work -> exit }\n', encoding="utf-8")
    loaded = _loaded("validate", str(dot))
    assert _heavy(loaded) == []


def test_validate_of_a_template_beyond_the_subset_still_uses_jinja(tmp_path: Path) -> None:
    dot = tmp_path / "macro.dot"
    dot.write_text('digraph a { graph [inputs="x"]; start [shape=Mdiamond]; '
                   'exit [shape=Msquare]\n'
                   '  work [prompt="{{ x if x else 1 }}"]\n  start -> work -> exit }\n',
                   encoding="utf-8")
    loaded = _loaded("validate", str(dot))
    assert "delivery.lang.jinja_reads" in loaded
