"""What this service can do, said plainly: ``GET /healthz`` (the database, the model, the plan-shell
policy), and the answer to a step when no model is configured (503 with ``code: "no_model"`` and
no Retry-After: waiting does not help, the operator has to configure one)."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import Field

from veriloop.context import Context
from veriloop.llm.endpoint import describe_model, model_configured
from veriloop.schemas.api import ErrorBody
from veriloop.schemas.base import WireModel
from veriloop.schemas.manifest import PlanShell

NO_MODEL_CODE = "no_model"
NO_MODEL_HELP = (
    "this service has no model (set OPENAI_API_KEY or OPENAI_BASE_URL where it runs, or start "
    "it with veriloop serve --scripted for canned answers)"
)


class ModelStatus(WireModel):
    """The model the service's steps call."""

    name: str = Field(description="The model name sent with every call.")
    endpoint: str = Field(description="openai, openai-compatible or scripted.")
    base_url: str | None = Field(default=None, description="The server's URL (None: OpenAI's).")
    scripted: bool = Field(description="Canned answers from a loopback playbook, not a model.")
    configured: bool = Field(
        description="A provider is configured (OPENAI_API_KEY or OPENAI_BASE_URL); false: every "
        "step that needs a model is refused."
    )


class Health(WireModel):
    """GET /healthz."""

    status: str = "ok"
    database: str = Field(description="sqlite or postgresql.")
    model: ModelStatus
    plan_shell: PlanShell = Field(description="Whether plan runs may start processes.")


def model_status(context: Context | None = None) -> ModelStatus:
    """The service's model as the environment configures it (no call is made)."""
    endpoint = describe_model(context)
    return ModelStatus(
        name=endpoint.model,
        endpoint=endpoint.endpoint,
        base_url=endpoint.base_url,
        scripted=endpoint.scripted,
        configured=model_configured(),
    )


def no_model_answer() -> JSONResponse | None:
    """The answer to a step that needed the model when none is configured (None: one is)."""
    if model_configured():
        return None
    body = ErrorBody(detail=NO_MODEL_HELP, code=NO_MODEL_CODE).to_wire()
    return JSONResponse(body, 503)


async def health(request: Request) -> Health:
    """Liveness plus a round trip to the task index; the model and the plan-shell policy."""
    settings = request.app.state.settings
    await request.app.state.service.index.store.aget(("veriloop", "health"), "ping")
    return Health(
        database="postgresql" if settings.is_postgres else "sqlite",
        model=model_status(),
        plan_shell=settings.plan_shell,
    )
