"""The run's validated-model cache (`<run>/workflow.model.json`, delivery.store.model_cache):
a resume reads the model and the warnings a fresh load of the workflow copy gives, and
anything wrong with the cache makes it load the copy as before and write the cache again."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, resume_run, start_run
from delivery.errors import WorkflowInvalid
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import Edge, Node, Workflow
from delivery.store import model_cache, model_codec
from delivery.store.files import seal
from delivery.store.model_cache import (
    CACHE_FILE,
    cache_bytes,
    load_run_workflow,
    parse_cache,
    read_cache,
)
from delivery.testing.cli import invoke
from delivery.validation.loader import check_file, check_source

ROOT = Path(__file__).resolve().parents[2]


# The bundled workflows, the examples, and the validator's examples that docs/rules.md
# documents (the invalid ones build models too: a round trip needs no runnable one). The
# docs hold no DOT file of their own.
BUNDLED = [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")) for path in sorted(
    [*ROOT.glob("workflows/*.dot"), *ROOT.glob("examples/*/*.dot"),
     *ROOT.glob("tests/workflows/*/*.dot")])]

FLOW = """digraph g {
    graph [goal="Check", inputs="ticket, notes?", defaults="notes='none'"]
    node [timeout="30s"]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    check [shape=parallelogram, script="true", titel="say hello"]
    ask   [type=prompt, prompt="Hi {{ goal }}", max_retries=2]
    start -> check
    check -> ask [condition="outcome=succeeded && context.notes!=x", weight=3]
    check -> exit [condition="outcome!=succeeded"]
    ask -> exit
}
"""


def canonical(workflow: Workflow) -> dict[str, Any]:
    """Everything a model holds, orders included (dict equality ignores them)."""
    fields = dataclasses.asdict(workflow)
    fields["order"] = ([list(workflow.nodes)], [list(n.attrs) for n in workflow.nodes.values()],
                       [list(e.attrs) for e in workflow.edges], list(workflow.attrs))
    return fields


def fresh(path: Path) -> tuple[Workflow, list[Diagnostic]]:
    workflow, diagnostics = check_file(path)
    assert workflow is not None
    return workflow, diagnostics


def started_run(tmp_path: Path, dot: str = FLOW) -> Path:
    """The run directory of a finished run of `dot`."""
    flow = tmp_path / "flow.dot"
    flow.write_text(dot, encoding="utf-8")
    outcome = start_run(RunRequest(workflow=flow, goal="g", inputs={"ticket": "T-1"},
                                   workspace=tmp_path, run_dir=tmp_path / "run"),
                        World(agent=ReplayBackend({"ask": ["ok"]})))
    assert outcome.status == "succeeded", outcome.failure_reason
    return outcome.run_dir


def copy_of(run: Path) -> tuple[Path, bytes]:
    return run / "workflow.dot", (run / "workflow.dot").read_bytes()


def assert_loads_as_fresh(run: Path, *, from_cache: bool) -> None:
    copy, source = copy_of(run)
    got = load_run_workflow(run, copy, source)
    workflow, diagnostics = fresh(copy)
    assert got.from_cache is from_cache
    assert canonical(got.workflow) == canonical(workflow)
    assert list(got.diagnostics) == diagnostics


# -- the cache is written when the run starts, and holds what a fresh load gives ---------
def test_a_run_writes_the_cache_of_its_copy_when_it_starts(tmp_path: Path) -> None:
    run = started_run(tmp_path)
    assert (run / CACHE_FILE).is_file()
    assert_loads_as_fresh(run, from_cache=True)


def test_the_cache_names_the_copy_not_the_file_the_run_started_with(tmp_path: Path) -> None:
    run = started_run(tmp_path)
    copy, source = copy_of(run)
    got = read_cache(run, source, str(copy))
    assert got is not None and got.workflow.file == str(copy)
    assert got.diagnostics and {d.file for d in got.diagnostics} == {str(copy)}


def test_a_moved_run_directory_keeps_its_cache_and_names_where_the_copy_is_now(
        tmp_path: Path) -> None:
    run = started_run(tmp_path)
    moved = run.rename(tmp_path / "moved")
    assert_loads_as_fresh(moved, from_cache=True)


def test_resume_prints_the_warnings_a_fresh_load_of_the_copy_prints(tmp_path: Path) -> None:
    flow = tmp_path / "flow.dot"
    flow.write_text(FLOW, encoding="utf-8")
    args = ("--input", "ticket=T-1", "--agent", "replay:replies.json")
    (tmp_path / "replies.json").write_text(json.dumps({"ask": ["ok", "ok"]}))
    assert invoke("run", flow, "--run-dir", tmp_path / "run", *args, cwd=tmp_path).code == 0
    assert (tmp_path / "run" / CACHE_FILE).is_file()  # the CLI's run wrote it too
    _, validated, _ = invoke("validate", tmp_path / "run" / "workflow.dot", cwd=tmp_path)
    code, _, err = invoke("resume", tmp_path / "run", cwd=tmp_path)
    assert code == 0
    warnings = [line for line in validated.splitlines() if ": warning[" in line]
    assert warnings and all(line in err for line in warnings)


# -- anything wrong with it is a miss: the copy is loaded and the cache written again ----
def _flip_a_byte(data: bytes) -> bytes:
    at = data.index(b"say hello")
    return data[:at] + b"S" + data[at + 1:]


def _resealed(change: Any) -> Any:
    """Edit the JSON and seal it again: only the schema or the key can refuse it."""
    def edit(data: bytes) -> bytes:
        value = json.loads(data)
        del value["checksum"]
        change(value)
        return seal(json.dumps(value).encode())
    return edit


DAMAGE = {
    "a flipped byte (the checksum fails)": _flip_a_byte,
    "cut short": lambda data: data[: len(data) // 2],
    "not JSON": lambda data: b"\x00garbage",
    "empty": lambda data: b"",
    "another schema version": _resealed(lambda v: v.update(schema_version=1)),
    "the schema version as text": _resealed(lambda v: v.update(schema_version="2")),
    "a field the schema does not know": _resealed(lambda v: v.update(extra=1)),
    "a node field the schema does not know": _resealed(
        lambda v: v["model"]["nodes"]["fields"].update(script_runner=[[0], ["x"]])),
    "a member missing": _resealed(lambda v: v["model"].pop("budget_usd")),
    "a wrong type": _resealed(lambda v: v["model"].update(line="one")),
    "a wrong type in a column": _resealed(
        lambda v: v["model"]["nodes"]["line"].__setitem__(0, "one")),
    "a bool for a number": _resealed(
        lambda v: v["model"]["nodes"]["column"].__setitem__(0, True)),
    "a column cut short": _resealed(lambda v: v["model"]["edges"]["weight"].pop()),
    "an attribute column cut short": _resealed(
        lambda v: v["model"]["nodes"]["attrs"][5].pop()),
    "attribute counts that do not add up": _resealed(
        lambda v: v["model"]["nodes"]["attr_counts"].__setitem__(0, 99)),
    "an unknown node type": _resealed(
        lambda v: v["model"]["nodes"]["fields"]["type"][1].__setitem__(0, "bogus")),
    "a node index out of range": _resealed(
        lambda v: v["model"]["nodes"]["fields"]["type"][0].__setitem__(0, 999)),
    "a negative node index": _resealed(
        lambda v: v["model"]["nodes"]["fields"]["type"][0].__setitem__(0, -1)),
    "an unknown value kind": _resealed(
        lambda v: v["model"]["nodes"]["attrs"][4].__setitem__(0, "blob")),
    "a diagnostic of another shape": _resealed(lambda v: v["diagnostics"][0].pop("fix")),
    "not an object": _resealed(lambda v: v["model"].update(nodes=[])),
    "built from another workflow": _resealed(lambda v: v.update(workflow_sha256="0" * 64)),
    "built by other code": _resealed(lambda v: v.update(code="0" * 64)),
    "a condition that does not parse": _resealed(
        lambda v: v["model"]["edges"]["condition"].__setitem__(1, "((")),
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_or_stale_cache_is_ignored_and_written_again(tmp_path: Path,
                                                              damage: str) -> None:
    run = started_run(tmp_path)
    cache = run / CACHE_FILE
    cache.write_bytes(DAMAGE[damage](cache.read_bytes()))
    copy, source = copy_of(run)
    assert read_cache(run, source, str(copy)) is None
    assert_loads_as_fresh(run, from_cache=False)
    assert_loads_as_fresh(run, from_cache=True)  # written again


def test_a_cache_of_another_workflow_with_the_same_shape_is_not_taken(tmp_path: Path) -> None:
    """The key is the copy's SHA-256: a cache sealed for other text is a miss."""
    run = started_run(tmp_path)
    copy, source = copy_of(run)
    other = source.replace(b"say hello", b"say bye!!")
    workflow, diagnostics = check_source(other.decode(), str(copy))
    assert workflow is not None
    (run / CACHE_FILE).write_bytes(cache_bytes(workflow, diagnostics, other, str(copy)))
    assert read_cache(run, source, str(copy)) is None
    assert_loads_as_fresh(run, from_cache=False)


def test_a_symlink_in_place_of_the_cache_is_not_followed_and_is_replaced(
        tmp_path: Path) -> None:
    run = started_run(tmp_path)
    cache = run / CACHE_FILE
    theirs = tmp_path / "someones-file.json"
    theirs.write_bytes(cache.read_bytes())  # even a valid cache is not read through it
    cache.unlink()
    cache.symlink_to(theirs)
    before = theirs.read_bytes()
    copy, source = copy_of(run)
    assert read_cache(run, source, str(copy)) is None
    assert_loads_as_fresh(run, from_cache=False)
    assert theirs.read_bytes() == before  # never written through
    assert not cache.is_symlink() and cache.is_file()
    assert_loads_as_fresh(run, from_cache=True)


def test_a_run_directory_the_cache_cannot_be_written_to_still_resumes(tmp_path: Path) -> None:
    run = started_run(tmp_path)
    (run / CACHE_FILE).unlink()
    (run / CACHE_FILE).mkdir()  # in the way of the rename
    assert_loads_as_fresh(run, from_cache=False)
    assert not list(run.glob(f"{CACHE_FILE}.*.tmp"))  # no temporary file left


def test_a_copy_with_errors_is_refused_as_before_and_not_cached(tmp_path: Path) -> None:
    run = started_run(tmp_path)
    (run / CACHE_FILE).unlink()
    copy = run / "workflow.dot"
    copy.write_text(FLOW.replace('condition="outcome!=succeeded"', 'condition="(("'),
                    encoding="utf-8")
    with pytest.raises(WorkflowInvalid):
        load_run_workflow(run, copy, copy.read_bytes())
    assert not (run / CACHE_FILE).exists()


def test_resume_refuses_an_edited_copy_before_reading_its_cache(tmp_path: Path) -> None:
    run = started_run(tmp_path)
    copy = run / "workflow.dot"
    copy.write_text(FLOW.replace("say hello", "say hi"), encoding="utf-8")
    with pytest.raises(Exception, match="was changed after the run started"):
        resume_run(run, World(agent=ReplayBackend({"ask": ["ok"]})))


# -- the cached model is the model a fresh build gives ------------------------------------
def test_the_cache_schema_carries_every_field_of_a_node() -> None:
    """A field added to Node must be added to the cache (or the cached model would lose
    it); the round-trip properties below check the values."""
    carried = {*model_codec.NODE_COLUMNS, *model_codec._COLUMN_READERS,
               *model_codec._ITEM_READERS}
    assert carried == {f.name for f in dataclasses.fields(Node)}
    assert {*model_codec.EDGE_COLUMNS, "attrs"} == {f.name for f in dataclasses.fields(Edge)}
    assert {f.name for f in dataclasses.fields(Workflow)} == model_codec.MODEL_KEYS


def round_trip(source: str, file: str = "/runs/r/workflow.dot") -> None:
    workflow, diagnostics = check_source(source, file)
    if workflow is None:
        return  # does not parse: nothing to cache
    data = source.encode()
    got = parse_cache(cache_bytes(workflow, diagnostics, data, file), data, file)
    assert got is not None
    assert canonical(got.workflow) == canonical(workflow)
    assert list(got.diagnostics) == diagnostics


def test_the_bundled_workflows_and_the_docs_examples_are_all_there() -> None:
    names = [name for name, _ in BUNDLED]
    assert {"workflows/deliver.dot", "workflows/review-prs.dot",
            "examples/review/review.dot"} <= set(names)
    assert sum(name.startswith("tests/workflows/") for name in names) > 50


@pytest.mark.parametrize("source", [text for _, text in BUNDLED],
                         ids=[name for name, _ in BUNDLED])
def test_a_bundled_workflow_round_trips_through_the_cache(source: str) -> None:
    round_trip(source)


NODE_ATTRS = st.sampled_from([
    'shape=box', 'shape=hexagon', 'shape=diamond', 'shape=component', 'shape=house',
    'shape=tripleoctagon', 'type=prompt', 'type=probe', 'type=publish', 'type=respond',
    'type=wait', 'type=merge', 'type=worktree_add', 'type="wait.human"', 'type=bogus',
    'prompt="Do {{ goal }}"', 'script="make test"', 'max_retries=3', 'timeout="90s"',
    'goal_gate=true', 'allow_partial=true', 'auto_status=true', 'delegatable=true',
    'outputs="verdict:choice, notes:text"', 'outputs="report.md"', 'facts="ok, n"',
    'probe="pr, diff"', 'join=any', 'max_parallel=2', 'template=plain', 'interval="5s"',
    'max_interval="1m"', 'backoff=2', 'threads=replies', 'folder=web', 'agent=fast',
    'stack.child_dotfile="child.dot"', 'manager.poll_interval="10s"',
    'manager.max_cycles=5', 'manager.stop_condition="outcome=succeeded"',
    'manager.actions="observe, steer"', 'promt="typo"', 'label="A \\"quoted\\" one"'])
EDGE_ATTRS = st.sampled_from([
    'condition="outcome=succeeded"', 'condition="outcome=fail || pr.state!=MERGED"',
    'condition="!(a=1 && b contains x)"', 'condition="(("', 'weight=5', 'label="yes"',
    'loop_restart=true'])
GRAPH_ATTRS = st.sampled_from([
    'goal="Ship"', 'inputs="ticket, notes?"', 'defaults="notes=\'n\'"', 'folders="web, api"',
    'budget_tokens=1000', 'budget_usd=2.5', 'default_max_retry=2', 'template=plain',
    'extra_attributes="owner, team"', 'default_fidelity=compact', 'stack.child_dotfile=c.dot'])


@st.composite
def workflows(draw: st.DrawFn) -> str:
    ids = [f"n{i}" for i in range(draw(st.integers(1, 6)))]
    lines = [f"graph [{', '.join(draw(st.lists(GRAPH_ATTRS, max_size=4, unique=True)))}]",
             f"node [{', '.join(draw(st.lists(NODE_ATTRS, max_size=2, unique=True)))}]",
             "start [shape=Mdiamond]", "exit [shape=Msquare]"]
    for node in ids:
        attrs = draw(st.lists(NODE_ATTRS, max_size=4, unique=True))
        line = f"{node} [{', '.join(attrs)}]"
        lines.append(f"subgraph cluster_{node} {{ label=\"S\"; {line} }}"
                     if draw(st.booleans()) and len(lines) < 8 else line)
    chain = ["start", *ids, "exit"]
    for source, target in itertools.pairwise(chain):
        attrs = draw(st.lists(EDGE_ATTRS, max_size=2))
        lines.append(f"{source} -> {target} [{', '.join(attrs)}]")
    for _ in range(draw(st.integers(0, 3))):
        lines.append(f"{draw(st.sampled_from(chain))} -> {draw(st.sampled_from(chain))} "
                     f"[{draw(EDGE_ATTRS)}]")
    return "digraph g {\n    " + "\n    ".join(lines) + "\n}\n"


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflows())
def test_a_generated_workflow_round_trips_through_the_cache(source: str) -> None:
    round_trip(source)


def test_generated_workflows_reach_the_model_fields_the_cache_compacts() -> None:
    """The generator is not idle: its graphs set the node fields that are left out at
    their defaults, so the round trip above compares them."""
    seen: set[str] = set()
    defaults = {f.name: f.default for f in dataclasses.fields(Node)
                if f.default is not dataclasses.MISSING}

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(workflows())
    # a manager needs shape=house and a manager.* attribute on one node: rare in 150 draws
    @example("digraph g {\n    start [shape=Mdiamond]\n    exit [shape=Msquare]\n"
             "    n0 [shape=house, manager.max_cycles=5]\n    start -> n0 -> exit\n}\n")
    def collect(source: str) -> None:
        workflow, _ = check_source(source, "g.dot")
        for node in (workflow.nodes.values() if workflow else ()):
            seen.update(name for name, default in defaults.items()
                        if getattr(node, name) != default)

    collect()
    assert {"type", "outputs", "facts", "probe_kinds", "max_retries", "timeout", "manager",
            "goal_gate", "join_policy", "template", "threads_key"} <= seen


def test_the_cache_holds_no_more_than_the_copy_does(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """SPEC §14: the copy is redacted; the cache is built from it, so a secret in the
    started workflow is in neither."""
    secret = "s3cr3t-token-value-123456"
    monkeypatch.setenv("DELIVERY_TEST_MODEL_CACHE_SECRET", secret)
    run = started_run(tmp_path, FLOW.replace("say hello", f"say {secret}"))
    assert secret.encode() not in (run / "workflow.dot").read_bytes()
    assert secret.encode() not in (run / CACHE_FILE).read_bytes()
    assert_loads_as_fresh(run, from_cache=True)


def test_the_key_is_the_sha256_of_the_copys_bytes(tmp_path: Path) -> None:
    run = started_run(tmp_path)
    _, source = copy_of(run)
    value = json.loads((run / CACHE_FILE).read_bytes())
    assert value["workflow_sha256"] == hashlib.sha256(source).hexdigest()
    assert value["schema_version"] == model_cache.SCHEMA


# -- whatever the (resealed) file holds, reading it is a model or a miss, never an error ----
def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (the paths to its members and items)."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _places(item, (*path, index))
    return found


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.sampled_from(["prompt", "string", "jinja", "error", "(("]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=6)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_resealed_cache_with_any_value_anywhere_is_read_or_missed_never_raised(
        data: st.DataObject) -> None:
    file = "/runs/r/workflow.dot"
    workflow, diagnostics = check_source(FLOW, file)
    assert workflow is not None
    source = FLOW.encode()
    value = json.loads(cache_bytes(workflow, diagnostics, source, file))
    del value["checksum"]
    places = [p for p in _places(value) if p and p[0] not in ("code", "workflow_sha256")]
    place = data.draw(st.sampled_from(places))
    *parents, last = place
    target = value
    for step in parents:
        target = target[step]
    if data.draw(st.booleans(), label="remove") and isinstance(target, dict):
        del target[last]
    else:
        target[last] = data.draw(JSON_VALUES)
    got = parse_cache(seal(json.dumps(value).encode()), source, file)
    if got is not None:  # a change the model does not show (a file name, say) is taken
        assert isinstance(got.workflow, Workflow)
