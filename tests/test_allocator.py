"""utils.allocator: with glibc, freed memory stays with the process and a training step's large
temporaries are not page-faulted in again every step."""
import platform
import resource

import pytest
import torch as th

from utils.allocator import keep_freed_memory

GLIBC = platform.libc_ver()[0] == "glibc"


def page_faults_of_a_64mb_temporary() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    th.ones(16 * 2 ** 20)  # 64 MB, written then freed
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_keep_freed_memory_says_whether_it_could():
    assert keep_freed_memory() == GLIBC


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_a_freed_block_is_reused_without_page_faults():
    keep_freed_memory()
    for _ in range(16):  # the heap grows over the first few (up to ~10 here, depending on what else it holds)
        page_faults_of_a_64mb_temporary()
    # without keep_freed_memory every one faults in all 16384 pages (64 MB of 4 kB pages)
    assert max(page_faults_of_a_64mb_temporary() for _ in range(3)) < 100
