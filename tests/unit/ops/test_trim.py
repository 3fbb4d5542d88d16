"""malloc_trim once a minute: found on glibc, called by the thread until stopped."""

from __future__ import annotations

import ctypes
import os
import platform
import threading

import pytest

from app.ops.trim import Trimmer, malloc_trim


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_malloc_trim_gives_freed_heap_pages_back() -> None:
    """80 MiB of small blocks freed below one still in use: glibc keeps the pages (nothing
    at the heap's top to trim) until malloc_trim(0) releases them."""
    trim = malloc_trim()
    assert trim is not None
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(1024) for _ in range(80 * 1024)]
    for block in blocks:
        ctypes.memset(block, 1, 1024)
    last = blocks.pop()  # in use above the freed ones
    for block in blocks:
        libc.free(block)
    held = _rss_mib()
    trim()
    assert _rss_mib() < held - 40, "malloc_trim released less than half of 80 MiB freed"
    libc.free(last)


def test_the_thread_trims_until_stopped() -> None:
    trimmer = Trimmer(every_s=0.01)
    called = threading.Event()

    def trim() -> int:
        called.set()
        return 0

    trimmer._trim = trim
    trimmer.start()
    assert called.wait(10)
    trimmer.stop()
    assert trimmer.trims >= 1
