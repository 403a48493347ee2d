"""The plan graph: runs a manifest of tool-using steps, one thread per plan run (docs/plans.md).

START -> plan -> critique -> dispatch -> run_step (one Send per lane) -> batch_end
      -> replan | dispatch | finalize -> END; each run_step is the step graph: prepare -> execute
      -> check -> correct -> execute ... -> finish (or human_review, or a nested subplan)
      -> next_step (unless nothing can follow) -> the lane's next step (prepare | human_review |
      subplan) or END.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from veriloop.context import PlanContext
from veriloop.graph.bridge import Router, on_loop, sync_and_async, sync_and_async_twins
from veriloop.graph.plan_routers import (
    route_after_batch,
    route_after_check,
    route_after_critique,
    route_after_finish,
    route_after_plan,
    route_after_step,
    route_dispatch,
    route_step_start,
)
from veriloop.graph.plan_state import PlanInput, PlanState, StepInput, StepOutput, StepState
from veriloop.nodes.plan.batch_end import batch_end
from veriloop.nodes.plan.critique import critique
from veriloop.nodes.plan.dispatch import dispatch
from veriloop.nodes.plan.finalize import finalize
from veriloop.nodes.plan.lane import next_step
from veriloop.nodes.plan.plan import plan
from veriloop.nodes.plan.replan import replan
from veriloop.nodes.plan.review import human_review
from veriloop.nodes.plan.step import check, correct, execute, finish, prepare
from veriloop.nodes.plan.subplan import make_subplan


def build_step_graph() -> StateGraph:
    """One step's verify-fix loop; compiled without a checkpointer so it uses the run's."""
    builder = StateGraph(
        StepState, context_schema=PlanContext, input_schema=StepInput, output_schema=StepOutput
    )
    # Async nodes get a sync body (the bridge loop) so ``graph.invoke``/``stream`` run them too;
    # nodes that only reshape state run on the event loop under ``ainvoke`` (no thread hop).
    builder.add_node("prepare", prepare)  # file fingerprints: in LangGraph's thread pool
    builder.add_node("execute", sync_and_async(execute))
    builder.add_node("check", sync_and_async(check))
    builder.add_node("correct", on_loop(correct))
    builder.add_node("finish", on_loop(finish))
    builder.add_node("human_review", on_loop(human_review))
    builder.add_node("subplan", sync_and_async_twins(*make_subplan(lambda: graph)))
    builder.add_node("next_step", on_loop(next_step))

    builder.add_conditional_edges(START, Router(route_step_start))
    builder.add_edge("prepare", "execute")
    builder.add_edge("execute", "check")
    builder.add_conditional_edges("check", Router(route_after_check))
    builder.add_edge("correct", "execute")
    for node in ("finish", "human_review", "subplan"):
        builder.add_conditional_edges(node, Router(route_after_finish))
    builder.add_conditional_edges("next_step", Router(route_after_step))
    return builder


def build_plan_graph() -> StateGraph:
    """The uncompiled plan graph; compile it with a checkpointer (thread_id = run id)."""
    builder = StateGraph(PlanState, context_schema=PlanContext, input_schema=PlanInput)
    builder.add_node("plan", sync_and_async(plan))
    builder.add_node("critique", sync_and_async(critique))
    builder.add_node("dispatch", on_loop(dispatch))
    builder.add_node("run_step", build_step_graph().compile(name="step"))
    builder.add_node("batch_end", on_loop(batch_end))
    builder.add_node("replan", sync_and_async(replan))
    builder.add_node("finalize", on_loop(finalize))

    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", Router(route_after_plan))
    builder.add_conditional_edges("critique", Router(route_after_critique))
    builder.add_conditional_edges("dispatch", Router(route_dispatch), ["run_step", "finalize"])
    builder.add_edge("run_step", "batch_end")
    builder.add_conditional_edges("batch_end", Router(route_after_batch))
    builder.add_edge("replan", "dispatch")
    builder.add_edge("finalize", END)
    return builder


# Studio / `langgraph dev` load this (langgraph.json); nested plan steps run it as their child graph.
graph = build_plan_graph().compile(name="plan")
