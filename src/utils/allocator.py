"""The C library's memory allocator, set up for the training step's large temporary tensors."""
import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_MAX = -4
KEEP_UP_TO = 2 ** 31 - 1  # bytes of free heap top glibc may keep (mallopt takes an int)


def keep_freed_memory() -> bool:
    """Make glibc keep freed memory for reuse instead of handing it back to the OS; False where the
    C library has no mallopt (not glibc), and nothing changes.

    By default glibc gives each block over 32 MB its own mapping, unmapped when freed, and returns
    the free top of its heap to the OS. A training step allocates and frees a few hundred MB of
    tensors (those of 128 corridor episodes are 10-120 MB each), so every step page-faulted them
    back in: about 0.35 ms per MB on a 2-core EPYC, 5-10% of the step. With this the process keeps
    its peak heap and reuses it."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_UP_TO))
