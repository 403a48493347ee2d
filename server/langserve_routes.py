"""LangServe at ``/agent``: a typed wrapper around the interact service, so ``RemoteRunnable`` drives a task.

The wrapper's input is an InteractRequest and its output an InteractResponse
(camelCase dict). The task (thread) id comes from the input's ``taskId``,
never from the request config, which LangServe filters; the tenant comes from
the request's API key through ``per_req_config_modifier``.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, Request
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langserve import add_routes

from veriloop.schemas.api import InteractRequest, InteractResponse
from veriloop.server.tenants import current_tenant, request_api_key, tenant_for

TENANT_KEY = "veriloop_tenant"
"""Where the authenticated tenant travels in the runnable's config (set by the server only)."""


def agent_runnable(app: FastAPI) -> Runnable:
    """One interact step as a runnable: InteractRequest in, InteractResponse (wire dict) out."""

    async def step(request: Any, config: RunnableConfig) -> dict[str, Any]:
        body = request if isinstance(request, dict) else dict(request)
        interact = InteractRequest.model_validate(body)
        response = await app.state.service.interact(config["configurable"][TENANT_KEY], interact)
        return response.to_wire()

    return RunnableLambda(step, name="veriloop_step").with_types(
        input_type=InteractRequest, output_type=InteractResponse
    )


async def _with_tenant(config: dict[str, Any], request: Request) -> dict[str, Any]:
    tenant = tenant_for(request.app.state.api_keys, request_api_key(request))
    return {**config, "configurable": {**config.get("configurable", {}), TENANT_KEY: tenant}}


def add_agent_routes(app: FastAPI) -> None:
    """``/agent/invoke``, ``/agent/batch``, ``/agent/stream``, ``/agent/playground/`` ... behind the API key."""
    add_routes(
        app,
        agent_runnable(app),
        path="/agent",
        dependencies=[Depends(current_tenant)],
        per_req_config_modifier=_with_tenant,
    )
