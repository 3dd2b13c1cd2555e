"""Is the light template reader worth keeping? `delivery validate` timed with it and without.

delivery/lang/light_reads.py reads the Jinja subset the bundled workflows use without
importing Jinja2; anything else goes to Jinja2's own parse (jinja_reads.py). This times
`delivery validate FILE` as a whole process (what a person waits for) twice over:

- light: as shipped;
- jinja: the same code with the light reader answering None, so every template beyond
  plain `{{ x.y }}` takes Jinja2's parse and scope analysis.

The files: the bundled workflows, and a generated workflow of N nodes (default 1,000)
whose agents' prompts loop over the folders like deliver.dot's do. Runs alternate between
the two modes, with compiled bytecode cached (as an installed delivery has it); medians
are printed with their difference and ratio, then the in-process time of check_source on
the generated workflow with each reader (CPU time, best of a few, Jinja2 already loaded).

    python benchmarks/template_reader.py [--rounds N] [--nodes N]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = [ROOT / "workflows" / "deliver.dot", ROOT / "workflows" / "review-prs.dot"]

# The child: `delivery validate ...`, with the light reader switched off in "jinja" mode.
CHILD = (
    "import sys\n"
    "mode = sys.argv.pop(1)\n"
    "if mode == 'jinja':\n"
    "    import delivery.lang.light_reads as light\n"
    "    light.light_reads = lambda source: None\n"
    "from delivery.cli.main import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
)

# A prompt as deliver.dot writes them: a loop over the folders, filters, a condition.
LOOP = ("{% for f in folders %}\\n## {{ f }}: {{ context[f].pr.state | default('') }} "
        "{{ context[f].pr.url | default('') }}\\n{% endfor %}"
        "{% if v | length > 3 %}long{% else %}short{% endif %}")


def generate_workflow(nodes: int) -> str:
    """A valid workflow of about `nodes` nodes: chains of agents whose prompts loop over
    the folders and read the previous agent's output, with a script between them."""
    blocks = max(1, (nodes - 2) // 2)
    lines = ["digraph templates {",
             '    graph [goal="Measure the template reader", inputs="ticket", '
             'folders="web,api"]',
             "    start [shape=Mdiamond]", "    exit  [shape=Msquare]"]
    for i in range(blocks):
        previous = f"v{i - 1}" if i else "ticket"
        loop = LOOP.replace("{% if v |", f"{{% if {previous} |")
        after = f"a{i + 1}" if i + 1 < blocks else "exit"
        lines += [
            f'    a{i} [prompt="Work on {{{{ {previous} }}}} for {{{{ goal }}}}{loop}", '
            f'outputs="v{i}:text"]',
            f'    s{i} [type=script, script="echo {{% for f in folders %}}{{{{ f }}}} '
            f'{{% endfor %}}{{{{ v{i} | trim }}}}"]',
            f"    a{i} -> s{i}", f"    s{i} -> {after}",
        ]
    lines += ["    start -> a0", "}", ""]
    return "\n".join(lines)


def process_times(files: list[Path], rounds: int) -> dict[tuple[str, Path], list[float]]:
    """Wall time of `delivery validate FILE` per (mode, file), alternating the modes."""
    times: dict[tuple[str, Path], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="template-reader-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for round_ in range(rounds + 1):
            for path in files:
                for mode in ("light", "jinja"):
                    argv = [sys.executable, "-c", CHILD, mode, "validate", str(path)]
                    began = time.perf_counter()
                    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
                    if round_:  # the first round writes the bytecode cache
                        times.setdefault((mode, path), []).append(
                            time.perf_counter() - began)
    return times


def best_cpu(repeat: int, action: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        began = time.process_time()
        action()
        best = min(best, time.process_time() - began)
    return best


def in_process(source: str, repeat: int = 5) -> tuple[float, float]:
    """(check_source CPU s with the light reader, the same with Jinja2's parse only)."""
    import delivery.lang.light_reads as light
    from delivery.validation.loader import check_source

    shipped = light.light_reads
    check_source(source, "templates.dot")  # Jinja2 and every module loaded before timing
    with_light = best_cpu(repeat, lambda: check_source(source, "templates.dot"))
    light.light_reads = lambda text: None  # type: ignore[assignment]
    try:
        check_source(source, "templates.dot")
        with_jinja = best_cpu(repeat, lambda: check_source(source, "templates.dot"))
    finally:
        light.light_reads = shipped
    return with_light, with_jinja


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--nodes", type=int, default=1_000)
    args = parser.parse_args(argv)
    source = generate_workflow(args.nodes)
    with tempfile.TemporaryDirectory(prefix="template-reader-") as scratch:
        generated = Path(scratch) / f"generated-{args.nodes}.dot"
        generated.write_text(source, encoding="utf-8")
        files = [*BUNDLED, generated]
        times = process_times(files, args.rounds)
        print(f"{'delivery validate':<28} {'light ms':>9} {'jinja ms':>9} {'diff ms':>8} "
              f"{'jinja/light':>11}")
        for path in files:
            light = statistics.median(times[("light", path)]) * 1000
            jinja = statistics.median(times[("jinja", path)]) * 1000
            print(f"{path.name:<28} {light:>9.0f} {jinja:>9.0f} {jinja - light:>8.0f} "
                  f"{jinja / light:>11.2f}")
    with_light, with_jinja = in_process(source)
    print(f"check_source of generated-{args.nodes}.dot in process (Jinja2 loaded): light "
          f"{with_light * 1000:.0f} ms, jinja {with_jinja * 1000:.0f} ms, "
          f"ratio {with_jinja / with_light:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
