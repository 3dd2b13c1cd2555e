"""The example workflows under tests/workflows: valid ones pass, each invalid one shows its rule.

Every invalid file is named after the rule it demonstrates (`<rule>.dot`, or
`<rule>__<variant>.dot`) and starts with `// expect: <rule> <line>` lines.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from delivery.errors import DeclarationError
from delivery.lang.builder import _Builder, build_workflow
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.parser import parse_dot
from delivery.validation.loader import check_source

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = Path(__file__).resolve().parents[1] / "workflows"
VALID = [*sorted((EXAMPLES / "valid").glob("*.dot")), ROOT / "workflows" / "deliver.dot"]
INVALID = sorted((EXAMPLES / "invalid").glob("*.dot"))
EXPECT = re.compile(r"^//\s*expect:\s*([a-z_]+)\s+([0-9]+)\s*$")

# Where diagnostics are created: the rule ids in these files must each have an example.
RULE_SOURCES = [
    ROOT / "delivery" / "lang" / "builder.py",
    ROOT / "delivery" / "lang" / "attr_values.py",
    ROOT / "delivery" / "validation" / "loader.py",
    ROOT / "delivery" / "validation" / "validator.py",
    ROOT / "delivery" / "validation" / "agent_rules.py",
    ROOT / "delivery" / "validation" / "forge_rules.py",
    ROOT / "delivery" / "validation" / "security.py",
    ROOT / "delivery" / "validation" / "foreach_rules.py",
]
_EMITTERS = {"diag", "add", "at_node", "at_attr", "Diagnostic"}


def expectations(path: Path) -> list[tuple[str, int]]:
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = EXPECT.match(line)
        if m:
            found.append((m.group(1), int(m.group(2))))
    return found


def rule_of(path: Path) -> str:
    return path.stem.split("__", 1)[0]


def _string_constants(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _string_constants(node.body) + _string_constants(node.orelse)
    return []


def _declaration_rule_ids() -> set[str]:
    """The ids the builder derives from DeclarationError.attribute (`inputs_declaration`...):
    ask the builder itself, for every attribute name declarations.py raises with."""
    source = (ROOT / "delivery" / "lang" / "declarations.py").read_text(encoding="utf-8")
    attributes = set(re.findall(r'DeclarationError\(\s*"([a-z_]+)"', source))
    assert attributes >= {"inputs", "defaults", "outputs", "facts", "probe", "folders"}
    workflow, _ = build_workflow(parse_dot('digraph g { graph [a="x"] }'))
    builder = _Builder(parse_dot("digraph g { }"))
    for name in sorted(attributes):
        error = DeclarationError(name, "x", 0, "problem", "fix")
        builder.declaration_error(error, workflow.attrs["a"], None)
    return {d.rule for d in builder.diagnostics}


def emitted_rule_ids() -> set[str]:
    """Every rule id written literally where a diagnostic is made, plus the derived ones."""
    rules: set[str] = set()
    for path in RULE_SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in _EMITTERS:
                    rules.update(_string_constants(node.args[0]))
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "rule" for t in node.targets
            ):
                rules.update(_string_constants(node.value))
            elif (isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple)
                  and len(node.value.elts) == 3):
                rules.update(_string_constants(node.value.elts[0]))
    rules.update(_declaration_rule_ids())
    return {r for r in rules if re.fullmatch(r"[a-z]+(_[a-z]+)*", r)}


def _describe(diagnostics: list[Diagnostic]) -> str:
    return "\n".join(d.format_text() for d in diagnostics) or "(no diagnostics)"


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_example_has_no_errors(path: Path) -> None:
    workflow, diagnostics = check_source(path.read_text(encoding="utf-8"), str(path))
    errors = [d for d in diagnostics if d.severity == "error"]
    assert workflow is not None
    assert errors == [], _describe(errors)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_example_reports_its_rule_at_the_expected_line(path: Path) -> None:
    expected = expectations(path)
    assert expected, f"{path.name} has no '// expect: <rule> <line>' line"
    assert rule_of(path) in {rule for rule, _ in expected}
    _, diagnostics = check_source(path.read_text(encoding="utf-8"), str(path))
    for rule, line in expected:
        hits = [d for d in diagnostics if d.rule == rule and d.line == line]
        assert hits, f"expected {rule} at line {line}; got:\n{_describe(diagnostics)}"
        assert all(d.file == str(path) and d.column >= 1 for d in hits)
        assert all(d.message and d.fix for d in hits)


def test_every_emitted_rule_has_an_invalid_example() -> None:
    rules = emitted_rule_ids()
    assert {"syntax", "availability", "inputs_declaration", "probe_syntax"} <= rules
    have = {rule_of(p) for p in INVALID}
    missing = sorted(rules - have)
    assert missing == [], f"add tests/workflows/invalid/<rule>.dot for: {missing}"


def test_every_invalid_example_names_a_real_rule() -> None:
    rules = emitted_rule_ids()
    unknown = sorted({rule_of(p) for p in INVALID} - rules)
    assert unknown == []


def test_every_rule_is_documented() -> None:
    table = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\|\s*`([a-z_]+)`", table, flags=re.MULTILINE))
    assert sorted(emitted_rule_ids() - documented) == []
