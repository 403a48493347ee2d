"""LangServe at ``/agent``: a typed wrapper around the interact service, so ``RemoteRunnable`` drives a task.

The wrapper's input is an InteractRequest and its output an InteractResponse
(camelCase dict). The task (thread) id comes from the input's ``taskId``,
never from the request config, which LangServe filters; the tenant comes from
the request's API key through ``per_req_config_modifier``.

Two things are settled before LangServe sees a request (:func:`_before_langserve`):
a ``config`` that is not an object (LangServe answers ``null`` with a 500) is a
422, and a streaming endpoint runs its step first, so a 404, 409, 422 or 503
is an ordinary HTTP answer instead of an ``error`` event reporting 500 in a
stream that then breaks off; the stream then carries the answer.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langserve import add_routes
from pydantic import ValidationError

from veriloop.schemas.api import InteractRequest, InteractResponse
from veriloop.server.tenants import current_tenant, request_api_key, tenant_for

TENANT_KEY = "veriloop_tenant"
"""Where the authenticated tenant travels in the runnable's config (set by the server only)."""
ANSWER_KEY = "veriloop_answer"
"""Where a streaming request's answer, computed before LangServe runs, travels to the runnable."""
STREAMING = ("/stream", "/stream_log", "/stream_events")


def agent_runnable(app: FastAPI) -> Runnable:
    """One interact step as a runnable: InteractRequest in, InteractResponse (wire dict) out."""

    async def step(request: Any, config: RunnableConfig) -> dict[str, Any]:
        if ANSWER_KEY in config["configurable"]:
            return config["configurable"][ANSWER_KEY]
        body = request if isinstance(request, dict) else dict(request)
        interact = InteractRequest.model_validate(body)
        response = await app.state.service.interact(config["configurable"][TENANT_KEY], interact)
        return response.to_wire()

    return RunnableLambda(step, name="veriloop_step").with_types(
        input_type=InteractRequest, output_type=InteractResponse
    )


async def _with_tenant(config: dict[str, Any], request: Request) -> dict[str, Any]:
    tenant = tenant_for(request.app.state.api_keys, request_api_key(request))
    ours = {TENANT_KEY: tenant}
    if (answer := getattr(request.state, ANSWER_KEY, None)) is not None:
        ours[ANSWER_KEY] = answer
    return {**config, "configurable": {**config.get("configurable", {}), **ours}}


async def _before_langserve(
    request: Request, tenant: Annotated[str, Depends(current_tenant)]
) -> None:
    """Validate ``config`` and run a streaming request's step, before LangServe's handler runs."""
    try:
        body = await request.json()  # cached on the request: LangServe reads the same body
    except (
        UnicodeDecodeError
    ) as exc:  # LangServe would fail on it with a 500 (found by the fuzz run)
        raise HTTPException(400, "the body is not UTF-8") from exc
    except ValueError:
        return  # LangServe answers a body that is not JSON with 422
    if not isinstance(body, dict):
        return
    config = body.get("config", {})
    batch = request.url.path.endswith("/batch")
    if not (isinstance(config, dict) or (batch and isinstance(config, list))):
        raise RequestValidationError(
            [{"loc": ("body", "config"), "msg": "config must be an object", "type": "dict_type"}]
        )
    if batch and not isinstance(body.get("inputs"), list):  # LangServe takes len() of it
        raise RequestValidationError(
            [{"loc": ("body", "inputs"), "msg": "inputs must be a list", "type": "list_type"}]
        )
    if request.url.path.endswith(STREAMING):
        try:
            interact = InteractRequest.model_validate(body.get("input"))
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("body", "input", *e["loc"])} for e in exc.errors()]
            ) from exc
        answer = await request.app.state.service.interact(tenant, interact)
        setattr(request.state, ANSWER_KEY, answer.to_wire())


def add_agent_routes(app: FastAPI) -> None:
    """``/agent/invoke``, ``/agent/batch``, ``/agent/stream``, ``/agent/playground/`` ... behind the API key."""
    add_routes(
        app,
        agent_runnable(app),
        path="/agent",
        dependencies=[Depends(_before_langserve)],
        per_req_config_modifier=_with_tenant,
    )
