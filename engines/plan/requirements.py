"""What a manifest's step needs from the place it runs, besides processes: a model.

Pure: the CLI refuses a plan that needs a model where none is configured, and the service says so
in ``POST /api/plans/validate`` and refuses it in ``POST /api/plans``, from the same reasons.
"""

from __future__ import annotations

from veriloop.schemas.manifest import ManifestStep


def why_model_needed(step: ManifestStep, *, review: bool) -> str | None:
    """Why running ``step`` itself needs a model (its nested plan's steps are their own), or None.

    ``review``: critical steps get a model review (``PlanContext.review_critical_steps``)."""
    if step.executor == "llm":
        return "is run by a model (an llm step)"
    if step.critical and review and step.type not in ("human_review", "plan"):
        return "is critical, so a model reviews it (review_critical_steps)"
    if step.on_failure == "replan":
        return "asks a model to replan when it fails (on_failure: replan)"
    return None
