"""A picture of a compiled graph, drawn offline by graphviz's ``dot`` (Debian package ``graphviz``).

    from IPython.display import Image
    Image(graph_png(build_graph().compile()))

Solid edges are fixed, dashed ones are a router's choice. Nothing is fetched: no Mermaid web service.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

_ENDS = {"__start__": "START", "__end__": "END"}


class GraphvizMissing(RuntimeError):
    """graphviz's ``dot`` is not installed."""


def graph_dot(graph: Any) -> str:
    """The DOT source of ``graph`` (a compiled LangGraph graph, or its ``get_graph()``)."""
    drawable = graph.get_graph() if hasattr(graph, "get_graph") else graph
    lines = [
        "digraph veriloop {",
        '  graph [rankdir=TB, nodesep=0.35, ranksep=0.4, fontname="Helvetica"];',
        '  node [shape=box, style="rounded,filled", fillcolor="#e7f0fa", color="#1f4e79",'
        ' fontname="Helvetica", fontsize=11];',
        '  edge [color="#5b6776", arrowsize=0.7];',
    ]
    for node in drawable.nodes:
        if node in _ENDS:
            lines.append(
                f'  {json.dumps(node)} [label="{_ENDS[node]}", shape=oval, fillcolor="white"];'
            )
        else:
            lines.append(f"  {json.dumps(node)};")
    for edge in drawable.edges:
        style = " [style=dashed]" if edge.conditional else ""
        lines.append(f"  {json.dumps(edge.source)} -> {json.dumps(edge.target)}{style};")
    lines.append("}")
    return "\n".join(lines)


def graph_png(graph: Any, dot: str = "dot") -> bytes:
    """``graph`` rendered as a PNG by graphviz; :class:`GraphvizMissing` says how to get it."""
    program = shutil.which(dot)
    if program is None:
        raise GraphvizMissing(
            "graphviz's `dot` is not installed: `apt-get install graphviz` (scripts/setup.sh --dev "
            "does it), or print(graph.get_graph().draw_mermaid()) for the Mermaid text"
        )
    done = subprocess.run(
        [program, "-Tpng", "-Gdpi=110"], input=graph_dot(graph).encode(), capture_output=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"dot failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout
