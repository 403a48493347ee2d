"""Through the browser graph, each call goes to its purpose's model with its effort; usage is per model."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from veriloop.agent import Agent
from veriloop.context import Context
from veriloop.schemas import usage_by_purpose_and_model

GOAL = "Add a patient named Jas"


def test_the_graph_routes_every_call_by_purpose_and_counts_usage_per_model(
    jas, observe, verdict
) -> None:
    jas.script("verification", verdict(True, False, 0.9, "The form opened."))
    ctx = Context(
        model="gpt-4.1-mini",
        reasoning_effort="low",
        purposes={
            "planning": {"model": "o3"},
            "action": {"model": "gpt-5-mini", "reasoning_effort": "minimal"},
            "verification": {"model": "o4-mini"},  # no effort of its own: the model's highest,
            # whatever the default
        },
    )
    agent = Agent(checkpointer=InMemorySaver(), context=ctx)
    first = agent.step(observe("patients", query=GOAL))
    agent.step(observe("patient_form", task_id=first.task_id))

    carried = [(r.purpose, r.body["model"], r.body.get("reasoning_effort")) for r in jas.requests]
    assert carried[:3] == [
        ("planning", "o3", "low"),  # the default effort, for a purpose that sets none
        ("refinement", "gpt-4.1-mini", None),  # gpt-4.1 takes no reasoning effort: left out
        ("action", "gpt-5-mini", "minimal"),
    ]
    # The second step's verdict and its lookahead (refinement, action) run side by side.
    assert sorted(carried[3:]) == [
        ("action", "gpt-5-mini", "minimal"),
        ("refinement", "gpt-4.1-mini", None),
        ("verification", "o4-mini", "high"),
    ]
    usage = agent.get_task(first.task_id).usage
    calls = {(purpose, model): u.calls for purpose, model, u in usage_by_purpose_and_model(usage)}
    assert calls == {
        ("planning", "o3"): 1,
        ("refinement", "gpt-4.1-mini"): 2,
        ("action", "gpt-5-mini"): 2,
        ("verification", "o4-mini"): 1,
    }
    o3 = usage["planning"]["by_model"]["o3"]
    assert o3["cost_usd"] > 0 and o3["cost_usd"] == usage["planning"]["cost_usd"]


def test_verification_grounded_through_the_graph_counts_the_lookup(jas, observe, verdict) -> None:
    jas.script(
        "verification",
        verdict(True, False, 0.75, "The form opened.", lookup_query="clinic patient form fields"),
        verdict(True, False, 0.9, "The form opened, as the clinic's docs describe."),
    )
    jas.script("grounding", "The new patient form asks for a full name.")
    ctx = Context(
        purposes={
            "verification": {"grounding": "openai"},
            "grounding": {"model": "gpt-4.1"},
        }
    )
    agent = Agent(checkpointer=InMemorySaver(), context=ctx)
    first = agent.step(observe("patients", query=GOAL))
    second = agent.step(observe("patient_form", task_id=first.task_id))
    assert second.verification.confidence == 0.9
    lookup = [r for r in jas.requests if r.purpose == "grounding"]
    assert len(lookup) == 1 and lookup[0].endpoint == "responses"
    assert "clinic patient form fields" in lookup[0].body["input"]
    usage = agent.get_task(first.task_id).usage
    calls = {(purpose, model): u.calls for purpose, model, u in usage_by_purpose_and_model(usage)}
    assert calls[("verification", "gpt-4.1-mini")] == 2
    assert calls[("grounding", "gpt-4.1")] == 1
