"""The recording proxy's judgement of one exchange: valid for its schema, or why not, and cut short or not."""

from __future__ import annotations

import json

from veriloop.llm.recording import judge

REQUEST = {
    "response_format": {
        "type": "json_object",
        "schema": {
            "type": "object",
            "properties": {"steps": {"type": "array", "items": {"type": "string"}}},
            "required": ["steps"],
        },
    }
}


def _body(content: str, finish_reason: str) -> bytes:
    choice = {"message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}
    return json.dumps({"choices": [choice]}).encode()


def test_an_answer_cut_at_the_token_limit_is_invalid_and_says_so():
    exchange = judge(REQUEST, 200, _body('{"steps": ["submit the page and then the', "length"))
    assert (exchange.dialect, exchange.valid, exchange.truncated) == (
        "json_object_schema",
        False,
        True,
    )


def test_a_complete_answer_is_not_truncated_whether_valid_or_not():
    valid = judge(REQUEST, 200, _body('{"steps": ["submit"]}', "stop"))
    wrong = judge(REQUEST, 200, _body('{"steps": "submit"}', "stop"))
    assert (valid.valid, valid.truncated) == (True, False)
    assert (wrong.valid, wrong.truncated) == (False, False) and "is not of type" in wrong.problem
