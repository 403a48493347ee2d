"""The meta-planner and the replanner: a manifest from a goal, and a repair for blocked steps.

Both answers are drafts that go through the same lenient parser and validation as a user's
manifest, with every step marked ``origin="model"`` (so model-written commands need approval).
A repair keeps every completed step and its result (skip-if-present) and redesigns only the
failed steps and what depends on them (seed 000's batch-end replan, seed 003's tail replan): one
call covers every step blocked in the batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from veriloop.engines.plan.critic import critique_of
from veriloop.engines.plan.manifest import (
    ManifestError,
    Problem,
    apply_repair,
    downstream_of,
    manifest_from_draft,
)
from veriloop.engines.step_diff import field_changes
from veriloop.llm.base import AsyncStructuredLLM, LLMOutputError
from veriloop.prompts.page_data import fenced
from veriloop.prompts.plan_planning import STEP_RESULTS, planner_messages, replanner_messages
from veriloop.schemas.manifest import Manifest, ManifestStep
from veriloop.schemas.plan_outputs import ManifestDraft, RepairDraft
from veriloop.schemas.plan_run import CriticFinding, Critique, ReplanRecord

_PLACEHOLDER = "{{{{{}}}}}"


@dataclass(frozen=True)
class Draft:
    """The meta-planner's outcome: a manifest, or the critique that sends it back (never both)."""

    manifest: Manifest | None
    critique: Critique | None
    usage: dict[str, dict]


async def draft_manifest(
    llm: AsyncStructuredLLM, goal: str, *, tools: Sequence[str], feedback: str | None = None
) -> Draft:
    """A manifest the model wrote for ``goal``; an unusable answer or an invalid plan is a Draft
    with a critical critique instead. LLMUnavailable propagates."""
    try:
        answer = await llm.astructured(
            "planning", planner_messages(goal, tools=tools, feedback=feedback), ManifestDraft
        )
    except LLMOutputError as exc:
        return Draft(
            None,
            rejection_critique([Problem("unusable_draft", str(exc), ())]),
            exc.usage_update("planning"),
        )
    usage = answer.usage_update("planning")
    try:
        return Draft(manifest_from_draft(answer.value, goal), None, usage)
    except ManifestError as exc:
        return Draft(None, rejection_critique(exc.problems), usage)


def rejection_critique(problems: Sequence[Problem]) -> Critique:
    """A critique whose every finding is one of the problems that make a manifest invalid."""
    return critique_of(
        [
            CriticFinding(
                rule=p.rule, severity="critical", message=p.message, step_ids=list(p.step_ids)
            )
            for p in problems
        ]
    )


def critique_report(critique: Critique) -> str:
    """The critique as lines for the planner: one per finding, critical ones first."""
    ordered = sorted(critique.findings, key=lambda f: f.severity != "critical")
    lines = [f"- [{f.severity}] {f.rule}: {f.message}" for f in ordered]
    return "\n".join([critique.summary, *lines, *critique.recommendations])


DEPENDENCY_RESULTS = "Results of the steps this one depends on:"
"""The header above dependency results, in a task and in a review question."""


def render_task(step: ManifestStep, depends: Mapping[str, Any]) -> str:
    """The task an executor is given: the step's input with ``{{dep}}`` placeholders filled in,
    followed by the results of its dependencies as fenced data."""
    text, _ = fill_placeholders(step, depends)
    if not depends:
        return text
    results = json.dumps(dict(depends), indent=1, default=str)
    return f"{text}\n\n{DEPENDENCY_RESULTS}\n{fenced(results, STEP_RESULTS)}"


def review_question(step: ManifestStep, depends: Mapping[str, Any]) -> str:
    """The question a person is asked: the input with placeholders filled in, then, as plain lines
    (a person reads them, not a model: no fences), the results its text does not show already."""
    text, rest = fill_placeholders(step, depends)
    if not rest:
        return text
    lines = "\n".join(f"- {dep}: {_as_text(result)}" for dep, result in rest.items())
    return f"{text}\n\n{DEPENDENCY_RESULTS}\n{lines}"


def fill_placeholders(step: ManifestStep, depends: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The input with ``{{dep}}`` filled in, and the dependencies it did not name."""
    text = step.input if isinstance(step.input, str) else json.dumps(step.input, default=str)
    rest = {}
    for dep, result in depends.items():
        placeholder = _PLACEHOLDER.format(dep)
        if placeholder in text:
            text = text.replace(placeholder, _as_text(result))
        else:
            rest[dep] = result
    return text, rest


@dataclass(frozen=True)
class Repair:
    """A replan's outcome: the repaired manifest (None when the replan was unusable) and its record."""

    manifest: Manifest | None
    record: ReplanRecord
    usage: dict[str, dict]
    error: str | None = None


async def repair_plan(
    llm: AsyncStructuredLLM,
    manifest: Manifest,
    *,
    blocked: Sequence[str],
    results: Mapping[str, Mapping[str, Any]],
    tools: Sequence[str],
    round_number: int,
) -> Repair:
    """One replan call for every blocked step and everything downstream of them.

    An unusable answer (garbage, or a repair that is not a valid plan) is a Repair with no
    manifest and the error: the caller falls back to the steps' failure policy.
    LLMUnavailable propagates (a provider outage is not a verdict on the plan).
    """
    replaced = [
        s.id for s in manifest.steps if s.id in set(blocked) | downstream_of(manifest, blocked)
    ]
    kept = [s.id for s in manifest.steps if s.id not in replaced]
    diagnosis = {step_id: (results.get(step_id) or {}).get("diagnosis", "") for step_id in blocked}
    messages = replanner_messages(
        manifest.goal,
        kept={
            s: (results.get(s) or {}).get("output")
            for s in kept
            if (results.get(s) or {}).get("status") == "completed"
        },
        failures=diagnosis,
        replaced={s: manifest.step(s).model_dump(exclude={"origin"}) for s in replaced},
        tools=tools,
    )
    record = ReplanRecord(
        round=round_number, blocked=list(blocked), replaced=replaced, diagnosis=diagnosis
    )
    try:
        answer = await llm.astructured("replanning", messages, RepairDraft)
    except LLMOutputError as exc:
        return Repair(
            None,
            record,
            exc.usage_update("replanning"),
            f"the replanner's answer could not be used: {exc}",
        )
    usage = answer.usage_update("replanning")
    try:
        repaired = apply_repair(manifest, answer.value, replaced=replaced, kept=kept)
    except ManifestError as exc:
        return Repair(
            None, record.model_copy(update={"summary": answer.value.summary}), usage, str(exc)
        )
    before, after = {s.id for s in manifest.steps}, {s.id for s in repaired.steps}
    record = record.model_copy(
        update={
            "summary": answer.value.summary,
            "added": sorted(after - before),
            "removed": sorted(before - after),
            "changes": {
                step_id: field_changes(
                    manifest.step(step_id).model_dump(), repaired.step(step_id).model_dump()
                )
                for step_id in replaced
                if step_id in after
            },
        }
    )
    return Repair(repaired, record, usage)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)
