"""Tokenizer, parser and builder: the DOT subset of SPEC §1 and what it means."""

from __future__ import annotations

import pytest

from delivery.errors import WorkflowSyntaxError
from delivery.lang.builder import build_workflow
from delivery.lang.lexer import Tok, tokenize
from delivery.lang.model import NodeType, Workflow
from delivery.lang.parser import parse_dot
from delivery.lang.syntax import EdgeStmt, NodeStmt, SubgraphStmt


def syntax_error(source: str) -> WorkflowSyntaxError:
    with pytest.raises(WorkflowSyntaxError) as info:
        parse_dot(source, "flow.dot")
    return info.value


def build(source: str) -> Workflow:
    workflow, diagnostics = build_workflow(parse_dot(source, "flow.dot"))
    assert [d for d in diagnostics if d.severity == "error"] == []
    return workflow


# -- tokenizer ----------------------------------------------------------------------


def test_tokens_carry_line_and_column_from_one() -> None:
    tokens = tokenize("digraph g {\n  a -> b\n}")
    assert [(t.kind, t.text, t.line, t.column) for t in tokens] == [
        (Tok.ID, "digraph", 1, 1),
        (Tok.ID, "g", 1, 9),
        (Tok.LBRACE, "{", 1, 11),
        (Tok.ID, "a", 2, 3),
        (Tok.ARROW, "->", 2, 5),
        (Tok.ID, "b", 2, 8),
        (Tok.RBRACE, "}", 3, 1),
        (Tok.EOF, "", 3, 2),
    ]


def test_value_kinds_are_told_apart() -> None:
    kinds = [t.kind for t in tokenize('"s" 42 -3 1.5 250ms 30s 15m 2h 1d true word')[:-1]]
    assert kinds == [Tok.STRING, Tok.NUMBER, Tok.NUMBER, Tok.NUMBER, Tok.DURATION,
                     Tok.DURATION, Tok.DURATION, Tok.DURATION, Tok.DURATION, Tok.ID, Tok.ID]


def test_string_escapes_are_resolved() -> None:
    (token, _eof) = tokenize(r'"say \"hi\" \\ back\nnew\ttab"')
    assert token.text == 'say "hi" \\ back\nnew\ttab'


def test_unknown_escapes_keep_their_backslash() -> None:
    (token, _eof) = tokenize(r'"left\l \N"')
    assert token.text == "left\\l \\N"


def test_multi_line_string_keeps_later_positions_right() -> None:
    tokens = tokenize('a [p="one\ntwo\nthree"] b\n  c')
    b = next(t for t in tokens if t.text == "b")
    c = next(t for t in tokens if t.text == "c")
    assert (b.line, b.column) == (3, 9)
    assert (c.line, c.column) == (4, 3)


def test_block_comment_spanning_lines_keeps_later_positions_right() -> None:
    tokens = tokenize("/* one\n two */ a\nb")
    assert [(t.text, t.line, t.column) for t in tokens[:-1]] == [("a", 2, 9), ("b", 3, 1)]


def test_line_hash_and_block_comments_produce_no_tokens() -> None:
    source = "# hash line\n  # indented hash\n// line\n/* block */ x // trailing\n"
    assert [t.text for t in tokenize(source)[:-1]] == ["x"]


def test_comment_markers_inside_strings_are_text() -> None:
    (token, _eof) = tokenize('"a // b /* c */ # d"')
    assert token.text == "a // b /* c */ # d"


def test_unterminated_string_names_where_it_starts() -> None:
    err = syntax_error('digraph g {\n  a [label="open\n]\n}')
    assert (err.position.line, err.position.column) == (2, 12)
    assert "closing" in err.expected and "flow.dot:2:12" in str(err)


def test_unterminated_block_comment_names_where_it_starts() -> None:
    err = syntax_error("digraph g {\n  /* never closed\n}")
    assert (err.position.line, err.position.column) == (2, 3)
    assert err.expected == "'*/'"


def test_html_label_is_rejected_with_a_hint() -> None:
    err = syntax_error("digraph g {\n  a [label=<<b>bold</b>>]\n}")
    assert (err.position.line, err.position.column) == (2, 12)
    assert "HTML" in err.fix


def test_unexpected_character_is_reported_with_its_position() -> None:
    err = syntax_error("digraph g {\n  a @ b\n}")
    assert (err.position.line, err.position.column) == (2, 5)
    assert err.found == "'@'"


# -- parser: what is rejected -------------------------------------------------------


def test_undirected_graph_is_rejected() -> None:
    err = syntax_error("graph x {\n  a -> b\n}")
    assert (err.position.line, err.position.column) == (1, 1)
    assert err.expected == "'digraph'" and "undirected" in err.fix


def test_strict_digraph_is_rejected() -> None:
    err = syntax_error("strict digraph x { }")
    assert err.expected == "'digraph'" and "strict" in err.fix


def test_undirected_edge_is_rejected() -> None:
    err = syntax_error("digraph x {\n  a -- b\n}")
    assert (err.position.line, err.position.column) == (2, 5)
    assert err.expected == "'->'" and err.found == "'--'"


def test_quoted_node_id_is_rejected() -> None:
    err = syntax_error('digraph x {\n  "a b" -> c\n}')
    assert (err.position.line, err.position.column) == (2, 3)
    assert err.expected == "a node id" and "unquoted" in err.fix


def test_dotted_node_id_is_rejected() -> None:
    err = syntax_error("digraph x { a.b -> c }")
    assert err.expected == "a node id" and "'.'" in err.fix


def test_keyword_cannot_be_a_node_id() -> None:
    err = syntax_error("digraph x { a -> node }")
    assert err.expected == "a node id"


def test_edge_to_a_subgraph_is_rejected() -> None:
    err = syntax_error("digraph x { a -> { b } }")
    assert err.expected == "a node id" and "subgraph" in err.fix


def test_empty_file_expects_digraph() -> None:
    err = syntax_error("")
    assert (err.position.line, err.position.column) == (1, 1)
    assert err.expected == "'digraph'" and err.found == "end of file"


def test_missing_open_brace_is_reported() -> None:
    err = syntax_error("digraph x\n  a -> b")
    assert (err.position.line, err.position.column, err.expected) == (2, 3, "'{'")


def test_missing_close_brace_is_reported_at_end_of_file() -> None:
    err = syntax_error("digraph x {\n  a -> b\n")
    assert err.position.line == 3 and err.found == "end of file"
    assert "'}'" in err.expected


def test_missing_equals_in_attribute_is_reported() -> None:
    err = syntax_error('digraph x { a [label "x"] }')
    assert (err.position.column, err.expected) == (22, "'='")
    assert "label=VALUE" in err.fix


def test_unclosed_attribute_list_is_reported() -> None:
    err = syntax_error('digraph x { a [label="x"')
    assert err.expected == "']'" and err.found == "end of file"


def test_attribute_without_value_is_reported() -> None:
    err = syntax_error("digraph x { a [label=] }")
    assert err.expected == "a value" and err.found == "']'"


def test_second_graph_in_a_file_is_rejected() -> None:
    err = syntax_error("digraph x { }\ndigraph y { }")
    assert (err.position.line, err.position.column, err.expected) == (2, 1, "end of file")


def test_every_syntax_error_message_names_file_line_column_and_expectation() -> None:
    for source in ["graph x {}", "digraph x { a -- b }", 'digraph x { a [l="x', "digraph {",
                   "digraph x { a -> }", "digraph x { [ }"]:
        err = syntax_error(source)
        pos = err.position
        assert str(err).startswith(f"flow.dot:{pos.line}:{pos.column}: expected {err.expected}")
        assert pos.line >= 1 and pos.column >= 1


# -- parser: what is accepted --------------------------------------------------------


def test_chained_edge_is_one_statement_with_every_node() -> None:
    graph = parse_dot("digraph g { a -> b -> c [label=x] }")
    (stmt,) = graph.body
    assert isinstance(stmt, EdgeStmt)
    assert [n for n, _, _ in stmt.chain] == ["a", "b", "c"]
    assert [a.key for a in stmt.attrs] == ["label"]


def test_semicolons_and_commas_are_optional() -> None:
    with_separators = parse_dot("digraph g { a [x=1, y=2; z=3]; b; a -> b; }")
    without = parse_dot("digraph g { a [x=1 y=2 z=3] b a -> b }")
    def shape(graph: object) -> list[str]:
        return [type(s).__name__ for s in graph.body]  # type: ignore[attr-defined]
    assert shape(with_separators) == shape(without) == ["NodeStmt", "NodeStmt", "EdgeStmt"]
    first = with_separators.body[0]
    assert isinstance(first, NodeStmt)
    assert [(a.key, a.value.text) for a in first.attrs] == [("x", "1"), ("y", "2"), ("z", "3")]


def test_several_attribute_lists_on_one_statement_are_joined() -> None:
    (stmt,) = parse_dot("digraph g { a [x=1][y=2] }").body
    assert isinstance(stmt, NodeStmt) and [a.key for a in stmt.attrs] == ["x", "y"]


def test_values_keep_their_kind() -> None:
    (stmt,) = parse_dot('digraph g { a [s="t", i=3, f=1.5, d=30s, b=true, w=box] }').body
    assert isinstance(stmt, NodeStmt)
    assert [a.value.kind for a in stmt.attrs] == ["string", "int", "float", "duration", "bool",
                                                  "word"]


def test_named_and_anonymous_subgraphs_nest() -> None:
    graph = parse_dot("digraph g { subgraph cluster_a { a { b } } }")
    (outer,) = graph.body
    assert isinstance(outer, SubgraphStmt) and outer.name == "cluster_a"
    assert isinstance(outer.body[1], SubgraphStmt) and outer.body[1].name is None


def test_graph_name_may_be_omitted_or_quoted() -> None:
    assert parse_dot("digraph { }").name == ""
    assert parse_dot('digraph "My flow" { }').name == "My flow"


# -- builder --------------------------------------------------------------------------


def test_subgraph_node_defaults_do_not_leak_out() -> None:
    workflow = build("""digraph g {
        subgraph s { node [shape=parallelogram, script="make"]  inside }
        outside [prompt="p"]
    }""")
    assert workflow.nodes["inside"].type is NodeType.SCRIPT
    assert workflow.nodes["outside"].type is NodeType.AGENT
    assert "script" not in workflow.nodes["outside"].attrs


def test_subgraph_edge_defaults_do_not_leak_out() -> None:
    workflow = build("digraph g { subgraph s { edge [weight=5] a -> b } b -> c }")
    assert [e.weight for e in workflow.edges] == [5, 0]


def test_subgraph_inherits_outer_defaults() -> None:
    workflow = build('digraph g { node [timeout="5m"] subgraph s { a } }')
    assert workflow.nodes["a"].attr("timeout") == "5m"
    assert workflow.nodes["a"].subgraph == "s"


def test_default_reaches_only_nodes_created_after_it() -> None:
    workflow = build("digraph g { before  node [timeout=30s]  after  b2 -> c2 }")
    assert "timeout" not in workflow.nodes["before"].attrs
    assert workflow.nodes["after"].attr("timeout") == "30s"
    assert workflow.nodes["c2"].attr("timeout") == "30s"


def test_default_does_not_change_a_node_created_earlier_when_it_is_mentioned_again() -> None:
    workflow = build("digraph g { a  node [max_retries=2]  a -> b }")
    assert "max_retries" not in workflow.nodes["a"].attrs
    assert workflow.nodes["b"].attr("max_retries") == "2"


def test_edge_default_reaches_only_later_edges() -> None:
    workflow = build("digraph g { a -> b  edge [weight=3]  b -> c }")
    assert [e.weight for e in workflow.edges] == [0, 3]


def test_explicit_attribute_beats_a_default() -> None:
    workflow = build('digraph g { node [timeout="5m"] a [timeout="1h"] }')
    assert workflow.nodes["a"].attr("timeout") == "1h"


def test_type_beats_shape() -> None:
    workflow = build('digraph g { a [shape=parallelogram, type=prompt, prompt="p"] }')
    assert workflow.nodes["a"].type is NodeType.PROMPT


def test_attractor_type_aliases_resolve() -> None:
    workflow = build('digraph g { a [type=codergen] b [type=tool, tool_command="x"] '
                     'c [type="wait.human"] }')
    assert [workflow.nodes[n].type for n in "abc"] == [NodeType.AGENT, NodeType.SCRIPT,
                                                       NodeType.HUMAN]


def test_start_id_counts_whatever_its_shape_when_no_node_is_mdiamond() -> None:
    workflow = build('digraph g { Start [shape=circle] work [prompt="p"] }')
    assert workflow.nodes["Start"].type is NodeType.START


def test_start_id_is_not_a_second_start_beside_an_mdiamond() -> None:
    workflow = build('digraph g { begin [shape=Mdiamond] start [shape=box, prompt="p"] }')
    assert workflow.nodes["begin"].type is NodeType.START
    assert workflow.nodes["start"].type is NodeType.AGENT


def test_exit_id_counts_unless_an_attractor_shape_says_otherwise() -> None:
    workflow = build('digraph g { done [shape=doublecircle] exit [shape=box, prompt="p"] }')
    assert workflow.nodes["done"].type is NodeType.EXIT
    assert workflow.nodes["exit"].type is NodeType.AGENT


def test_id_convention_beats_an_inherited_shape() -> None:
    workflow = build("digraph g { node [shape=box] start  exit  done  work }")
    assert workflow.nodes["start"].type is NodeType.START
    assert workflow.nodes["exit"].type is NodeType.EXIT
    assert workflow.nodes["done"].type is NodeType.EXIT
    assert workflow.nodes["work"].type is NodeType.AGENT


def test_attractor_shapes_map_to_their_types() -> None:
    workflow = build("digraph g { a [shape=Mdiamond] b [shape=Msquare] c [shape=box] "
                     "d [shape=hexagon] e [shape=diamond] f [shape=parallelogram] "
                     "h [shape=component] i [shape=tripleoctagon] }")
    assert [workflow.nodes[n].type for n in "abcdefhi"] == [
        NodeType.START, NodeType.EXIT, NodeType.AGENT, NodeType.HUMAN,
        NodeType.CONDITIONAL, NodeType.SCRIPT, NodeType.PARALLEL, NodeType.FAN_IN]


def test_any_other_shape_is_an_agent_and_only_type_selects_delivery_types() -> None:
    workflow = build("digraph g { a [shape=rect] b [shape=tab] c [shape=cds] "
                     "d [shape=folder] e [shape=doubleoctagon] f [shape=insulator] "
                     "h [type=probe, shape=rect] i [type=worktree_add] }")
    assert [workflow.nodes[n].type for n in "abcdef"] == [NodeType.AGENT] * 6
    assert workflow.nodes["h"].type is NodeType.PROBE
    assert workflow.nodes["i"].type is NodeType.WORKTREE_ADD


def test_chain_expands_into_edges_each_with_the_attributes() -> None:
    workflow = build('digraph g { a -> b -> c [label="go", weight=2] }')
    assert [(e.source, e.target, e.label, e.weight) for e in workflow.edges] == [
        ("a", "b", "go", 2), ("b", "c", "go", 2)]


def test_chain_edges_point_at_their_source_node_in_the_text() -> None:
    workflow = build("digraph g {\n  a ->\n  b -> c\n}")
    assert [(e.line, e.column) for e in workflow.edges] == [(2, 3), (3, 3)]


def test_graph_attributes_come_from_blocks_and_top_level_assignments() -> None:
    workflow = build('digraph g { graph [goal="Ship"] rankdir=LR label="L" }')
    assert (workflow.goal, workflow.attr("rankdir"), workflow.attr("label")) == ("Ship", "LR", "L")


def test_node_named_only_by_an_edge_is_created_undeclared() -> None:
    workflow = build("digraph g { a [prompt=p] a -> b }")
    assert workflow.nodes["a"].declared and not workflow.nodes["b"].declared


def test_later_declaration_adds_attributes_to_an_existing_node() -> None:
    workflow = build('digraph g { a -> b  b [prompt="later", label="B"] }')
    node = workflow.nodes["b"]
    assert node.declared and node.prompt == "later" and node.label == "B"


def test_builder_diagnostic_points_into_a_multi_line_string() -> None:
    source = 'digraph g {\n  a [outputs="x:text,\ny:prose"]\n}'
    _, diagnostics = build_workflow(parse_dot(source, "flow.dot"))
    (diag,) = [d for d in diagnostics if d.rule == "outputs_declaration"]
    assert (diag.line, diag.column) == (3, 3)  # the unknown kind "prose"
