"""glibc's malloc, kept from fragmenting the worker's heap over a long run.

glibc serves a request of at least its mmap threshold with a mapping of its own, returned to
the OS when freed; but each time such a mapping is freed, it raises the threshold to that
size (up to 32 MiB). The worker frees large buffers all the time (fetched batches, summaries,
checkpoint records), so after a while they are carved from the heap instead, among the
long-lived blocks of RocksDB and the native fold, and the holes they leave only partly fill.
Measured with `bench.soak --minutes 25 --rate 1000`, two workers side by side: the worker less
its run cache and local copy grew 13.4 MB an hour over the second half with the default, 5.4
with the threshold held at 128 KiB, and started 6 MB smaller.
"""

from __future__ import annotations

import ctypes

MMAP_THRESHOLD = 128 * 2**10
"""glibc's initial threshold, held there: a mapping costs two system calls, and a buffer this
large costs more to fill than that."""
_M_MMAP_THRESHOLD = -3  # <malloc.h>


def hold_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD` (which also stops it moving) for the
    rest of the process. False, and nothing done, where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process runs on
    except (OSError, AttributeError):  # not glibc (musl, macOS): their allocators differ
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
