"""veriloop.graph: state, routers, ``build_graph()`` and the compiled ``graph`` that langgraph.json names.

``graph`` and ``build_graph`` load on first access, so nodes can import
``veriloop.graph.state`` without building the graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from veriloop.graph.builder import build_graph, graph

__all__ = ["build_graph", "graph"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from veriloop.graph import builder

        return getattr(builder, name)
    raise AttributeError(f"module 'veriloop.graph' has no attribute {name!r}")
