"""Processes that cannot outlive their parent: on Linux the kernel sends SIGKILL to a process
whose parent dies once the process has armed PR_SET_PDEATHSIG, even while it hangs. Used by the
env workers (parallel_runner) and by the StarCraft II games they start (sc2_engine)."""
import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# libc's prctl, already loaded; None where the kernel has no death signal.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
AVAILABLE = _PRCTL is not None


def die_with_parent(parent_pid: int | None = None) -> None:
    """Arm SIGKILL as this process's death signal (nothing off Linux). With parent_pid, also die at
    once if the parent is already gone (it died before the signal was armed). Two system calls
    only, so it can run between fork and exec (a subprocess preexec_fn)."""
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)
