"""Task-scoped logging: every line carries the task id and session id."""

from __future__ import annotations

import logging

LOW_CONFIDENCE_COMPLETION = "Low confidence completion"
CLIENT_WITNESS_OVERRIDE = "Client witness override"
MISSING_BEFORE_STATE = "Missing before_state"
GROUNDED_VERDICT = "Grounded verdict"
GROUNDING_UNAVAILABLE = "Grounding unavailable"

_BASE = logging.getLogger("veriloop")


class TaskLogger(logging.LoggerAdapter):
    """Prefixes every message with ``[task=... session=...]`` and puts both ids on the record."""

    def process(self, msg, kwargs):
        extra = dict(kwargs.get("extra") or {})
        extra.update(self.extra)
        kwargs["extra"] = extra
        return f"[task={self.extra['task_id']} session={self.extra['session_id']}] {msg}", kwargs

    def event(self, name: str, detail: str = "", level: int = logging.INFO) -> None:
        """Log a named event (``Low confidence completion``...), tagged ``event`` on the record."""
        self.log(level, f"{name}: {detail}" if detail else name, extra={"event": name})


def task_logger(
    task_id: str | None, session_id: str | None, component: str = "agent"
) -> TaskLogger:
    """A logger for one task's lines."""
    return TaskLogger(
        _BASE.getChild(component), {"task_id": task_id or "-", "session_id": session_id or "-"}
    )
