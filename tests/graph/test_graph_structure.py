"""The compiled graph: thirteen nodes wired as DESIGN.md says (Mermaid snapshot plus explicit edges)."""

from __future__ import annotations

from pathlib import Path

from veriloop.graph import build_graph, graph

SNAPSHOT = Path(__file__).parent / "snapshots" / "graph.mmd"
NODES = {
    "planning", "step_refinement", "action_generation", "observation", "verification",
    "lookahead", "audit_ahead", "use_lookahead", "correction", "replanning", "goal_achieved", "completion_audit",
    "finalize",
}  # fmt: skip
CONDITIONAL = {
    ("__start__", "planning"),
    ("__start__", "observation"),
    ("observation", "correction"),
    ("observation", "verification"),
    ("observation", "lookahead"),
    ("observation", "audit_ahead"),
    ("verification", "goal_achieved"),
    ("verification", "use_lookahead"),
    ("verification", "planning"),
    ("verification", "correction"),
    ("action_generation", "finalize"),
    ("action_generation", "correction"),
    ("use_lookahead", "__end__"),  # a valid prepared action is finalized in use_lookahead
    ("use_lookahead", "correction"),
    ("correction", "finalize"),
    ("correction", "replanning"),
    ("replanning", "planning"),
    ("replanning", "step_refinement"),
    ("completion_audit", "finalize"),
    ("completion_audit", "use_lookahead"),
    ("completion_audit", "planning"),
    ("completion_audit", "correction"),
}
DIRECT = {
    ("goal_achieved", "completion_audit"),
    ("planning", "step_refinement"),
    ("step_refinement", "action_generation"),
    ("finalize", "__end__"),
    ("lookahead", "__end__"),  # its branch ends; use_lookahead reads what it wrote
    ("audit_ahead", "__end__"),  # likewise; completion_audit reads what it wrote
}


def test_thirteen_nodes_and_the_design_edges():
    drawn = graph.get_graph()
    assert set(drawn.nodes) - {"__start__", "__end__"} == NODES
    edges = {(e.source, e.target): e.conditional for e in drawn.edges}
    assert {edge for edge, conditional in edges.items() if conditional} == CONDITIONAL
    assert {edge for edge, conditional in edges.items() if not conditional} == DIRECT


def test_mermaid_snapshot():
    assert graph.get_graph().draw_mermaid() == SNAPSHOT.read_text(encoding="utf-8")


def test_exported_graph_has_no_checkpointer_and_build_graph_is_uncompiled():
    assert graph.checkpointer is None and graph.name == "veriloop"
    builder = build_graph()
    assert not hasattr(builder, "invoke")
    assert set(builder.nodes) == NODES
