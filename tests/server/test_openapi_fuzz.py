"""Property-based fuzzing of the OpenAPI document (schemathesis): whatever the input, never a 5xx.

Every operation of the app's own document is called on a real server on loopback: the interact
API, health, plan runs and LangServe's ``/agent/*`` (with a valid ``config``, so the fuzz reaches
our code, not LangServe's config parsing). Besides schemathesis' own strings, every string of a
body, and of query and path parameters, is often replaced by hostile text: lone UTF-16
surrogates, U+FFFE/U+FFFF, NUL and other controls, bidi and zero-width characters, line
separators (surrogates only in bodies: a URL cannot carry them).
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from veriloop.server.app import create_app
from veriloop.server.settings import Settings

NASTY = [
    "\ud800",  # lone high surrogate
    "\udfff",  # lone low surrogate
    "a\ud83d",  # half of an emoji pair
    "\ufffe",
    "\uffff",
    "\x00",
    "\x01\x1b[2J",
    "\x7f\x85",
    "\u202e",  # right-to-left override
    "\u2066\u2069",  # bidi isolates
    "\u200b\u200d\ufeff",  # zero-width space, joiner, BOM
    "\u2028\u2029",  # line and paragraph separators
    "PAGE_DATA>>>",
]
URL_SAFE = [s for s in NASTY if not any("\ud800" <= c <= "\udfff" for c in s)]


def hostile(pieces: list[str]) -> st.SearchStrategy[str]:
    """Text made of hostile pieces and ordinary characters."""
    return st.lists(
        st.one_of(st.sampled_from(pieces), st.text(max_size=4)), min_size=1, max_size=6
    ).map("".join)


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(value, str):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return []


def _replaced(value: Any, changes: dict[tuple, str], path: tuple = ()) -> Any:
    if path in changes:
        return changes[path]
    if isinstance(value, dict):
        return {k: _replaced(v, changes, (*path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v, changes, (*path, i)) for i, v in enumerate(value)]
    return value


def with_hostile_strings(value: Any, pieces: list[str]) -> st.SearchStrategy[Any]:
    """``value`` with any of its strings replaced by hostile text."""
    leaves = _leaves(value)
    if not leaves:
        return st.just(value)
    choices = st.lists(
        st.one_of(st.none(), hostile(pieces)), min_size=len(leaves), max_size=len(leaves)
    )
    return choices.map(
        lambda drawn: _replaced(
            value, {p: s for p, s in zip(leaves, drawn, strict=True) if s is not None}
        )
    )


# Generated from the app's own OpenAPI document; the calls go to a real server on loopback.
schema = schemathesis.openapi.from_dict(create_app(Settings()).openapi()).include(
    path_regex="^/(api/|healthz|agent/)"
)


@schema.hook
def flatmap_body(context, body):
    if isinstance(body, dict) and "config" in body:  # LangServe: a valid (empty) config
        body = {**body, "config": {}}
    return with_hostile_strings(body, NASTY)


@schema.hook
def flatmap_query(context, query):
    return with_hostile_strings(query, URL_SAFE)


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    return with_hostile_strings(path_parameters, URL_SAFE)


@pytest.fixture
def fuzzed(thread_server, sqlite_settings, playbook):
    return thread_server(sqlite_settings)


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_the_service_fail(case, fuzzed):
    case.call_and_validate(
        base_url=fuzzed.url, headers={"X-API-Key": "key-a"}, checks=[not_a_server_error]
    )


def test_the_openapi_document_describes_the_protocol(thread_server, sqlite_settings, playbook):
    document = thread_server(sqlite_settings).client().get("/openapi.json").json()
    paths = document["paths"]
    assert {
        "/api/agent/interact",
        "/api/session/{session_id}/task/active",
        "/api/tasks/{task_id}",
        "/healthz",
    } <= set(paths)
    assert {"/agent/invoke", "/agent/stream"} <= set(paths)
    interact = paths["/api/agent/interact"]["post"]
    assert {"400", "401", "404", "409", "413", "422", "503"} <= set(interact["responses"])
    request = document["components"]["schemas"]["InteractRequest"]
    assert {
        "url",
        "dom",
        "query",
        "taskId",
        "sessionId",
        "clientObservations",
        "requestId",
        "stepIndex",
    } <= set(request["properties"])
    assert set(request["required"]) == {"url", "dom"}
    response = document["components"]["schemas"]["InteractResponse"]["properties"]
    assert {"taskId", "stepIndex", "action", "thought", "status", "verification"} <= set(response)
    assert {"APIKeyHeader", "HTTPBearer"} <= set(document["components"]["securitySchemes"])
