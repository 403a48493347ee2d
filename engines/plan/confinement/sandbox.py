"""How a step's processes start: a scrubbed environment, and the confinement layers that work here.

Every process a plan run starts (shell steps, command checks, test runs) goes through
:func:`veriloop.engines.plan.confinement.process.run_command`, which asks :func:`launch` how to start it.

- **Environment.** Never the runner's: only ``PATH``, ``LANG``/``LANGUAGE``/``LC_*``, ``TZ`` and
  ``TERM`` from it, ``HOME`` set to the workspace, ``TMPDIR`` (``/tmp`` inside the sandbox), the
  names in :attr:`Confinement.pass_env`, and what veriloop's own plumbing adds. API keys,
  ``VERILOOP_*``, database URLs and ``OPENAI_*`` never reach a step unless named there.
- **Layers** (:data:`LAYERS`), each its own module: ``limits`` (rlimits, :mod:`.limits`),
  ``namespaces`` (bubblewrap: no network unless the step declares it, a pid namespace, the
  process tree killed with the step, a new session), ``user`` (an unprivileged uid of its own,
  :mod:`.user`), ``no_caps`` (no capabilities, no_new_privs), ``seccomp`` (:mod:`.seccomp`) and
  ``paths`` (an allowlist of read-only paths plus the workspace, :mod:`.paths`).
- **Modes** (:data:`SandboxMode`): ``required`` refuses to start a process unless every layer
  applies (one line names the missing one); ``auto`` applies the layers that work here (the
  report lists them); ``off`` applies the limits only. Whether bwrap works is probed once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

from veriloop.engines.plan.confinement.limits import (
    DEFAULT_LIMITS,
    Limits,
    limits_problem,
    set_limits,
)
from veriloop.engines.plan.confinement.paths import (
    hidden,
    inside,
    interpreter_prefixes,
    readable,
    system_view,
    visible_roots,
    writable_binds,
)
from veriloop.engines.plan.confinement.seccomp import filter_fd, seccomp_problem
from veriloop.engines.plan.confinement.user import (
    StepUser,
    drop_privileges,
    hand_over,
    service_is_root,
    user_problem,
)
from veriloop.schemas.manifest import AgentSpec, ManifestStep, SandboxMode

Layer = Literal["limits", "namespaces", "user", "no_caps", "seccomp", "paths"]
"""One layer of confinement (see the module docstring)."""
LAYERS: tuple[Layer, ...] = ("limits", "namespaces", "user", "no_caps", "seccomp", "paths")
"""Every layer, in the order a process passes them."""
SANDBOX_MODES: tuple[SandboxMode, ...] = ("off", "auto", "required")
"""From the loosest to the strictest."""
BASE_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")
"""Variables a step's processes get from the runner's environment (plus ``LC_*``)."""
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""PATH when the runner has none."""
PROBE_TIMEOUT_S = 10.0
SHM_BYTES = 64 << 20
"""Size of the sandbox's /dev/shm (POSIX semaphores and shared memory)."""
HOME_SECRETS = (
    ".ssh", ".aws", ".azure", ".config/gcloud", ".config/gh", ".docker", ".kube", ".gnupg",
    ".netrc", ".pgpass", ".git-credentials", ".pypirc", ".local/share/veriloop",
)  # fmt: skip
"""Where credentials usually live under the runner's home (and veriloop's default data folder):
hidden wherever the sandbox would otherwise show them (an interpreter or operator path under the
home). The home itself is never bound."""


def home_secrets() -> tuple[str, ...]:
    """:data:`HOME_SECRETS` under this user's home directory."""
    home = Path.home()
    return tuple(str(home / name) for name in HOME_SECRETS)


@dataclass(frozen=True)
class Confinement:
    """How one step's processes may start."""

    sandbox: SandboxMode = "auto"
    """See :data:`SandboxMode`."""
    network: bool = False
    """Share the runner's network with the sandbox (the step declared ``network: true``)."""
    pass_env: tuple[str, ...] = ()
    """Names copied from the runner's environment besides :data:`BASE_ENV`."""
    hide: tuple[str, ...] = field(default_factory=home_secrets)
    """Paths made empty inside the sandbox (secrets on disk, other runs' folders)."""
    forbidden: str | None = None
    """Why no process may start at all (the service's ``plan_shell=off``); None: they may."""
    readonly: tuple[str, ...] = ()
    """Paths the operator shows every step read-only (``veriloop serve --sandbox-ro``)."""
    limits: Limits = DEFAULT_LIMITS
    """What each step process may use."""
    user: StepUser = field(default_factory=StepUser)
    """Who step processes are when the service runs as root."""


DEFAULT_CONFINEMENT = Confinement()
"""Sandbox auto, no network, nothing passed beyond the base environment, the default limits."""


class ProcessRefused(RuntimeError):
    """A step's process must not start: its message is the one-line reason."""


@dataclass(frozen=True)
class Launch:
    """How to start one command: the argv before the shell command, its environment, the layers
    it runs under and the descriptors to pass (the caller closes them once it started)."""

    argv: tuple[str, ...]
    env: dict[str, str]
    layers: tuple[Layer, ...]
    pass_fds: tuple[int, ...] = ()


def stricter(*modes: SandboxMode | None) -> SandboxMode:
    """The strictest of ``modes`` (None: not set); ``auto`` when none is set."""
    given = [m for m in modes if m is not None]
    return max(given, key=SANDBOX_MODES.index) if given else "auto"


def missing_layers(confinement: Confinement) -> dict[Layer, str]:
    """Each layer that cannot apply to this step's processes here, with the one-line reason."""
    missing: dict[Layer, str] = {}
    if why := limits_problem():
        missing["limits"] = why
    if confinement.sandbox == "off":
        return {**missing, **{layer: "sandbox off" for layer in LAYERS[1:]}}
    if why := bwrap_problem():
        return {**missing, **{layer: why for layer in LAYERS[1:]}}
    if why := user_problem():
        missing["user"] = why
    if why := seccomp_problem():
        missing["seccomp"] = why
    return missing


def layers_for(confinement: Confinement) -> tuple[Layer, ...]:
    """The layers this step's processes run under here."""
    missing = missing_layers(confinement)
    return tuple(layer for layer in LAYERS if layer not in missing)


def problem(confinement: Confinement) -> str | None:
    """Why a process of this step cannot start (one line), or None."""
    if confinement.forbidden:
        return confinement.forbidden
    if confinement.sandbox == "required":
        missing = missing_layers(confinement)
        for layer in ("namespaces", *LAYERS):  # the sandbox itself first: the others need it
            if layer in missing:
                return f"sandbox required, but {missing[layer]} (no {layer} layer)"
    return None


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox a process here (one line), or None when it can."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bubblewrap (bwrap) is not installed or not on PATH (Debian: apt-get install bubblewrap)"
    return _probe(binary, service_is_root())


@cache
def _probe(binary: str, root: bool) -> str | None:
    """Start ``true`` in the sandbox the steps get, once per binary (namespaces may be disallowed)."""
    options = [*system_view(tmp_bytes=1 << 20, network=False), *_namespaces(network=False)]
    try:
        done = subprocess.run(
            [binary, *options, "true"],
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            env={"PATH": DEFAULT_PATH},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} cannot start: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines() or [
            f"exit status {done.returncode}"
        ]
        return f"{binary} cannot create its namespaces on this machine: {why[-1]}"
    return None


def step_env(
    workspace: Path,
    confinement: Confinement,
    *,
    sandboxed: bool,
    extra: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a step's process: the allowlist of the module docstring, never more."""
    environ = os.environ if environ is None else environ
    names = {*BASE_ENV, *confinement.pass_env}
    env = {
        name: value for name, value in environ.items() if name in names or name.startswith("LC_")
    }
    env.setdefault("PATH", DEFAULT_PATH)
    env["HOME"] = str(workspace)
    if sandboxed:
        env["TMPDIR"] = "/tmp"
    elif "TMPDIR" in environ:
        env["TMPDIR"] = environ["TMPDIR"]
    env.update(extra or {})
    return env


def launch(
    workspace: Path,
    confinement: Confinement,
    *,
    extra_env: Mapping[str, str] | None = None,
    writable: Sequence[Path] = (),
    readonly: Sequence[Path] = (),
) -> Launch:
    """How to start a shell command for this step: ``[*argv, "-c", command]`` with ``env`` and
    ``pass_fds``; ProcessRefused when it must not start (never unconfined under ``required``).
    ``writable`` folders are bound read-write besides the workspace, then ``readonly`` paths
    read-only (so a path inside the workspace, or the workspace itself, can be made read-only).
    When the service is root, the workspace and ``writable`` are handed to the step's user first."""
    refused = problem(confinement)
    if refused:
        raise ProcessRefused(refused)
    layers = layers_for(confinement)
    sandboxed = "namespaces" in layers
    env = step_env(workspace, confinement, sandboxed=sandboxed, extra=extra_env)
    argv = set_limits(confinement.limits) if "limits" in layers else []
    if not sandboxed:
        return Launch((*argv, "/bin/sh"), env, layers)
    root = service_is_root()
    change_user = root and "user" in layers
    if change_user:
        hand_over([workspace, *writable], confinement.user)
    prefixes = interpreter_prefixes()
    operator = [Path(path) for path in confinement.readonly]
    shown = [p for p in [*prefixes, *operator] if not inside(p, [Path("/usr"), Path("/etc")])]
    roots = visible_roots(prefixes, operator)
    secrets = [Path(p) for p in confinement.hide if inside(Path(p), roots)]
    options = [
        *system_view(tmp_bytes=confinement.limits.disk_bytes, network=confinement.network),
        "--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
        *readable(shown),
        *hidden(secrets),
        *writable_binds([workspace, *writable]),
        *readable(readonly),
        # bwrap's own root (the folders it made on the way to each bind) read-only: a step
        # writes only where a bind or a sized tmpfs lets it.
        "--remount-ro", "/",
        *_namespaces(network=confinement.network),
    ]  # fmt: skip
    if not change_user:
        options += ["--cap-drop", "ALL"]
    fds: tuple[int, ...] = ()
    if "seccomp" in layers:
        fds = (filter_fd(),)
        options += ["--seccomp", str(fds[0])]
    bwrap = shutil.which("bwrap") or "bwrap"
    privileges = drop_privileges(confinement.user) if change_user else []
    argv += [bwrap, *options, "--chdir", str(workspace), "--", *privileges, "/bin/sh"]
    return Launch(tuple(argv), env, layers, fds)


def _namespaces(*, network: bool) -> list[str]:
    """bwrap's namespace options. As root no user namespace: the uid change inside drops the
    privilege, and it needs the host's uids (a user namespace maps only one)."""
    options = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    if not service_is_root():
        options.append("--unshare-user")
    if not network:
        options.append("--unshare-net")
    return [*options, "--die-with-parent", "--new-session"]


def step_confinement(
    step: ManifestStep,
    agent: AgentSpec | None,
    *,
    sandbox: SandboxMode,
    pass_env: str,
    manifest_env: bool,
    allow_network: bool,
    allow_shell: bool,
    private_root: str = "",
    readonly: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    user: StepUser | None = None,
) -> Confinement:
    """How a step's processes start: the runner's settings (``sandbox`` already the stricter of the
    run's and the manifest's; ``pass_env`` comma-separated names) and what the step declares. A
    step's own ``env`` names count only for a user's manifest where the runner honours them
    (``manifest_env``: the CLI, not the service); a model-written step never gets them.
    ``private_root`` is hidden but for the step's own workspace inside it (other runs' folders)."""
    declared = [*step.env, *(agent.env if agent else [])]
    granted = declared if step.origin == "user" and manifest_env else []
    operator = [name.strip() for name in pass_env.split(",") if name.strip()]
    return Confinement(
        sandbox=sandbox,
        hide=(*home_secrets(), private_root) if private_root else home_secrets(),
        network=step.network and allow_network,
        pass_env=tuple(dict.fromkeys([*operator, *granted])),
        forbidden=None
        if allow_shell
        else "this runner does not start processes for plan steps (the service's plan_shell=off)",
        readonly=tuple(readonly),
        limits=limits,
        user=user or StepUser(),
    )


__all__ = [
    "BASE_ENV",
    "Confinement",
    "DEFAULT_CONFINEMENT",
    "LAYERS",
    "Launch",
    "Layer",
    "ProcessRefused",
    "SANDBOX_MODES",
    "SandboxMode",
    "bwrap_problem",
    "launch",
    "layers_for",
    "missing_layers",
    "problem",
    "step_confinement",
    "step_env",
    "stricter",
]
