"""The verified-step graph: one invocation per observation (see docs/graph.md and DESIGN.md)."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from veriloop.context import Context
from veriloop.graph.bridge import Router, on_loop, sync_and_async
from veriloop.graph.routers import (
    route_after_action_generation,
    route_after_completion_audit,
    route_after_correction,
    route_after_observation,
    route_after_replanning,
    route_after_use_lookahead,
    route_after_verification,
    route_entry,
)
from veriloop.graph.state import InputState, State
from veriloop.nodes.action_generation import action_generation
from veriloop.nodes.audit_ahead import audit_ahead
from veriloop.nodes.completion_audit import completion_audit
from veriloop.nodes.correction import correction
from veriloop.nodes.finalize import finalize
from veriloop.nodes.goal_achieved import goal_achieved
from veriloop.nodes.lookahead import lookahead
from veriloop.nodes.observation import observation
from veriloop.nodes.planning import planning
from veriloop.nodes.replanning import replanning
from veriloop.nodes.step_refinement import step_refinement
from veriloop.nodes.use_lookahead import use_lookahead
from veriloop.nodes.verification import verification


def build_graph() -> StateGraph:
    """The uncompiled graph; compile it with the checkpointer of your choice (thread_id = task id)."""
    builder = StateGraph(State, context_schema=Context, input_schema=InputState)
    builder.add_node("planning", sync_and_async(planning))
    builder.add_node("step_refinement", sync_and_async(step_refinement))
    builder.add_node("action_generation", sync_and_async(action_generation))
    builder.add_node("observation", sync_and_async(observation))
    builder.add_node("verification", sync_and_async(verification))
    builder.add_node("lookahead", sync_and_async(lookahead))
    builder.add_node("audit_ahead", sync_and_async(audit_ahead))
    builder.add_node("use_lookahead", on_loop(use_lookahead))
    builder.add_node("correction", sync_and_async(correction))
    builder.add_node("replanning", sync_and_async(replanning))
    builder.add_node("goal_achieved", on_loop(goal_achieved))
    builder.add_node("completion_audit", sync_and_async(completion_audit))
    builder.add_node("finalize", on_loop(finalize))

    builder.add_conditional_edges(START, Router(route_entry))
    builder.add_conditional_edges(
        "observation",
        Router(route_after_observation),
        ["correction", "verification", "lookahead", "audit_ahead"],
    )
    builder.add_conditional_edges("verification", Router(route_after_verification))
    builder.add_conditional_edges("use_lookahead", Router(route_after_use_lookahead))
    builder.add_edge("goal_achieved", "completion_audit")
    builder.add_conditional_edges("completion_audit", Router(route_after_completion_audit))
    builder.add_edge("planning", "step_refinement")
    builder.add_edge("step_refinement", "action_generation")
    builder.add_conditional_edges("action_generation", Router(route_after_action_generation))
    builder.add_conditional_edges("correction", Router(route_after_correction))
    builder.add_conditional_edges("replanning", Router(route_after_replanning))
    builder.add_edge("finalize", END)
    return builder


# Studio / `langgraph dev` load this (langgraph.json); the platform supplies persistence, so no checkpointer.
graph = build_graph().compile(name="veriloop")
