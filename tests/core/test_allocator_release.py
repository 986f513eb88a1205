"""Freed memory comes back: with glibc told to keep it (the app's ``tune_allocator``), a
freed heap stays resident until :func:`release_freed_memory` hands it back."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    from actviz.core import allocator
    assert allocator.tune_allocator()
    blocks = [bytearray(b"x" * (1 << 20)) for _ in range(300)]  # 300 MiB of heap blocks
    peak = allocator.rss_mib()
    heap = allocator.heap_in_use_mib()
    del blocks
    kept = allocator.rss_mib()
    assert allocator.release_freed_memory()
    after = allocator.rss_mib()
    print(round(peak), round(heap), round(kept), round(after), round(allocator.heap_in_use_mib()))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_a_kept_heap_is_handed_back():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    peak, heap, kept, after, heap_after = map(int, out)
    assert heap >= 300 and peak >= 300
    assert kept > peak - 50  # tuned: freeing kept it resident
    assert after < kept - 250  # released: back to the system
    assert heap_after < heap - 250


BREAKDOWN = textwrap.dedent(
    """
    import numpy as np
    from actviz.core.allocator import memory_breakdown_mib
    before = memory_breakdown_mib()
    block = np.ones(64 * 2**20, dtype=np.uint8)  # 64 MiB, written: resident
    after = memory_breakdown_mib()
    print(sorted(before), before["files"] + before["anonymous"] - before["rss"],
          round(after["heap_in_use"] - before["heap_in_use"]),
          round(after["anonymous"] - before["anonymous"]))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and glibc only")
def test_the_breakdown_adds_up_and_sees_the_heap_grow():
    # A fresh process: a test worker's allocator is tuned by the windows it opened, and its
    # free heap may hold the block already.
    out = subprocess.run(
        [sys.executable, "-c", BREAKDOWN], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    keys, gap, heap, anon = (
        out.stdout.rsplit("]", 1)[0] + "]",
        *out.stdout.rsplit("]", 1)[1].split(),
    )
    assert keys == "['anonymous', 'files', 'heap_free', 'heap_in_use', 'rss', 'rss_anon']"
    assert abs(float(gap)) < 1e-6
    assert int(heap) >= 63 and int(anon) >= 60


TOP = textwrap.dedent(
    """
    import ctypes, sys, threading
    from actviz.core import allocator
    assert allocator.tune_allocator()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    def job():  # a worker's job: 40 MiB from its own arena, freed before it ends
        blocks = [libc.malloc(2**20) for _ in range(40)]
        for b in blocks:
            ctypes.memset(b, 1, 2**20)
        for b in blocks:
            libc.free(b)
        if sys.argv[1] == "marked":
            allocator.mark_arena()
            allocator.mark_arena()  # once per thread until the next trim
            assert len(allocator._marks) == 1
    t = threading.Thread(target=job)
    t.start()
    t.join()
    before = allocator.rss_anon_mib()
    assert allocator.release_freed_memory()
    print(round(before - allocator.rss_anon_mib()), len(allocator._marks))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_the_free_top_of_a_workers_arena_goes_back_once_it_marked_it():
    def released(how: str) -> tuple[int, int]:
        out = subprocess.run(
            [sys.executable, "-c", TOP, how], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        mib, marks = out.stdout.split()
        return int(mib), int(marks)

    # malloc_trim leaves a thread arena's free top resident (the 1 GiB trim threshold)...
    assert released("plain")[0] < 5
    # ...a mark's free, with the threshold lowered for it, hands it back; the mark is gone.
    mib, marks = released("marked")
    assert mib >= 30 and marks == 0


THREADS = textwrap.dedent(
    """
    import threading
    import torch
    from actviz.core import allocator
    torch.set_num_threads(1)
    a, b = torch.randn(256, 512), torch.randn(512, 300)
    a @ b
    before = allocator.heap_in_use_mib()
    for _ in range(40):  # as pool threads come and go over a session
        t = threading.Thread(target=lambda: [a @ b for _ in range(3)])
        t.start()
        t.join()
    grown = allocator.heap_in_use_mib()
    freed = allocator.release_kernel_buffers()
    print(int(freed), round(grown - before, 2), round(grown - allocator.heap_in_use_mib(), 2))
    """
)


def _cpu_flags() -> set[str]:
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
@pytest.mark.parametrize("isa", ["AVX2", "AVX512"])
def test_the_matrix_product_buffers_of_ended_threads_come_back(isa):
    # What MKL keeps after a thread ends depends on the CPU as well as on its kernels (grown
    # over 40 threads, seen: 9.0 MiB with AVX-512 on an Intel CPU, 0.05-1.0 on AMD ones with
    # avx512f too; 0.1-1.0 with AVX2). So the test asks that what stayed comes back, and the
    # main thread's buffers, kept on every machine (0.7-4.5 MiB seen, 0 without the call), too.
    if isa == "AVX512" and "avx512f" not in _cpu_flags():
        pytest.skip("this CPU has no AVX-512")
    env = {**os.environ, "MKL_ENABLE_INSTRUCTIONS": isa}
    out = subprocess.run(
        [sys.executable, "-c", THREADS],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    ).stdout.split()
    freed, grown, back = int(out[0]), float(out[1]), float(out[2])
    if not freed:
        pytest.skip("this torch has no MKL")
    assert back > 0.9 * grown
    assert back > 0.5  # the main thread's buffers go too
