"""The seccomp layer: a filter that lets every system call through except those that reconfigure the
kernel's view of the world (mounts, namespaces), reach into other processes, or load code into the
kernel. Built once with libseccomp (PyPI ``pyseccomp``), handed to bubblewrap as ``--seccomp FD``.

Denied calls fail with EPERM (a program sees an ordinary refusal, not a crash); ``clone`` is refused
only with a namespace flag, and ``clone3`` answers ENOSYS so the C library falls back to ``clone``,
whose flags the filter can read. System calls of another architecture (32-bit x86 on x86_64) kill
the process: the filter is written for the native one only.
"""

from __future__ import annotations

import errno
import os
import tempfile
from functools import cache

DENIED = (
    # mounts and the root
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
    "fsconfig", "fspick", "mount_setattr",
    # namespaces
    "unshare", "setns",
    # other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # the kernel keyring
    "keyctl", "add_key", "request_key",
    # code in the kernel
    "bpf", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "perf_event_open", "userfaultfd",
    # files by handle (past the mount's view), the machine itself
    "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "reboot", "acct", "quotactl",
    "quotactl_fd", "syslog", "iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "lookup_dcookie", "vhangup", "nfsservctl", "uselib", "fanotify_init",
)  # fmt: skip
"""System calls refused with EPERM (names this architecture lacks are skipped)."""
NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
"""``clone`` with any of these (a new namespace) is refused; plain forks and threads are not."""


class SeccompUnavailable(RuntimeError):
    """The filter cannot be built here: its message is the one-line reason."""


def seccomp_problem() -> str | None:
    """Why the seccomp layer cannot apply here (one line), or None."""
    try:
        compiled_filter()
    except SeccompUnavailable as exc:
        return str(exc)
    return None


@cache
def compiled_filter() -> bytes:
    """The filter as the kernel's BPF program (what ``bwrap --seccomp`` reads), built once."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError) as exc:  # OSError: libseccomp itself is missing
        raise SeccompUnavailable(
            f"libseccomp's Python bindings cannot load (pip install pyseccomp): {exc}"
        ) from None
    try:
        rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        for name in DENIED:
            try:
                rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
            except (ValueError, RuntimeError, OSError):
                continue  # not a system call on this architecture
        for flag in NAMESPACE_FLAGS:
            rules.add_rule(
                seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag)
            )
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        with tempfile.TemporaryFile() as out:
            rules.export_bpf(out)
            out.seek(0)
            return out.read()
    except (ValueError, RuntimeError, OSError) as exc:
        raise SeccompUnavailable(f"the seccomp filter cannot be built: {exc}") from None


def filter_fd() -> int:
    """A pipe's read end holding the filter, for one bwrap to read (the caller passes it with
    ``pass_fds`` and closes it after the start). A pipe, not a file: nothing left on disk, and
    each bwrap reads its own copy from the start."""
    program = compiled_filter()
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: well within the pipe's buffer
    finally:
        os.close(write)
    return read


__all__ = ["DENIED", "SeccompUnavailable", "compiled_filter", "filter_fd", "seccomp_problem"]
