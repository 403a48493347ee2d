"""The graph's picture: DOT from the compiled graph, rendered by graphviz's dot, no network."""

from __future__ import annotations

import pytest

from veriloop import build_graph
from veriloop.drawing import GraphvizMissing, graph_dot, graph_png


def test_the_dot_source_has_every_node_and_marks_router_edges() -> None:
    graph = build_graph().compile()
    dot = graph_dot(graph)
    for node in graph.get_graph().nodes:
        assert f'"{node}"' in dot
    assert '"planning" -> "step_refinement";' in dot  # a fixed edge
    assert '"verification" -> "goal_achieved" [style=dashed];' in dot  # a router's choice
    assert '"__start__" [label="START"' in dot


def test_graph_png_is_a_picture() -> None:
    png = graph_png(build_graph().compile())
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_without_graphviz_the_error_says_how_to_get_it() -> None:
    with pytest.raises(GraphvizMissing, match="apt-get install graphviz"):
        graph_png(build_graph().compile(), dot="no-such-dot-program")
