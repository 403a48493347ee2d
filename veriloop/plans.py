"""Running plans of tool-using steps from Python.

    report = run_plan("plan.yaml", tools=[search, summarize], context=PlanContext(workspace="proj"))
    report.status                      # "completed" only when every step's checks passed
    report.steps["build"].attempts     # every attempt with its run number and per-check results

    runner = PlanRunner(checkpointer=AsyncSqliteSaver(...))      # durable: resumable after a crash
    report = await runner.arun(manifest, run_id="nightly-42", on_event=print)
    if report.status == "awaiting_review":
        report = await runner.aresume("nightly-42", {"review": {"approved": True}})

Each run is one thread (``thread_id`` = run id) of the plan graph in the checkpointer, with
``durability="sync"``: every finished step and every attempt is saved before the next starts,
so ``aresume(run_id)`` after a crash continues without re-running finished steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from veriloop.context import PlanContext
from veriloop.engines.plan.confinement.limits import timeout_refusals
from veriloop.engines.plan.critic import static_review
from veriloop.engines.plan.judge.snapshot import (
    DEFAULT_SNAPSHOT_RUN_BYTES,
    DEFAULT_SNAPSHOT_TOTAL_BYTES,
    StoreScope,
    store_scope,
)
from veriloop.engines.plan.leftovers import remove_tree
from veriloop.engines.plan.manifest import (
    ManifestError,
    ManifestLimits,
    load_manifest,
    load_yaml,
    looks_like_manifest,
    read_manifest_data,
)
from veriloop.engines.plan.planning import rejection_critique
from veriloop.graph.plan import build_plan_graph
from veriloop.graph.plan_io import cancelled_update, state_to_report
from veriloop.nodes.plan.support import tool_registry
from veriloop.schemas.api import ManifestCheck
from veriloop.schemas.manifest import Manifest
from veriloop.schemas.plan_run import (
    FINISHED_STATUSES,
    CriticFinding,
    PendingReview,
    PlanRunReport,
    ReviewDecision,
)

EventHandler = Callable[[dict[str, Any]], Any | Awaitable[Any]]
"""Called with every progress event (``{"event": "attempt_started", "step_id": ...}``)."""


class UnknownRunError(LookupError):
    """No plan run with this id exists in the checkpointer."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"unknown plan run {run_id!r}")
        self.run_id = run_id


class NoPendingReviewError(ValueError):
    """A review answer for a run (or a step) that is not waiting for one."""


@dataclass(frozen=True)
class RunFiles:
    """What becomes of each run's own folder and snapshot store (``workspace_per_run``)."""

    keep: bool = True
    """Both stay when the run finishes; False: removed then (a run waiting for a review, or
    stopped early, keeps them to resume)."""
    snapshot_run_bytes: int = DEFAULT_SNAPSHOT_RUN_BYTES
    """Most bytes of pre-step copies the run may store; past it the step fails."""
    snapshot_total_bytes: int = DEFAULT_SNAPSHOT_TOTAL_BYTES
    """Most bytes of pre-step copies every run under the same base may store together."""


class PlanRunner:
    """The compiled plan graph with a checkpointer, a context and tools."""

    def __init__(
        self,
        checkpointer: BaseCheckpointSaver | None = None,
        context: PlanContext | None = None,
        tools: Any = None,
        *,
        workspace_per_run: bool = False,
        run_files: RunFiles = RunFiles(),
    ) -> None:
        """``workspace_per_run``: each run works in its own folder under the context's workspace
        (:func:`run_workspace`, mode 0700), so runs never read or change each other's files (the
        service), and keeps its pre-step copies in a store of its own beside it
        (:func:`run_snapshot_store`); ``run_files`` caps that store and says whether both stay
        once the run finishes."""
        self.checkpointer = checkpointer if checkpointer is not None else InMemorySaver()
        context = context or PlanContext()
        self.context = dataclasses.replace(context, tools=tools) if tools is not None else context
        self.workspace_per_run = workspace_per_run
        self.run_files = run_files
        self.graph: CompiledStateGraph = build_plan_graph().compile(
            checkpointer=self.checkpointer, name="plan"
        )

    # -- async ----------------------------------------------------------------------------------

    async def arun(
        self,
        manifest_or_goal: str | Path | Mapping[str, Any] | Manifest | None = None,
        *,
        manifest: str | Path | Mapping[str, Any] | Manifest | None = None,
        goal: str | None = None,
        run_id: str | None = None,
        concurrency: int = 4,
        on_event: EventHandler | None = None,
        thread_id: str | None = None,
    ) -> PlanRunReport:
        """Run a manifest (a file, YAML/JSON text, a mapping, a Manifest) or a goal to its end or
        to its first human review.

        ``manifest_or_goal`` guesses which one a string is (see :func:`plan_input`); say it with
        ``manifest=`` or ``goal=`` (alone: the meta-planner writes the manifest) to leave no doubt.
        ``thread_id``: the run's thread in the checkpointer (default: the run id; the service
        keeps each tenant's runs apart this way).
        """
        run_id = run_id or uuid.uuid4().hex
        thread_id = thread_id or run_id
        if await self._values(thread_id):
            raise ValueError(f"plan run {run_id!r} exists already: use aresume() to continue it")
        graph_input = {"run_id": run_id, "depth": 1, **run_input(manifest_or_goal, manifest, goal)}
        await self._stream(graph_input, thread_id, concurrency, on_event)
        return await self._ended(thread_id)

    async def aresume(
        self,
        run_id: str,
        decisions: Mapping[str, ReviewDecision | Mapping[str, Any]] | None = None,
        *,
        concurrency: int = 4,
        on_event: EventHandler | None = None,
    ) -> PlanRunReport:
        """Answer pending reviews (step id -> ``{"approved": bool, "comment": str}``), or, with no
        decisions, continue a run that stopped (a crash, a provider outage) where it was.
        ``run_id`` is the run's thread id when it was started with one."""
        report = await self.areport(run_id)
        if decisions:
            pending = {review.step_id: review for review in report.pending_reviews}
            unknown = sorted(set(decisions) - set(pending))
            if unknown:
                waiting = ", ".join(sorted(pending)) or "none"
                raise NoPendingReviewError(
                    f"run {run_id!r} has no pending review for {', '.join(unknown)} (waiting: {waiting})"
                )
            answers = {
                pending[step_id].interrupt_id: ReviewDecision.model_validate(
                    decision, from_attributes=True
                ).model_dump()
                for step_id, decision in decisions.items()
            }
            await self._stream(Command(resume=answers), run_id, concurrency, on_event)
        elif report.status in ("running", "awaiting_review") and not report.pending_reviews:
            await self._stream(None, run_id, concurrency, on_event)
        return await self._ended(run_id)

    async def acancel(self, run_id: str, reason: str = "cancelled") -> PlanRunReport:
        """End a run that is not executing as ``cancelled`` (its unfinished steps too): the update is
        written as the run's last node, so nothing is left to resume. Stop its execution first."""
        report = await self.areport(run_id)
        await self.graph.aupdate_state(
            _config(run_id), cancelled_update(report, reason), as_node="finalize"
        )
        return await self.areport(run_id)

    async def areport(self, run_id: str) -> PlanRunReport:
        """The run as the checkpointer holds it (``run_id``: its thread id, when it has its own)."""
        snapshot = await self.graph.aget_state(_config(run_id), subgraphs=True)
        if not snapshot.values:
            raise UnknownRunError(run_id)
        return state_to_report(
            snapshot.values,
            pending_reviews=pending_reviews(snapshot),
            in_flight=steps_in_flight(snapshot),
        )

    # -- sync twins -----------------------------------------------------------------------------

    def run(self, manifest_or_goal=None, **kwargs) -> PlanRunReport:
        """:meth:`arun` for code that is not async (not from inside a running event loop)."""
        return _sync(self.arun(manifest_or_goal, **kwargs))

    def resume(self, run_id: str, decisions=None, **kwargs) -> PlanRunReport:
        """:meth:`aresume` for code that is not async."""
        return _sync(self.aresume(run_id, decisions, **kwargs))

    def report(self, run_id: str) -> PlanRunReport:
        """:meth:`areport` for code that is not async."""
        return _sync(self.areport(run_id))

    # -- internals ------------------------------------------------------------------------------

    async def _values(self, run_id: str) -> dict[str, Any]:
        return (await self.graph.aget_state(_config(run_id))).values

    async def _stream(
        self, graph_input: Any, run_id: str, concurrency: int, on_event: EventHandler | None
    ) -> None:
        config = {**_config(run_id), "max_concurrency": max(1, int(concurrency))}
        context = self.context
        with contextlib.ExitStack() as scope:
            if self.workspace_per_run:
                folder = run_workspace(context.workspace, run_id)
                store = run_snapshot_store(folder.parent.parent, run_id)
                await asyncio.to_thread(private_folders, folder.parent, folder, store.parent)
                context = dataclasses.replace(
                    context, workspace=str(folder), private_root=str(folder.parent.parent)
                )
                # Every node's task and thread inherits this: the run's pre-step copies go there.
                files = self.run_files
                scope.enter_context(
                    store_scope(
                        StoreScope(store, files.snapshot_run_bytes, files.snapshot_total_bytes)
                    )
                )
            async for _namespace, event in self.graph.astream(
                graph_input,
                config,
                context=context,
                stream_mode="custom",
                subgraphs=True,
                durability="sync",
            ):
                if on_event is not None:
                    outcome = on_event(event)
                    if asyncio.iscoroutine(outcome):
                        await outcome

    async def _ended(self, run_id: str) -> PlanRunReport:
        """The run's report once an execution stopped; a finished run's own folder and snapshot
        store removed unless they are kept."""
        report = await self.areport(run_id)
        finished = report.status in FINISHED_STATUSES
        if self.workspace_per_run and not self.run_files.keep and finished:
            base = self.context.workspace
            for folder in (run_workspace(base, run_id), run_snapshot_store(base, run_id)):
                await asyncio.to_thread(remove_tree, folder)
        return report


def run_workspace(base: str | Path, thread_id: str) -> Path:
    """A run's own folder under ``base``: ``runs/<thread id>``, the id made safe for a path and
    kept unique by a short hash of it (the same folder every time the run resumes)."""
    return Path(base).resolve() / "runs" / _run_folder_name(thread_id)


def run_snapshot_store(base: str | Path, thread_id: str) -> Path:
    """A run's own snapshot store under ``base``: ``snapshots/<thread id>`` (out of every step's
    sight, like the other runs' folders)."""
    return Path(base).resolve() / "snapshots" / _run_folder_name(thread_id)


def _run_folder_name(thread_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", thread_id)[:80]
    digest = hashlib.sha256(thread_id.encode()).hexdigest()[:10]
    return f"{safe}-{digest}"


def private_folders(*folders: Path) -> None:
    """Create each of ``folders`` mode 0700 (parents as needed), or make an existing one 0700."""
    for folder in folders:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)


async def arun_plan(
    manifest_or_goal: str | Path | Mapping[str, Any] | Manifest | None = None,
    *,
    tools: Any = None,
    context: PlanContext | None = None,
    checkpointer: BaseCheckpointSaver | None = None,
    **kwargs: Any,
) -> PlanRunReport:
    """Run a manifest or a goal once (see :class:`PlanRunner` to resume or answer reviews)."""
    runner = PlanRunner(checkpointer=checkpointer, context=context, tools=tools)
    return await runner.arun(manifest_or_goal, **kwargs)


def run_plan(
    manifest_or_goal: str | Path | Mapping[str, Any] | Manifest | None = None,
    *,
    tools: Any = None,
    context: PlanContext | None = None,
    checkpointer: BaseCheckpointSaver | None = None,
    **kwargs: Any,
) -> PlanRunReport:
    """Sync :func:`arun_plan`."""
    return _sync(
        arun_plan(
            manifest_or_goal, tools=tools, context=context, checkpointer=checkpointer, **kwargs
        )
    )


def run_input(
    manifest_or_goal: Any = None, manifest: Any = None, goal: str | None = None
) -> dict[str, Any]:
    """The graph input from :meth:`PlanRunner.arun`'s arguments (exactly one way to name the plan)."""
    if (manifest_or_goal is None) == (manifest is None and goal is None) or (
        manifest_or_goal is not None and manifest is not None
    ):
        raise ValueError("give a manifest or a goal: one positional argument, or manifest=/goal=")
    if manifest_or_goal is not None:
        return plan_input(manifest_or_goal, goal)
    if manifest is None:
        return {"goal": goal.strip()}
    return {**_manifest_input(manifest), **({"goal": goal} if goal else {})}


def plan_input(
    manifest_or_goal: str | Path | Mapping[str, Any] | Manifest, goal: str | None = None
) -> dict[str, Any]:
    """The graph input: ``manifest`` for a manifest (parsed by the plan node), else ``goal``.

    A str is a manifest file when it names an existing .yaml/.yml/.json file, manifest text when
    it is fenced or reads as YAML/JSON with steps (``steps``/``tasks``/``workflow``, or a list of
    steps); any other text is a goal.
    """
    if isinstance(manifest_or_goal, str) and _names_manifest_file(manifest_or_goal):
        manifest_or_goal = Path(manifest_or_goal)
    if isinstance(manifest_or_goal, str) and not _reads_as_manifest(manifest_or_goal):
        return {"goal": manifest_or_goal.strip()}
    return {**_manifest_input(manifest_or_goal), **({"goal": goal} if goal else {})}


def _manifest_input(manifest: str | Path | Mapping[str, Any] | Manifest) -> dict[str, Any]:
    """``{"manifest": ...}``: text and mappings as given (the plan node parses them), a file read.

    Raises :class:`~veriloop.engines.plan.manifest.ManifestError` for data past the reading limits.
    """
    if isinstance(manifest, Manifest):
        return {"manifest": manifest.model_dump(by_alias=False)}
    if isinstance(manifest, Path):
        return {"manifest": manifest.read_text(encoding="utf-8")}
    if isinstance(manifest, Mapping | list):
        # Data too deep or too large for the checkpointer's encoder: refused before the run exists.
        read_manifest_data(manifest)
    if isinstance(manifest, Mapping):
        return {"manifest": dict(manifest)}
    return {"manifest": manifest}


def check_manifest(manifest: str | Mapping[str, Any], context: PlanContext) -> ManifestCheck:
    """What the plan node's parser and the static critic say of a user's manifest, without
    running it: parse problems (located) as critical findings, or the critic's review."""
    tools = sorted(tool_registry(context))
    try:
        parsed = load_manifest(manifest, origin="user", tools=tools, max_depth=context.max_depth)
    except ManifestError as exc:
        return ManifestCheck(runnable=False, critique=rejection_critique(exc.problems))
    critique = static_review(parsed, tools=tools, max_depth=context.max_depth)
    over = timeout_refusals(parsed, context.max_timeout_s)
    if over:
        refusals = [CriticFinding(rule="max_timeout", severity="critical", message=m) for m in over]
        critique = critique.model_copy(update={"findings": [*critique.findings, *refusals]})
    return ManifestCheck(
        runnable=not critique.has_critical,
        critique=critique,
        steps=[step.id for step in parsed.steps],
    )


def pending_reviews(snapshot: Any) -> list[PendingReview]:
    """Every interrupt the run waits on (in its steps and nested plans), by step id."""
    found: dict[str, PendingReview] = {}

    def visit(state: Any) -> None:
        for item in getattr(state, "interrupts", ()) or ():
            _add(item)
        for task in getattr(state, "tasks", ()) or ():
            for item in task.interrupts:
                _add(item)
            if task.state is not None and not isinstance(task.state, dict):
                visit(task.state)

    def _add(item: Any) -> None:
        value = item.value if isinstance(item.value, dict) else {"question": str(item.value)}
        found.setdefault(
            item.id,
            PendingReview(
                step_id=str(value.get("step_id", "")),
                interrupt_id=item.id,
                question=str(value.get("question", "")),
                context={k: v for k, v in value.items() if k not in ("step_id", "question")},
            ),
        )

    visit(snapshot)
    return list(found.values())


def steps_in_flight(snapshot: Any) -> dict[str, dict[str, Any]]:
    """Results of the run's current batch that are not in the run's state yet, by step id: steps
    its lanes finished (a lane hands its results over when it ends), and each lane's current step
    as a bare result saying where it is: waiting for a person (``awaiting_review``), in its checks
    (``testing``) or executing (``running``)."""
    found: dict[str, dict[str, Any]] = {}
    for task in getattr(snapshot, "tasks", ()) or ():
        state = task.state if task.name == "run_step" and task.state is not None else None
        values = getattr(state, "values", None) or {}
        found.update(values.get("step_results") or {})
        step_id = (values.get("step") or {}).get("id")
        if step_id and step_id not in found:
            if task.interrupts:
                where = "awaiting_review"
            else:
                where = "testing" if "check" in (state.next or ()) else "running"
            found[step_id] = {"step_id": step_id, "status": where}
    return found


def _names_manifest_file(text: str) -> bool:
    path = Path(text.strip())
    return path.suffix.lower() in (".yaml", ".yml", ".json") and path.is_file()


def _reads_as_manifest(text: str) -> bool:
    stripped = text.strip()
    if stripped.startswith("```"):
        return True
    try:
        return looks_like_manifest(load_yaml(stripped, origin="manifest", limits=ManifestLimits()))
    except ManifestError:
        return True  # past the reading limits: the plan node rejects it, located
    except yaml.YAMLError:
        return False


def _config(run_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": run_id}}


def _sync(coroutine: Awaitable[Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise RuntimeError("called from a running event loop: await the async method instead")
