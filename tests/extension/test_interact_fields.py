"""What the interact answer tells a client beyond the action string (graph.io.state_to_response)."""

from __future__ import annotations

from veriloop.graph.io import state_to_response


def _state(**extra) -> dict:
    history = [
        {"step_index": 0, "action": "click(1)", "source": "action_generation"},
        {
            "step_index": 1,
            "action": 'setValue(5, "Jas")',
            "source": "correction",
            "correction_strategy": "alternative_element(5)",
        },
    ]
    return {
        "task_id": "t",
        "status": "executing",
        "action_history": history,
        "tried_strategies": ["retry_with_delay", "alternative_element(5)"],
        "verification_result": {
            "step_index": 0,
            "success": False,
            "confidence": 0.2,
            "observations": ["URL did not change"],
            "failure_category": "no_effect",
            "model_called": False,
        },
        **extra,
    }


def test_the_answer_carries_the_parsed_action_the_strategy_and_whether_the_model_was_asked() -> (
    None
):
    answer = state_to_response(_state()).to_wire()
    assert answer["parsedAction"] == {"kind": "set_value", "elementId": 5, "text": "Jas"}
    assert answer["correctionStrategy"] == "alternative_element(5)"
    assert answer["verification"]["modelCalled"] is False
    assert answer["verification"]["failureCategory"] == "no_effect"


def test_an_action_from_the_plan_names_no_strategy() -> None:
    state = _state()
    state["action_history"][1] |= {"source": "action_generation", "correction_strategy": None}
    state["verification_result"]["model_called"] = True
    answer = state_to_response(state).to_wire()
    assert "correctionStrategy" not in answer
    assert answer["verification"]["modelCalled"] is True
