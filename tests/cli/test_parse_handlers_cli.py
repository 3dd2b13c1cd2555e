"""`delivery parse WORKFLOW [--json]` and `delivery handlers [--json]` (SPEC §12)."""

from __future__ import annotations

import json
from pathlib import Path

from engine_helpers import cli, write_flow

FLOW = """
digraph F {
  graph [goal="g", default_max_retry=2]
  Start [shape=circle]
  exit [shape=Msquare]
  a [prompt="A", max_retries=1, timeout="30s"]
  gate [shape=diamond]
  Start -> a -> gate
  gate -> exit [condition="outcome=success", weight=3]
  gate -> a [weigth=2]
}
"""


def test_parse_json_gives_resolved_types_typed_fields_and_positions(tmp_path: Path) -> None:
    code, out, _ = cli("parse", write_flow(tmp_path, FLOW), "--json")
    model = json.loads(out)
    assert code == 0
    nodes = {node["id"]: node for node in model["nodes"]}
    assert nodes["Start"]["type"] == "start" and nodes["gate"]["type"] == "conditional"
    assert (nodes["a"]["max_retries"], nodes["a"]["timeout"]) == (1, 30.0)
    assert (nodes["a"]["line"], nodes["a"]["column"]) == (6, 3)
    assert model["graph"]["default_max_retries"] == 2
    edge = model["edges"][2]
    assert (edge["source"], edge["target"], edge["weight"]) == ("gate", "exit", 3)
    assert edge["condition"] == "outcome=success"
    assert [d["rule"] for d in model["diagnostics"]] == ["unknown_attribute"]


def test_parse_exits_one_on_errors_and_reports_them(tmp_path: Path) -> None:
    code, out, _ = cli("parse", write_flow(tmp_path, FLOW.replace("max_retries=1",
                                                                  'max_retries="x"')))
    assert code == 1 and "attribute_value" in out


def test_parse_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = cli("parse", tmp_path / "nope.dot")
    assert code == 2 and "no such file" in err


def test_handlers_json_lists_runnable_types_with_attributes_and_aliases() -> None:
    code, out, _ = cli("handlers", "--json")
    table = {entry["type"]: entry for entry in json.loads(out)["types"]}
    assert code == 0
    assert table["agent"]["aliases"] == ["codergen"]
    assert table["agent"]["attractor_shape"] == "box"
    assert "prompt" in table["agent"]["attributes"]
    assert "join_policy" in table["parallel"]["attributes"]
    assert table["script"]["aliases"] == ["tool"]


def test_handlers_json_lists_the_respond_type_with_its_threads_attribute() -> None:
    code, out, _ = cli("handlers", "--json")
    respond = {entry["type"]: entry for entry in json.loads(out)["types"]}["respond"]
    assert code == 0
    assert {"threads", "folder"} <= set(respond["attributes"])
    assert respond["aliases"] == [] and respond["attractor_shape"] is None
