"""How a step's processes start: a scrubbed environment, and bubblewrap where it works.

Every process a plan run starts (shell steps, command checks, test runs) goes through
:func:`veriloop.engines.plan.confinement.process.run_command`, which asks :func:`launch` how to start it.

- **Environment.** Never the runner's: only ``PATH``, ``LANG``/``LANGUAGE``/``LC_*``, ``TZ`` and
  ``TERM`` from it, ``HOME`` set to the workspace, ``TMPDIR`` (``/tmp`` inside the sandbox), the
  names in :attr:`Confinement.pass_env`, and what veriloop's own plumbing adds. API keys,
  ``VERILOOP_*``, database URLs and ``OPENAI_*`` never reach a step unless named there.
- **Sandbox** (``bwrap``, Debian's ``bubblewrap``): the whole file system read-only, the workspace
  (and the caller's scratch folders) the only writable paths, a private ``/tmp``, ``/dev`` and
  ``/proc``, credential folders of the runner's home hidden, every namespace unshared (no network
  unless the step declares it, and without it ``/run``'s sockets hidden too; the runner's other processes
  invisible), the process tree killed with the step (``--die-with-parent``), a new session (no
  terminal to inject keystrokes into).
- **Modes** (:data:`SandboxMode`): ``required`` refuses to start a process it cannot sandbox;
  ``auto`` sandboxes when bwrap works and otherwise runs unsandboxed (the report says which);
  ``off`` never sandboxes. Whether bwrap works is probed once per binary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from veriloop.schemas.manifest import AgentSpec, ManifestStep, SandboxMode

SANDBOX_MODES: tuple[SandboxMode, ...] = ("off", "auto", "required")
"""From the loosest to the strictest."""
BASE_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")
"""Variables a step's processes get from the runner's environment (plus ``LC_*``)."""
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""PATH when the runner has none."""
PROBE_TIMEOUT_S = 10.0
HOME_SECRETS = (
    ".ssh", ".aws", ".azure", ".config/gcloud", ".config/gh", ".docker", ".kube", ".gnupg",
    ".netrc", ".pgpass", ".git-credentials", ".pypirc", ".local/share/veriloop",
)  # fmt: skip
"""Where credentials usually live under the runner's home (and veriloop's default data folder):
hidden inside the sandbox. The rest of the file system stays readable."""


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
    """Paths made empty inside the sandbox (secrets on disk)."""
    forbidden: str | None = None
    """Why no process may start at all (the service's ``plan_shell=off``); None: they may."""


DEFAULT_CONFINEMENT = Confinement()
"""Sandbox auto, no network, nothing passed beyond the base environment."""


class ProcessRefused(RuntimeError):
    """A step's process must not start: its message is the one-line reason."""


@dataclass(frozen=True)
class Launch:
    """How to start one command: the argv before the shell command, and its environment."""

    argv: tuple[str, ...]
    env: dict[str, str]
    sandboxed: bool


def stricter(*modes: SandboxMode | None) -> SandboxMode:
    """The strictest of ``modes`` (None: not set); ``auto`` when none is set."""
    given = [m for m in modes if m is not None]
    return max(given, key=SANDBOX_MODES.index) if given else "auto"


def problem(confinement: Confinement) -> str | None:
    """Why a process of this step cannot start (one line), or None."""
    if confinement.forbidden:
        return confinement.forbidden
    if confinement.sandbox == "required":
        why = bwrap_problem()
        if why:
            return f"sandbox required, but {why}"
    return None


def will_sandbox(confinement: Confinement) -> bool:
    """The step's processes run in bubblewrap."""
    return confinement.sandbox != "off" and bwrap_problem() is None


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox a process here (one line), or None when it can."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bubblewrap (bwrap) is not installed or not on PATH (Debian: apt-get install bubblewrap)"
    return _probe(binary)


@cache
def _probe(binary: str) -> str | None:
    """Start ``true`` in the sandbox the steps get, once per binary (namespaces may be disallowed)."""
    try:
        done = subprocess.run(
            [binary, *_isolation(Path("/"), network=False, hide=()), "true"],
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
    """How to start a shell command for this step: ``[*argv, "-c", command]`` with ``env``;
    ProcessRefused when it must not start (never unsandboxed under ``required``). ``writable``
    folders are bound read-write besides the workspace, then ``readonly`` paths read-only (so a
    path inside the workspace, or the workspace itself, can be made read-only)."""
    refused = problem(confinement)
    if refused:
        raise ProcessRefused(refused)
    sandboxed = will_sandbox(confinement)
    env = step_env(workspace, confinement, sandboxed=sandboxed, extra=extra_env)
    if not sandboxed:
        return Launch(("/bin/sh",), env, sandboxed=False)
    binds: list[str] = []
    for path in writable:
        binds += ["--bind", str(path), str(path)]
    for path in readonly:
        binds += ["--ro-bind", str(path), str(path)]
    argv = (
        shutil.which("bwrap") or "bwrap",
        *_isolation(workspace, network=confinement.network, hide=confinement.hide),
        *binds,
        "--chdir",
        str(workspace),
        "/bin/sh",
    )
    return Launch(argv, env, sandboxed=True)


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
    )


def _isolation(workspace: Path, *, network: bool, hide: Sequence[str]) -> list[str]:
    """bwrap's options: read-only system, private /tmp, /dev and /proc, secrets hidden, then the
    workspace writable (after the tmpfs mounts, so a workspace under /tmp or a hidden folder works)."""
    options = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if not network:
        # A socket file on a read-only mount still accepts connections: hide /run's (databases,
        # dbus, docker). A step with the network reaches loopback services anyway, and may need
        # a resolver configured under /run.
        options += ["--tmpfs", "/run"]
    for path in hide:
        if Path(path).is_dir():
            options += ["--tmpfs", str(path)]
        elif Path(path).exists():
            options += ["--ro-bind", "/dev/null", str(path)]
    if workspace != Path("/"):
        options += ["--bind", str(workspace), str(workspace)]
    options += ["--unshare-all", "--die-with-parent", "--new-session"]
    if network:
        options.append("--share-net")
    return options


__all__ = [
    "BASE_ENV",
    "Confinement",
    "DEFAULT_CONFINEMENT",
    "Launch",
    "ProcessRefused",
    "SANDBOX_MODES",
    "SandboxMode",
    "bwrap_problem",
    "launch",
    "problem",
    "step_confinement",
    "step_env",
    "stricter",
    "will_sandbox",
]
