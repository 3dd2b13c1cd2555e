"""Run the `delivery` CLI and SIGKILL the process at one precise point (crash tests).

    DURABILITY_KILL=SPEC python tests/durability_driver.py run flow.dot --json ...

SPEC says where the process kills itself (`SIGKILL`, so nothing is flushed, no `finally`
runs, no lock is released politely — as in a power cut or an OOM kill):

    saved:NODE[:K]           right after the K-th stage record whose next_node is NODE is
                             saved (appended to the log and flushed)
    record-torn:NODE[:K]     instead of that record: half of its line is written and
                             flushed, the rest never is
    snapshot[:K]             right after the K-th snapshot (checkpoint.json) is written
    event:TYPE[:NODE[:K]]    right after the K-th TYPE event (for NODE) is appended
    event-torn:TYPE[:NODE[:K]]  in the middle of writing that event's line
    stage-file:NODE:NAME[:K] right after the K-th write of NODE's stage file NAME

    run-info                 just before run.json is written

K defaults to 1. Without DURABILITY_KILL the CLI runs normally and its exit status is
passed through; a kill point never reached exits with status 97.

The crash tests' workspace (workflow, replay file, stage script) is defined here too, so
that the tests of the run commands share it: `write_workspace(DIR)`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from delivery.cli.main import main
from delivery.store import eventlog, runstore
from delivery.store.records import RunState, StageRecord

NOT_REACHED = 97

# Nine stages besides start and exit: prompt and agent nodes (one reply needs a correction
# turn), scripts writing facts (one over 100 KB, so it is offloaded to the artifact store;
# one that fails and is routed on its failure), a conditional, and a review loop that
# runs `test` and `review` twice.
FLOW = r"""// durability: prompts, agents, scripts with facts, a conditional and a loop
digraph Durable {
    graph [goal="Ship the durable feature", inputs="ticket, flavour?",
           defaults="flavour='vanilla'"]
    start [shape=Mdiamond]
    exit  [shape=Msquare]

    plan      [type=prompt, prompt="Plan {{ ticket }} ({{ flavour }}) for $goal",
               outputs="plan:text, steps:json"]
    build     [type=script, facts="build.count, build.blob", script="bash ./stage.sh build"]
    check     [shape=diamond]
    implement [prompt="Implement: {{ plan }} in {{ build.count }} parts", outputs="summary:text"]
    test      [type=script, facts="tests.passed, tests.count",
               script="bash ./stage.sh test {{ summary | length }}"]
    review    [type=prompt, prompt="Review {{ summary }} ({{ tests.count }} tests)",
               outputs="verdict:choice"]
    fix       [prompt="Fix what review found in {{ summary }}", outputs="summary:text"]
    audit     [type=script, facts="audit.issues", script="bash ./stage.sh audit"]
    ship      [type=script, facts="shipped.tag",
               script="bash ./stage.sh ship {{ steps | length }}"]

    start -> plan -> build -> check
    check -> implement [condition="build.count > 2"]
    check -> exit      [condition="build.count <= 2"]
    implement -> test
    test -> review     [condition="tests.passed = true"]
    test -> exit       [condition="outcome=fail"]
    review -> fix      [condition="verdict=rework"]
    review -> audit    [condition="verdict=pass"]
    fix -> test
    audit -> ship      [condition="outcome=fail"]
    audit -> ship
    ship -> exit
}
"""

# `stage.sh NAME [ARG]` does the work of the script stage NAME: it writes NAME's facts
# (audit's and then fails). With DURABILITY_GATES=DIR, every visit of a stage first leaves
# DIR/<stage>.<visit> holding its pid; the visit named by
# DURABILITY_HOLD then waits, at most 20 s, for DIR/release — long enough for the test to
# kill the run right there.
STAGE_SH = r"""if [ -n "$DURABILITY_GATES" ]; then
    n=1
    while [ -e "$DURABILITY_GATES/$1.$n" ] && [ "$n" -lt 100 ]; do n=$((n + 1)); done
    echo "$$" > "$DURABILITY_GATES/.$1.$n"
    mv "$DURABILITY_GATES/.$1.$n" "$DURABILITY_GATES/$1.$n"
    if [ "$1.$n" = "$DURABILITY_HOLD" ]; then
        for _ in $(seq 1 400); do [ -e "$DURABILITY_GATES/release" ] && break; sleep 0.05; done
    fi
fi
case "$1" in
    build)
        echo build.count=3
        echo 'build.blob<<EOF'
        yes abcdefghij | head -c 120000 | tr -d '\n'
        echo
        echo EOF ;;
    test) printf 'tests.passed=true\ntests.count=%s\n' "$2" ;;
    audit) echo audit.issues=2; exit 3 ;;
    ship) echo "shipped.tag=v1-$2" ;;
esac >> "$DELIVERY_FACTS"
"""


def _reply(text: str, updates: dict[str, Any]) -> str:
    return f"{text}\n{json.dumps({'context_updates': updates})}"


REPLIES: dict[str, list[str]] = {
    "plan": [_reply("Plan: three parts.", {"plan": "split in three", "steps": ["a", "b", "c"]})],
    "implement": ["I forgot the contract.",
                  _reply("Done.", {"summary": "first cut"})],
    "review": [_reply("Needs work.", {"verdict": "rework"}),
               _reply("Good.", {"verdict": "pass"})],
    "fix": [_reply("Fixed.", {"summary": "second, better cut"})],
}


def write_workspace(directory: Path) -> Path:
    """The crash tests' flow.dot, replies.json and stage.sh in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "flow.dot").write_text(FLOW, encoding="utf-8")
    (directory / "stage.sh").write_text(STAGE_SH, encoding="utf-8")
    (directory / "replies.json").write_text(json.dumps(REPLIES, indent=1), encoding="utf-8")
    return directory


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class KillPoint:
    def __init__(self, spec: str) -> None:
        parts = spec.split(":")
        self.kind = parts[0]
        self.args = parts[1:]
        self.seen = 0

    def hit(self, wanted: int) -> bool:
        """Count a matching occurrence; True on the wanted one."""
        self.seen += 1
        return self.seen == wanted


def _split(args: list[str], names: int) -> tuple[list[str], int]:
    """The first `names` matching fields and K (the last field when numeric, default 1)."""
    if len(args) > names and args[-1].isdigit():
        return args[:-1], int(args[-1])
    return args, 1


def _tear_next_write() -> None:
    """The next line the event log writes is cut in half (flushed), then the process dies."""
    def torn(fd: int, data: bytes) -> None:
        os.write(fd, data[: max(1, len(data) // 2)])
        os.fsync(fd)
        die()

    eventlog.write_all = torn  # type: ignore[assignment]


def install(spec: str) -> None:
    point = KillPoint(spec)
    kind = point.kind
    store = runstore.LocalRunStore
    if kind in ("saved", "record-torn"):
        (node,), wanted = _split(point.args, 1)
        original_append_record = store._append_record

        def append_record(self: runstore.LocalRunStore, record: StageRecord) -> None:
            if record.next_node == node and point.hit(wanted=wanted):
                if kind == "record-torn":
                    _tear_next_write()
                original_append_record(self, record)
                die()
            original_append_record(self, record)

        store._append_record = append_record  # type: ignore[method-assign]
    elif kind == "snapshot":
        _, wanted = _split(point.args, 0)
        original_snapshot = store._snapshot

        def snapshot(self: runstore.LocalRunStore, state: RunState) -> None:
            original_snapshot(self, state)
            if point.hit(wanted=wanted):
                die()

        store._snapshot = snapshot  # type: ignore[method-assign]
    elif kind in ("event", "event-torn"):
        fields, wanted = _split(point.args, 2)
        event_type = fields[0]
        event_node = fields[1] if len(fields) > 1 else None
        original_append = eventlog.EventLog.append

        def append(self: eventlog.EventLog, event_type_: str, **values: Any) -> dict[str, Any]:
            matches = event_type_ == event_type and (event_node is None
                                                 or values.get("node") == event_node)
            if matches and point.hit(wanted=wanted):
                if kind == "event-torn":
                    _tear_next_write()
                result = original_append(self, event_type_, **values)
                die()
                return result
            return original_append(self, event_type_, **values)

        eventlog.EventLog.append = append  # type: ignore[method-assign,assignment]
    elif kind == "run-info":
        def write_run_info(self: runstore.LocalRunStore, info: Any) -> None:
            die()

        store.write_run_info = write_run_info  # type: ignore[method-assign]
    elif kind == "stage-file":
        (node, name), wanted = _split(point.args, 2)
        # the method every stage file goes through (write_stage_file calls it too)
        original_write: Callable[..., None] = store.write_stage_text

        def write_stage_text(self: runstore.LocalRunStore, node_id: str, attempt: int,
                             file_name: str, text: str, **kwargs: Any) -> None:
            original_write(self, node_id, attempt, file_name, text, **kwargs)
            if node_id == node and file_name == name and point.hit(wanted=wanted):
                die()

        store.write_stage_text = write_stage_text  # type: ignore[method-assign]
    else:
        raise SystemExit(f"durability_driver: unknown kill point {spec!r}")


if __name__ == "__main__":
    spec = os.environ.get("DURABILITY_KILL", "")
    if spec:
        install(spec)
    status = main(sys.argv[1:])
    sys.exit(NOT_REACHED if spec else status)
