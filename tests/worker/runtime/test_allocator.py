"""The worker's malloc setting: large buffers keep mappings of their own all along."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# In a process of its own (the setting lasts for the process): free a 4 MiB buffer, which
# raises glibc's moving threshold to 4 MiB, then allocate one of twice `MMAP_THRESHOLD`, and
# print how many mappings malloc holds more than before it.
PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from worker.runtime.allocator import MMAP_THRESHOLD, hold_mmap_threshold

    class Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = Info
    if sys.argv[1] == "held":
        assert hold_mmap_threshold()
    big = bytearray(4 * 2**20)
    del big
    before = mallinfo2().hblks
    buffer = bytearray(2 * MMAP_THRESHOLD)
    print(mallinfo2().hblks - before)
    """
)


def mappings_for_a_buffer(setting: str) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, setting], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc: Linux only")
def test_a_large_buffer_still_gets_a_mapping_after_a_larger_one_was_freed() -> None:
    assert mappings_for_a_buffer("default") == 0  # the moving threshold took it into the heap
    assert mappings_for_a_buffer("held") == 1
