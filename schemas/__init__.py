"""Pydantic models shared by every layer of veriloop."""

from veriloop.schemas.actions import Action, ActionKind, ActionParseError, parse_action
from veriloop.schemas.api import InteractRequest, InteractResponse, TaskStatus, VerificationSummary
from veriloop.schemas.manifest import AgentSpec, CheckSpec, Manifest, ManifestStep
from veriloop.schemas.observation import (
    BeforeState,
    ClientObservations,
    ClientVerification,
    Observation,
)
from veriloop.schemas.outputs import (
    ActionChoice,
    CompletionAudit,
    CorrectionChoice,
    CorrectionStrategy,
    CriticReview,
    PlannedStep,
    PlanOutput,
    PlanValidation,
    RefinedStep,
    SemanticVerdict,
)
from veriloop.schemas.plan import Plan, PlanStep, StepStatus, SubTask
from veriloop.schemas.plan_run import (
    AttemptReport,
    CheckResult,
    CriticFinding,
    Critique,
    ExecutionResult,
    PendingReview,
    PlanRunReport,
    ReplanRecord,
    ReviewDecision,
    StepResult,
)
from veriloop.schemas.records import ActionRecord, ReplanningResult
from veriloop.schemas.usage import PURPOSES, Purpose, Usage, add_usage, total_usage
from veriloop.schemas.verification import (
    CompletionAuditResult,
    FailureCategory,
    VerificationResult,
)

__all__ = [
    "Action",
    "AgentSpec",
    "AttemptReport",
    "CheckResult",
    "CheckSpec",
    "Critique",
    "CriticFinding",
    "ExecutionResult",
    "Manifest",
    "ManifestStep",
    "PendingReview",
    "PlanRunReport",
    "ReplanRecord",
    "ReviewDecision",
    "StepResult",
    "ActionChoice",
    "ActionKind",
    "ActionParseError",
    "ActionRecord",
    "BeforeState",
    "ClientObservations",
    "ClientVerification",
    "CorrectionChoice",
    "CorrectionStrategy",
    "CriticReview",
    "FailureCategory",
    "InteractRequest",
    "InteractResponse",
    "Observation",
    "PURPOSES",
    "Plan",
    "PlanOutput",
    "PlanStep",
    "PlanValidation",
    "PlannedStep",
    "Purpose",
    "RefinedStep",
    "ReplanningResult",
    "SemanticVerdict",
    "CompletionAudit",
    "CompletionAuditResult",
    "StepStatus",
    "SubTask",
    "TaskStatus",
    "Usage",
    "VerificationResult",
    "VerificationSummary",
    "add_usage",
    "parse_action",
    "total_usage",
]
