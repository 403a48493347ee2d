"""The console's pages: plan runs, reviews, a new run, browser tasks (``veriloop serve`` at ``/``).

Every page is rendered on the server. With API keys configured, a browser's first request has no
key: the page asks for one, keeps it in ``sessionStorage`` and asks again for the page's main
part with the key in ``X-API-Key`` (``X-Console: main``); a client that sends the key gets the
whole page at once. Either way a tenant sees only its own runs and tasks. Live updates come from
the run's event stream (``static/console.js``). Every page carries a Content-Security-Policy that
allows no inline script and nothing from another origin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from veriloop.schemas.api import PlanRunRequest
from veriloop.server.availability import model_status
from veriloop.server.pages.render import render, review_views, run_view, task_steps
from veriloop.server.plans import Offset
from veriloop.server.service import ServiceError
from veriloop.server.tenants import current_tenant, request_api_key, tenant_for

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""No inline script or style, nothing from another origin, never framed."""
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
FRAGMENT_HEADER = "x-console"
"""``X-Console: main`` asks for the page's main part only (the script's requests)."""
REVIEW_RUNS = 50
"""Runs waiting for a person read by the reviews page."""
PAGE_SIZE = 20

router = APIRouter(include_in_schema=False)


def mount(app: FastAPI) -> None:
    """Add the console's pages, their key prompt and the static files to ``app``."""
    static = Path(__file__).parent / "static"
    app.include_router(router)
    app.mount("/static", CspStatic(directory=static), name="console-static")

    @app.exception_handler(PageError)
    async def page_error(request: Request, exc: PageError) -> HTMLResponse:
        error = exc.error
        html = render(
            "error.html",
            title=f"{error.status_code}",
            nav="",
            fragment=request.headers.get(FRAGMENT_HEADER) == "main",
            needs_key=False,
            detail=error.detail,
        )
        return HTMLResponse(html, error.status_code, headers=PAGE_HEADERS)

    @app.exception_handler(KeyNeeded)
    async def ask_for_key(request: Request, exc: KeyNeeded) -> HTMLResponse:
        html = render("key.html", title="API key", nav="", fragment=False, needs_key=True)
        return HTMLResponse(html, headers=PAGE_HEADERS)


class PageError(Exception):
    """A page's answer was an error (an unknown run or task, another tenant's): shown as a page."""

    def __init__(self, error: ServiceError) -> None:
        super().__init__(error.detail)
        self.error = error


class KeyNeeded(Exception):
    """A browser opened a page without a key: answer with the page that asks for one."""


class CspStatic(StaticFiles):
    """The console's script and stylesheet, with the pages' security headers."""

    async def get_response(self, path: str, scope):  # noqa: ANN001 (Starlette's signature)
        response = await super().get_response(path, scope)
        response.headers.update(PAGE_HEADERS)
        response.headers["Cache-Control"] = "no-cache"
        return response


def _page(request: Request, template: str, title: str, nav: str, **context: Any) -> HTMLResponse:
    fragment = request.headers.get(FRAGMENT_HEADER) == "main"
    html = render(
        template,
        title=title,
        nav=nav,
        fragment=fragment,
        needs_key=False,
        service_model=model_status(),
        **context,
    )
    # The script swaps only the main part in: it sets the page's title and current nav link
    # from these (with API keys on, the page it swaps into was the key prompt).
    place = {"X-Console-Title": quote(f"{title} · veriloop"), "X-Console-Nav": nav}
    return HTMLResponse(html, headers={**PAGE_HEADERS, **place})


def page_tenant(request: Request) -> str:
    """The caller's tenant. A page opened without a valid key asks for one (:class:`KeyNeeded`);
    a request for the main part with a missing or unknown key is 401 (the script asks again)."""
    keys = request.app.state.api_keys
    key = request_api_key(request)
    if keys and request.headers.get(FRAGMENT_HEADER) != "main" and keys.tenant(key or "") is None:
        raise KeyNeeded
    return tenant_for(keys, key)


PageTenant = Annotated[str, Depends(page_tenant)]


RUN_FILTERS = ("running", "awaiting_review", "completed", "failed", "rejected", "cancelled")
"""The statuses the runs page filters on (as a run's last execution ended)."""


@router.get("/", response_class=HTMLResponse)
async def runs_page(
    request: Request,
    tenant: PageTenant,
    offset: Offset = 0,
    q: Annotated[str, Query(max_length=200)] = "",
    status: Annotated[Literal["", *RUN_FILTERS], Query()] = "",  # type: ignore[valid-type]
) -> HTMLResponse:
    """The tenant's plan runs, optionally only one status and those whose goal or id has ``q``."""
    runs = await request.app.state.plans.list(
        tenant, limit=PAGE_SIZE, offset=offset, status=status or None, text=q.strip() or None
    )
    filters = urlencode({k: v for k, v in (("q", q), ("status", status)) if v})
    return _page(
        request,
        "runs.html",
        "Plan runs",
        "runs",
        runs=runs,
        q=q,
        status=status,
        statuses=RUN_FILTERS,
        filters=f"&{filters}" if filters else "",
    )


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(request: Request, tenant: PageTenant, run_id: str) -> HTMLResponse:
    """One run: the picture, steps, attempts, checks, reviews; live while it executes."""
    try:
        detail = await request.app.state.plans.detail(tenant, run_id)
    except ServiceError as exc:
        raise PageError(exc) from exc
    view = run_view(
        detail,
        scripted=model_status().scripted,
        executing=detail.executing,
        error=detail.error,
        forms=True,
    )
    return _page(request, "run.html", f"Plan run {run_id}", "runs", **view)


@router.get("/reviews", response_class=HTMLResponse)
async def reviews_page(request: Request, tenant: PageTenant) -> HTMLResponse:
    """Every human review and command approval the tenant's runs wait for."""
    reports = await request.app.state.plans.reports(
        tenant, status="awaiting_review", limit=REVIEW_RUNS
    )
    reviews = []
    for report in reports:
        reviews += review_views(report, start=len(reviews))
    return _page(request, "reviews.html", "Reviews", "reviews", reviews=reviews)


@router.get("/new", response_class=HTMLResponse)
async def new_run_page(request: Request, _tenant: PageTenant) -> HTMLResponse:
    """Paste or upload a manifest, see the parser's and the critic's findings, start it."""
    return _page(request, "new.html", "New run", "new")


@router.post("/new/check", response_class=HTMLResponse)
async def check_manifest_fragment(
    request: Request, body: PlanRunRequest, _tenant: Annotated[str, Depends(current_tenant)]
) -> HTMLResponse:
    """The findings of ``POST /api/plans/validate`` as the new-run page shows them."""
    check = await request.app.state.plans.check(body)
    html = render("_manifest_check.html", check=check, c=check.critique)
    return HTMLResponse(html, headers=PAGE_HEADERS)


@router.get("/tasks", response_class=HTMLResponse)
async def tasks_page(request: Request, tenant: PageTenant, offset: Offset = 0) -> HTMLResponse:
    """The tenant's browser tasks."""
    entries, more = await request.app.state.service.index.page(
        tenant, limit=PAGE_SIZE, offset=offset
    )
    return _page(
        request,
        "tasks.html",
        "Browser tasks",
        "tasks",
        tasks=[e.summary() for e in entries],
        offset=offset,
        limit=PAGE_SIZE,
        next_offset=offset + PAGE_SIZE if more else None,
    )


@router.get("/tasks/{task_id}", response_class=HTMLResponse)
async def task_page(request: Request, tenant: PageTenant, task_id: str) -> HTMLResponse:
    """One browser task: each action, its target, observations, verdict and usage."""
    try:
        detail = await request.app.state.service.task_detail(tenant, task_id)
    except ServiceError as exc:
        raise PageError(exc) from exc
    steps = task_steps(detail)
    return _page(request, "task.html", "Browser task", "tasks", task=detail, steps=steps)
