"""The FastAPI app: interact API, task recovery and detail, health, LangServe routes.

``create_app(settings)`` builds it; storage opens in the lifespan (schema
set-up on every start). Errors keep one shape, ``{"detail": "..."}`` (plus
``taskId``/``status`` when they matter); 422 keeps FastAPI's list of field
errors and adds a one-line ``message``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import partial
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from langgraph.graph.state import CompiledStateGraph
from sse_starlette import EventSourceResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from veriloop.context import Context
from veriloop.graph.builder import build_graph
from veriloop.llm.base import LLMUnavailable
from veriloop.llm.endpoint import model_configured
from veriloop.page_processes import shutdown_page_processes
from veriloop.plans import RunFiles
from veriloop.schemas.api import (
    ErrorBody,
    InteractRequest,
    InteractResponse,
    TaskDetail,
    TaskList,
    TaskSummary,
)
from veriloop.schemas.text import parse_json_body
from veriloop.server.availability import Health, health, no_model_answer
from veriloop.server.cancel import router as cancel_router
from veriloop.server.index import TaskIndex
from veriloop.server.langserve_routes import add_agent_routes
from veriloop.server.locks import LockLost, TaskBusy
from veriloop.server.pages.routes import mount as mount_console
from veriloop.server.persistence import DATABASE_UNAVAILABLE, open_persistence
from veriloop.server.plans import Limit, Offset, PlanService
from veriloop.server.plans import router as plans_router
from veriloop.server.service import InvalidField, ServiceError, TaskService
from veriloop.server.settings import Settings
from veriloop.server.tenants import current_tenant, warn_if_open

Tenant = Annotated[str, Depends(current_tenant)]

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorBody,
        "description": "The body could not be read: not UTF-8, or JSON nested too deep.",
    },
    401: {"model": ErrorBody, "description": "Missing or unknown API key."},
    404: {"model": ErrorBody, "description": "Unknown task (or another tenant's)."},
    409: {
        "model": ErrorBody,
        "description": "Task already completed/failed, stale stepIndex, or busy past the wait.",
    },
    413: {"model": ErrorBody, "description": "DOM (or body) over the size limit."},
    500: {
        "model": ErrorBody,
        "description": "The step failed unexpectedly; the task is unchanged: send the same request again.",
    },
    503: {
        "model": ErrorBody,
        "description": "Model provider down or past the step deadline, the database unreachable, or "
        "the task's lock lost mid-step; "
        "the task is unchanged: send the same request again after Retry-After.",
    },
}


def compile_graph(checkpointer) -> CompiledStateGraph:
    """The agent graph with the service's checkpointer (thread id = task id)."""
    return build_graph().compile(checkpointer=checkpointer, name="veriloop")


def create_app(settings: Settings | None = None) -> FastAPI:
    """The veriloop HTTP service for ``settings`` (default: ``Settings.from_env()``)."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warn_if_open(settings.api_keys)
        async with open_persistence(settings) as persistence:
            graph = compile_graph(persistence.checkpointer)
            index = TaskIndex(persistence.store)
            app.state.service = TaskService(
                graph,
                index,
                persistence.locks,
                max_dom_bytes=settings.max_dom_bytes,
                step_deadline_s=settings.step_deadline_s,
                context=partial(Context, page_processes=settings.page_processes),
            )
            # Plan runs: the plan graph on the same checkpointer, store and locks; tools and
            # workspace from the environment (VERILOOP_TOOLS=module:attr, VERILOOP_WORKSPACE).
            app.state.plans = PlanService(
                persistence.checkpointer,
                persistence.store,
                persistence.locks,
                context=settings.plan_context(),
                max_manifest_bytes=settings.max_dom_bytes,
                plan_shell=settings.plan_shell,
                manifest_limits=settings.manifest_limits,
                model_ready=model_configured(),
                files=RunFiles(
                    keep=settings.keep_workspaces,
                    snapshot_run_bytes=settings.snapshot_run_bytes,
                    snapshot_total_bytes=settings.snapshot_total_bytes,
                ),
            )
            try:
                yield
            finally:
                await app.state.plans.aclose()  # executing runs stop here and stay resumable
                shutdown_page_processes()

    app = FastAPI(
        title="veriloop",
        version="0.1.0",
        summary="A browser agent that verifies every action: send the page, get the next action.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.api_keys = settings.api_keys
    app.router.route_class = PageBodyRoute
    _add_routes(app)
    app.include_router(plans_router)
    app.include_router(cancel_router)
    mount_console(app)  # the web console at /
    _add_error_handlers(app, settings)
    add_agent_routes(app)
    # Refuse absurd bodies before parsing them; JSON escaping can inflate a DOM several times over.
    app.add_middleware(BodyLimit, limit=4 * settings.max_dom_bytes + 1_000_000)
    app.add_middleware(
        CORSMiddleware,
        allow_origin_regex=extension_origins(settings.extension_ids),
        allow_methods=["GET", "POST"],
        allow_headers=["Authorization", "Content-Type", "X-API-Key"],
        max_age=600,
    )
    return app


def extension_origins(extension_ids: tuple[str, ...]) -> str:
    """The origins CORS accepts: the pages of the given Chrome extensions (any extension when none
    is given), never a web page's. An extension id is 32 letters a-p."""
    for extension_id in extension_ids:
        if not re.fullmatch("[a-p]{32}", extension_id):
            raise ValueError(
                f"VERILOOP_EXTENSION_IDS: {extension_id!r} is not a Chrome extension id"
            )
    ids = "|".join(extension_ids) or "[a-p]{32}"
    return f"chrome-extension://({ids})"


class PageBodyRequest(Request):
    """A request whose JSON body :func:`~veriloop.schemas.text.parse_json_body` reads."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json_body(await self.body())
        return self._json


class PageBodyRoute(APIRoute):
    """A route that reads its JSON body as a :class:`PageBodyRequest` (FastAPI's custom route
    class): a page snapshot's body usually needs no cleaning, and the Rust parser reads it in
    about a third of ``json.loads``'s time."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(PageBodyRequest(request.scope, request.receive))

        return route


def service(request: Request) -> TaskService:
    """The app's TaskService (set up in the lifespan)."""
    return request.app.state.service


def _add_routes(app: FastAPI) -> None:
    @app.post(
        "/api/agent/interact",
        response_model=InteractResponse,
        response_model_exclude_none=True,
        responses=ERRORS,
        tags=["agent"],
    )
    async def interact(body: InteractRequest, tenant: Tenant, request: Request) -> InteractResponse:
        """Send one page snapshot; get the next action. No taskId starts a task; with one, the previous action is verified first."""
        return await service(request).interact(tenant, body)

    @app.get(
        "/api/session/{session_id}/task/active",
        response_model=TaskSummary,
        response_model_exclude_none=True,
        responses=ERRORS,
        tags=["tasks"],
    )
    async def active_task(
        session_id: str,
        tenant: Tenant,
        request: Request,
        url: Annotated[
            str | None, Query(description="The tab's current URL: only tasks on the same origin.")
        ] = None,
    ) -> TaskSummary:
        """The session's most recent executing task, for a client that lost its taskId (404: start fresh)."""
        return await service(request).active_task(tenant, session_id, url)

    @app.get(
        "/api/tasks",
        response_model=TaskList,
        response_model_exclude_none=True,
        responses=ERRORS,
        tags=["tasks"],
    )
    async def list_tasks(
        tenant: Tenant,
        request: Request,
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> TaskList:
        """The tenant's browser tasks, most recently updated first (goal, URL, status, steps)."""
        entries, more = await service(request).index.page(tenant, limit=limit, offset=offset)
        return TaskList(
            items=[e.summary() for e in entries],
            offset=offset,
            limit=limit,
            next_offset=offset + limit if more else None,
        )

    @app.get(
        "/api/tasks/{task_id}",
        response_model=TaskDetail,
        response_model_exclude_none=True,
        responses=ERRORS,
        tags=["tasks"],
    )
    async def task_detail(task_id: str, tenant: Tenant, request: Request) -> TaskDetail:
        """Status, plan, action history with before-state summaries, verification history, usage and cost."""
        return await service(request).task_detail(tenant, task_id)

    @app.get(
        "/api/tasks/{task_id}/events",
        responses={
            **ERRORS,
            200: {
                "description": "Server-Sent Events: `step` (stepIndex, status) now and at each "
                "recorded step or cancel, then `end` with the task's status.",
                "content": {"text/event-stream": {}},
            },
        },
        tags=["tasks"],
    )
    async def task_events(task_id: str, tenant: Tenant, request: Request) -> EventSourceResponse:
        """The task's progress as Server-Sent Events, ending when it stops executing."""
        events = await service(request).task_events(tenant, task_id)

        async def stream() -> AsyncIterator[dict[str, str]]:
            async for event in events:
                yield {"event": event["event"], "data": json.dumps(event)}

        return EventSourceResponse(stream())

    app.add_api_route("/healthz", health, methods=["GET"], response_model=Health, tags=["health"])


def _add_error_handlers(app: FastAPI, settings: Settings) -> None:
    retry_after = {"Retry-After": str(settings.retry_after_s)}

    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> JSONResponse:
        if isinstance(exc, InvalidField):
            errors = [{"loc": ["body", exc.field], "msg": exc.message, "type": "value_error"}]
            return JSONResponse({"detail": errors, "message": str(exc)}, 422)
        headers = retry_after if exc.status_code == 503 else None
        return JSONResponse(
            ErrorBody(detail=exc.detail, **exc.extra).to_wire(), exc.status_code, headers
        )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Keep loc/msg/type; never echo the input back (it can be a 5 MB DOM).
        errors = [{k: e[k] for k in ("loc", "msg", "type") if k in e} for e in exc.errors()]
        message = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in errors
        )
        return JSONResponse({"detail": errors, "message": message or "invalid request"}, 422)

    @app.exception_handler(LLMUnavailable)
    async def provider_down(_: Request, exc: LLMUnavailable) -> JSONResponse:
        if (no_model := no_model_answer()) is not None:
            return no_model
        detail = f"model provider unavailable ({exc}); the task is unchanged: send the same request again"
        return JSONResponse(ErrorBody(detail=detail).to_wire(), 503, retry_after)

    @app.exception_handler(TaskBusy)
    async def task_busy(_: Request, exc: TaskBusy) -> JSONResponse:
        detail = f"another request for this task ran longer than {settings.lock_timeout_s:g} s; send it again"
        return JSONResponse(ErrorBody(detail=detail).to_wire(), 409, {"Retry-After": "1"})

    @app.exception_handler(LockLost)
    async def lock_lost(_: Request, exc: LockLost) -> JSONResponse:
        detail = (
            "the database connection holding this task's lock was lost, so the step was stopped; "
            "the task is unchanged: send the same request again"
        )
        return JSONResponse(ErrorBody(detail=detail).to_wire(), 503, retry_after)

    async def database_unavailable(_: Request, exc: Exception) -> JSONResponse:
        detail = f"database unavailable ({type(exc).__name__}: {str(exc)[:200]}); the task is unchanged: send the same request again"
        return JSONResponse(ErrorBody(detail=detail).to_wire(), 503, retry_after)

    for fault in DATABASE_UNAVAILABLE:  # PoolTimeout included
        app.add_exception_handler(fault, database_unavailable)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        # Still a JSON body for a bug outside a step (a step's own failure is StepFailed);
        # Starlette logs the traceback after sending this.
        detail = f"internal error ({type(exc).__name__}); the server log has the details"
        return JSONResponse(ErrorBody(detail=detail).to_wire(), 500)


class BodyTooLarge(HTTPException):
    """The body passed the limit while it was being read (chunked, or longer than its Content-Length)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body is over the limit of {limit} bytes")


class BodyLimit:
    """413 for a request body over ``limit`` bytes, whether or not it says its length up front.

    A Content-Length over the limit is refused before anything is read. Otherwise the
    bytes are counted as they arrive (chunked transfer encoding has no length), and the
    read that passes the limit raises :class:`BodyTooLarge`, so at most ``limit`` bytes
    are ever held. The DOM's own limit is checked after parsing.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"0")
        if length.isdigit() and int(length) > self.limit:
            detail = f"request body is {int(length)} bytes; the limit is {self.limit} bytes"
            await JSONResponse(ErrorBody(detail=detail).to_wire(), 413)(scope, receive, send)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge as exc:  # read outside a route (routes answer it as an HTTPException)
            if started:
                raise
            body = ErrorBody(detail=exc.detail).to_wire()
            await JSONResponse(body, 413, {"Connection": "close"})(scope, receive, send)
