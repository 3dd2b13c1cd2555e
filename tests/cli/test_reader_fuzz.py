"""Hypothesis over the CLI's readers of user files (SPEC §14): the workflow file, the replay
file and the facts file a script writes. Whatever they hold — garbage, random bytes, deep
nesting, megabytes — the command ends with its documented exit code, an error is one
line on stderr, and nothing escapes as a traceback, hangs or takes unbounded memory.

The commands run in a child process under a 1 GiB memory limit (tests/reader_worker.py)
and each must answer within 20 seconds.
"""

from __future__ import annotations

import base64
import json
import select
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.testing import flow

WORKER = Path(__file__).resolve().parents[1] / "reader_worker.py"
MEMORY = 1 << 30
ANSWER_SECONDS = 20
FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@dataclass
class Answer:
    code: int
    stdout: str
    stderr: str
    escaped: str

    def check_no_traceback(self) -> None:
        assert self.escaped == "", self.escaped
        assert "Traceback" not in self.stderr, self.stderr

    def check_one_line_error(self) -> None:
        self.check_no_traceback()
        lines = self.stderr.strip("\n").split("\n")
        assert len(lines) == 1 and lines[0].startswith("delivery "), self.stderr


class Worker:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(MEMORY)], cwd=directory, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)

    def run(self, argv: list[str], files: dict[str, bytes]) -> Answer:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"argv": argv, "files": {name: base64.b64encode(data).decode()
                                           for name, data in files.items()}}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], ANSWER_SECONDS)
        if not ready:
            self.process.kill()
            pytest.fail(f"no answer within {ANSWER_SECONDS} s for {argv}")
        line = self.process.stdout.readline()
        assert line, f"the worker died on {argv} (exit {self.process.wait()})"
        data: dict[str, Any] = json.loads(line)
        return Answer(**data)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    directory = tmp_path_factory.mktemp("readers")
    started = Worker(directory)
    yield started
    started.close()


# -- inputs ------------------------------------------------------------------------------

def _deep(opening: str, closing: str) -> st.SearchStrategy[str]:
    return st.integers(1, 200_000).map(lambda n: opening * n + closing * n)


TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)
DOT_BITS = st.sampled_from(['digraph g {', "}", "subgraph {", "a -> b", '[label="', '"', "\\",
                            "\n", "condition=\"", "!(", "{{", "}}", "{%", "'", "=", ";", ","])
WORKFLOWS = st.one_of(
    st.binary(max_size=400),
    TEXT.map(str.encode),
    st.lists(DOT_BITS, max_size=80).map(lambda parts: "".join(parts).encode()),
    _deep("subgraph {", "}").map(lambda body: f"digraph g {{ {body} }}".encode()),
    _deep("(", ")").map(lambda c: f'digraph g {{ a -> b [condition="{c}x"] }}'.encode()),
    _deep('"', "").map(lambda q: f"digraph g {{ a [label={q}] }}".encode()),
    st.integers(1, 3_000_000).map(lambda n: ('digraph g { a [label="' + "x" * n).encode()),
    st.just(b"\xef\xbb\xbfdigraph g { start [shape=Mdiamond]; exit [shape=Msquare]; "
            b"start -> exit }"),
)
REPLAYS = st.one_of(
    st.binary(max_size=300),
    TEXT.map(str.encode),
    _deep("[", "]").map(lambda body: f'{{"plan": {body}}}'.encode()),
    _deep("{", "}").map(str.encode),
    st.dictionaries(st.text(max_size=8), st.lists(TEXT, max_size=3) | TEXT | st.integers(),
                    max_size=3).map(lambda d: json.dumps(d).encode()),
    st.lists(TEXT, max_size=3).map(lambda replies: json.dumps({"plan": replies}).encode()),
)
FACT_LINES = st.sampled_from(["a=1", "b.c=2", "a<<EOF", "EOF", "x=y", "<<", "=", "b.c<<",
                              "a=\x00", "\r", ""])
FACTS = st.one_of(
    st.binary(max_size=300),
    st.lists(FACT_LINES | TEXT, max_size=30).map(lambda lines: "\n".join(lines).encode()),
    st.integers(1, 2_000_000).map(lambda n: b"a<<EOF\n" + b"x" * n),
)

AGENT_FLOW = flow("""
plan [prompt="Plan it"]
start -> plan -> exit
""", goal=None, name="R").encode()
FACTS_FLOW = flow("""
report [shape=parallelogram, facts="a,b.c", script="cat facts.in >> \\"$DELIVERY_FACTS\\""]
start -> report -> exit
""", goal=None).encode()


# -- the readers -------------------------------------------------------------------------

@FUZZ
@given(source=WORKFLOWS)
def test_workflow_reader_validates_or_reports_whatever_the_file_holds(
        worker: Worker, source: bytes) -> None:
    answer = worker.run(["validate", "flow.dot"], {"flow.dot": source})
    if answer.code == 2:  # not UTF-8: cannot be read
        answer.check_one_line_error()
        return
    answer.check_no_traceback()
    assert answer.code in (0, 1) and answer.stderr == ""
    assert ("flow.dot: invalid" if answer.code else "flow.dot: ok") in answer.stdout


@FUZZ
@given(replies=REPLAYS)
def test_replay_reader_refuses_in_one_line_or_runs(worker: Worker, replies: bytes) -> None:
    answer = worker.run(["run", "agent.dot", "--goal", "g", "--agent", "replay:replies.json",
                         "--workspace", "."],
                        {"agent.dot": AGENT_FLOW, "replies.json": replies})
    if answer.code == 2:
        answer.check_one_line_error()
        assert "replay file" in answer.stderr
    else:
        answer.check_no_traceback()
        assert answer.code in (0, 1) and answer.stdout.startswith("run ")


@FUZZ
@given(facts=FACTS)
def test_facts_reader_records_or_fails_the_stage_with_a_reason(
        worker: Worker, facts: bytes) -> None:
    answer = worker.run(["run", "facts.dot", "--goal", "g", "--workspace", ".", "--json"],
                        {"facts.dot": FACTS_FLOW, "facts.in": facts})
    answer.check_no_traceback()
    assert answer.code in (0, 1), answer.stderr
    report = json.loads(answer.stdout)
    assert report["status"] == ("succeeded" if answer.code == 0 else "failed")
    if answer.code == 1:
        assert report["failure_reason"]
