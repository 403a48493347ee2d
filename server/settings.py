"""Service settings, read from the environment (``Settings.from_env()``) or given directly."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from veriloop.context import PlanContext
from veriloop.engines.plan.judge.snapshot import (
    DEFAULT_SNAPSHOT_RUN_BYTES,
    DEFAULT_SNAPSHOT_TOTAL_BYTES,
)
from veriloop.engines.plan.manifest import ManifestLimits
from veriloop.schemas.manifest import PlanShell
from veriloop.server.tenants import ApiKeys, load_api_keys

DEFAULT_DATABASE_URL = "sqlite:///veriloop.sqlite"
"""One SQLite file in the working directory: the embedded default (one process)."""
CONFINEMENT_SETTINGS = (
    "sandbox_ro", "step_uid", "step_gid", "limit_memory_mb", "limit_processes", "limit_cpu_s",
    "limit_file_mb", "limit_open_files", "limit_disk_mb", "max_timeout_s",
)  # fmt: skip
"""Settings passed as they are to the plan runs' context (``VERILOOP_`` + the name in capitals;
see :class:`~veriloop.context.PlanContext` for each)."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Where tasks live, who may call, and the limits of one request."""

    database_url: str = DEFAULT_DATABASE_URL
    """``sqlite:///path`` (or a bare path) for one file; ``postgresql://...`` for many processes."""
    api_keys: Mapping[str, str] = field(default_factory=ApiKeys)
    """API key -> tenant, given in clear or as ``sha256:<hex>`` and kept as digests only
    (:class:`ApiKeys`). Empty: one local tenant, no authentication."""
    max_dom_bytes: int = 5_000_000
    """Larger DOMs answer 413."""
    retry_after_s: int = 5
    """Retry-After sent with 503 (model provider down)."""
    lock_timeout_s: float = 60.0
    """How long a request waits for another request on the same task before answering 409."""
    step_deadline_s: float = 60.0
    """The longest one step's graph run may take (all its model calls and retries); past it, 503."""
    max_manifest_steps: int = 500
    """Steps a plan manifest sent over HTTP may have, nested plans' included; more answers 413."""
    pg_pool_size: int = 8
    """PostgreSQL connections for checkpoints and the task index (per process)."""
    page_processes: int = field(default_factory=lambda: default_page_processes(os.cpu_count()))
    """Processes that parse, diff and compact pages beside each serving process (0: a thread)."""
    extension_ids: tuple[str, ...] = ()
    """Chrome extension ids whose pages may call the API from the browser (CORS); empty: any
    extension's. Web pages' origins are never allowed."""
    plan_shell: PlanShell = "off"
    """Whether HTTP plan runs may start processes (see :data:`PlanShell`)."""
    sandbox_ro: str = ""
    """Paths every sandboxed step may read, ':'-separated (``--sandbox-ro``)."""
    step_uid: int = PlanContext.step_uid
    """The uid step processes run as when the service is root."""
    step_gid: int = PlanContext.step_gid
    """The gid step processes run as when the service is root."""
    limit_memory_mb: int = PlanContext.limit_memory_mb
    """Address space of each step process, MiB."""
    limit_processes: int = PlanContext.limit_processes
    """Processes of the step uid, host-wide."""
    limit_cpu_s: int = PlanContext.limit_cpu_s
    """CPU seconds of each step process."""
    limit_file_mb: int = PlanContext.limit_file_mb
    """Largest file a step process may write, MiB."""
    limit_open_files: int = PlanContext.limit_open_files
    """Open files of each step process."""
    limit_disk_mb: int = PlanContext.limit_disk_mb
    """What a step's workspace may hold, MiB."""
    max_timeout_s: float = 3600.0
    """The longest ``timeout_s`` a manifest may ask for; more is a 422."""
    keep_workspaces: bool = False
    """Keep a finished plan run's folder and snapshot store (False: removed when it finishes)."""
    snapshot_run_bytes: int = DEFAULT_SNAPSHOT_RUN_BYTES
    """Most bytes of pre-step copies one plan run may store; past it the step fails."""
    snapshot_total_bytes: int = DEFAULT_SNAPSHOT_TOTAL_BYTES
    """Most bytes of pre-step copies all plan runs together may store; past it the step fails."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "api_keys", ApiKeys.of(self.api_keys))
        if self.plan_shell not in get_args(PlanShell):
            raise ValueError(
                f"plan_shell (VERILOOP_PLAN_SHELL): {self.plan_shell!r} is not one of "
                f"{', '.join(get_args(PlanShell))}"
            )

    def plan_context(self) -> PlanContext:
        """The context of HTTP plan runs: what ``plan_shell`` allows, and never what a caller's
        manifest declares (environment variables, the network) beyond what the operator passes."""
        sandbox = "off" if self.plan_shell == "host" else "required"
        return PlanContext(
            sandbox=sandbox,
            allow_shell=self.plan_shell != "off",
            allow_network=self.plan_shell == "host",
            manifest_env=False,
            **{name: getattr(self, name) for name in CONFINEMENT_SETTINGS},
        )

    @property
    def is_postgres(self) -> bool:
        """True when the database URL names PostgreSQL."""
        return self.database_url.startswith(("postgresql://", "postgres://"))

    @property
    def sqlite_path(self) -> str:
        """The SQLite file of a ``sqlite:///path`` or bare-path URL."""
        if self.is_postgres:
            raise ValueError("sqlite_path: the database URL is PostgreSQL")
        return (
            self.database_url.removeprefix("sqlite:///").removeprefix("sqlite://")
            or "veriloop.sqlite"
        )

    @property
    def manifest_limits(self) -> ManifestLimits:
        """How much reading a manifest sent over HTTP may take: no YAML anchors or aliases at all,
        at most ``max_manifest_steps`` steps, the default nesting and size."""
        return ManifestLimits(max_aliases=0, max_steps=self.max_manifest_steps)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``VERILOOP_*`` variables (see docs/service.md)."""
        env = os.environ if env is None else env
        defaults = cls()
        return cls(
            database_url=env.get("VERILOOP_DATABASE_URL") or defaults.database_url,
            api_keys=load_api_keys(
                env.get("VERILOOP_API_KEYS"), _path(env.get("VERILOOP_API_KEYS_FILE"))
            ),
            max_dom_bytes=int(env.get("VERILOOP_MAX_DOM_BYTES") or defaults.max_dom_bytes),
            retry_after_s=int(env.get("VERILOOP_RETRY_AFTER_S") or defaults.retry_after_s),
            lock_timeout_s=float(env.get("VERILOOP_LOCK_TIMEOUT_S") or defaults.lock_timeout_s),
            step_deadline_s=float(env.get("VERILOOP_STEP_DEADLINE_S") or defaults.step_deadline_s),
            max_manifest_steps=int(
                env.get("VERILOOP_MAX_MANIFEST_STEPS") or defaults.max_manifest_steps
            ),
            pg_pool_size=int(env.get("VERILOOP_PG_POOL_SIZE") or defaults.pg_pool_size),
            page_processes=int(env.get("VERILOOP_PAGE_PROCESSES") or defaults.page_processes),
            extension_ids=tuple(
                part.strip()
                for part in (env.get("VERILOOP_EXTENSION_IDS") or "").replace(",", " ").split()
            ),
            plan_shell=env.get("VERILOOP_PLAN_SHELL") or defaults.plan_shell,  # type: ignore[arg-type]
            **{
                name: type(getattr(defaults, name))(env[f"VERILOOP_{name.upper()}"])
                for name in CONFINEMENT_SETTINGS
                if env.get(f"VERILOOP_{name.upper()}")
            },
            keep_workspaces=(env.get("VERILOOP_KEEP_WORKSPACES") or "").strip().lower()
            in ("1", "true", "yes", "on"),
            snapshot_run_bytes=int(
                env.get("VERILOOP_SNAPSHOT_RUN_BYTES") or defaults.snapshot_run_bytes
            ),
            snapshot_total_bytes=int(
                env.get("VERILOOP_SNAPSHOT_TOTAL_BYTES") or defaults.snapshot_total_bytes
            ),
        )


def default_page_processes(cpus: int | None) -> int:
    """One page process when the machine has a second CPU for it, else none (a thread does the work).

    One, not one per CPU: the serving process itself, busy with the graph, the model client and
    HTTP, is what caps a step's throughput; one page process takes the page work off it.
    """
    return 1 if (cpus or 1) > 1 else 0


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None
