"""What a local vector index asks of the operating system to search faster: BLAS on one thread,
file pages mapped at once, a graph copied into huge pages. Each does nothing where the system cannot
(off Linux, an older kernel, no threadpoolctl); what each saves is in docs/performance.md.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy.typing as npt

__all__ = ["HUGE_COPY_BYTES", "huge_copy", "huge_pages_on_request", "one_blas_thread", "populate"]

MADV_POPULATE_READ = 22  # Linux 5.14 on
MADV_POPULATE_WRITE = 23  # Linux 5.14 on

_BLAS: list[Any] = []  # [threadpoolctl controller or None], made on first use


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with BLAS on one thread (restored after), where threadpoolctl is installed.

    Why: a single query's matrix-vector product is memory-bound; a second BLAS thread waiting for a
    busy core costs far more than it saves."""
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:  # pragma: no cover - depends on the install
            _BLAS.append(None)
        else:
            _BLAS.append(ThreadpoolController())
    if _BLAS[0] is None:
        yield
        return
    with _BLAS[0].limit(limits=1, user_api="blas"):
        yield


def populate(array: npt.NDArray[Any] | None = None, path: Path | None = None) -> bool:
    """Fault every page of a read-only file mapping into this process's page tables now: ``array``'s
    (a memory-mapped array) or every mapping of the file ``path`` (one a library mapped, found in
    /proc/self/maps), with Linux's ``MADV_POPULATE_READ``, so that searches do not fault their rows
    in one by one. False (nothing done) off Linux, on a kernel without it, or for a mapping larger
    than half the memory."""
    if sys.platform != "linux":
        return False
    ranges = []
    if array is not None and array.nbytes:
        ranges.append((array.ctypes.data, array.ctypes.data + array.nbytes))
    if path is not None:
        with contextlib.suppress(OSError):
            name = os.path.realpath(path)  # as the kernel names the file
            for line in Path("/proc/self/maps").read_text().splitlines():
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5] == name:
                    first, last = fields[0].split("-")
                    ranges.append((int(first, 16), int(last, 16)))
    try:
        half = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        return False
    if not ranges or sum(high - low for low, high in ranges) > half:
        return False
    import ctypes

    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = True
    for low, high in ranges:
        start = low - low % mmap.PAGESIZE
        done = madvise(start, high - start, MADV_POPULATE_READ) == 0 and done  # EINVAL before Linux 5.14
    return done


HUGE_COPY_BYTES = 64 << 20  # a saved graph from this size on is searched from a copy in huge pages
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def huge_pages_on_request() -> bool:
    """Whether this system backs memory advised ``MADV_HUGEPAGE`` with 2 MB pages (Linux, THP not "never")."""
    if sys.platform != "linux" or not hasattr(mmap, "MADV_HUGEPAGE"):
        return False
    try:
        return any(f"[{mode}]" in THP_SETTING.read_text() for mode in ("always", "madvise"))
    except OSError:
        return False


def huge_copy(path: Path) -> mmap.mmap | None:
    """The bytes of file ``path`` in anonymous memory backed by 2 MB pages (Linux transparent huge
    pages), for a read-only library to map instead of the file; None (nothing done) off Linux, where
    the kernel gives no huge pages on request, for a file under ``HUGE_COPY_BYTES`` or over a quarter
    of the free memory, or when the file cannot be read whole.

    Why: a graph walk is a chain of reads at random places; through 4 kB pages nearly each one misses
    the TLB as well as the cache."""
    if not huge_pages_on_request():
        return None
    try:
        size = path.stat().st_size
        if size < HUGE_COPY_BYTES or size > os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") // 4:
            return None
        buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError):
        return None
    buffer.madvise(mmap.MADV_HUGEPAGE)
    with contextlib.suppress(OSError):  # every page at once (Linux 5.14+): ~3x faster than faulting them in
        buffer.madvise(MADV_POPULATE_WRITE)
    view, done = memoryview(buffer), 0
    try:
        with open(path, "rb") as f:
            while done < size and (n := f.readinto(view[done:])):
                done += n
    except OSError:
        done = -1
    finally:
        view.release()
    if done != size:  # replaced or cut short meanwhile: the caller maps the file as before
        buffer.close()
        return None
    return buffer
