"""Memory for compiled programs: large buffers from huge pages, recycled from call to call.

Where the time of a memory-bound program goes, on the 2-core benchmark machine: a softmax over
4096 x 2048 f32 runs its kernel in 2.8 ms, but a fresh 32 MiB output costs more than that again.
glibc serves buffers under 32 MiB from its heap, reused from call to call, but gives each larger
one a fresh mapping (its mmap threshold stops growing at 32 MiB), whose first writer then takes
8,192 page faults, each zeroing a 4 KiB page: allocating and filling 32 MiB costs 6.4 ms through
``torch.empty``, 2.2 ms from a fresh mapping of 2 MiB pages, 1.2 ms from memory already mapped.

So buffers of :data:`LARGE_BUFFER` bytes and more come from a mapping of their own (2 MiB pages
where the kernel gives them), and when the last tensor that views one goes (an output the caller
dropped, an intermediate the program freed), its mapping returns to a pool instead of to the
system; the next buffer of that size takes it back, already mapped. The pool keeps at most
:func:`pool_limit` bytes (``FIR_BUFFER_POOL_MB``, default 1024; 0 turns it off); a mapping that
does not fit is unmapped. A buffer is reused only once no tensor views it: its memory is never
shared between live tensors.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
from typing import Any

import torch

HUGE_PAGE = 2 << 20
LARGE_BUFFER = 32 << 20
_ITEMSIZE = {d: torch.empty(0, dtype=d).element_size() for d in (torch.float32, torch.float64)}


def pool_limit() -> int:
    """Bytes of unused mappings the pool may keep (``FIR_BUFFER_POOL_MB``, default 1 GiB)."""
    raw = os.environ.get("FIR_BUFFER_POOL_MB", "1024")
    try:
        return max(0, int(raw)) << 20
    except ValueError:
        return 1 << 30


class _Pool:
    """Unused mappings by size. Returns come from whatever thread drops the last view."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.free: dict[int, list[tuple[mmap.mmap, int]]] = {}
        self.bytes = 0
        self.reused = 0  # counters, for tests and benchmarks
        self.mapped = 0

    def take(self, size: int) -> tuple[mmap.mmap, int] | None:
        with self.lock:
            found = self.free.get(size)
            if not found:
                return None
            self.bytes -= size
            self.reused += 1
            return found.pop()

    def give(self, size: int, mapping: mmap.mmap, address: int) -> None:
        with self.lock:
            if self.bytes + size > pool_limit():
                return  # the last reference goes with the caller: the mapping is unmapped
            self.free.setdefault(size, []).append((mapping, address))
            self.bytes += size

    def clear(self) -> None:
        with self.lock:
            self.free.clear()
            self.bytes = 0


POOL = _Pool()
_BLOCK_TYPES: dict[int, type[Any]] = {}  # dynamic ctypes array types (see _block_type)


def _block_type(size: int) -> type[Any]:
    """A ctypes array type of ``size`` bytes whose instances give their memory back to the
    pool when they are collected. ``torch.frombuffer`` keeps the instance alive for as long as
    any tensor views its memory, so its collection means that no tensor does any more."""
    t = _BLOCK_TYPES.get(size)
    if t is None:

        def __del__(self: Any) -> None:
            try:  # noqa: SIM105 (contextlib may be gone at shutdown too)
                POOL.give(size, self._mapping, self._address)
            except Exception:  # interpreter shutdown: the module's globals may be gone
                pass

        t = type(f"Block{size}", (ctypes.c_char * size,), {"__del__": __del__})
        _BLOCK_TYPES[size] = t
    return t


def _mapping(size: int) -> tuple[mmap.mmap, int] | None:
    """A fresh mapping of ``size`` bytes starting on a 2 MiB boundary (so that the kernel can
    back it with huge pages), and that start."""
    try:
        m = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        m.madvise(mmap.MADV_HUGEPAGE)
    except (OSError, ValueError):
        return None
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    POOL.mapped += 1
    return m, base + (-base) % HUGE_PAGE


def allocate(
    elements: int, dtype: torch.dtype, shape: tuple[int, ...] | None = None, device: str = "cpu"
) -> torch.Tensor:
    """``elements`` uninitialised elements of ``dtype``, flat or in ``shape``, on ``device``
    (a GPU's memory comes from PyTorch's caching allocator, which already recycles it)."""
    if device != "cpu":
        return torch.empty(shape if shape is not None else elements, dtype=dtype, device=device)
    itemsize = _ITEMSIZE.get(dtype) or torch.empty(0, dtype=dtype).element_size()
    nbytes = elements * itemsize
    if nbytes < LARGE_BUFFER or not hasattr(mmap, "MADV_HUGEPAGE"):
        return torch.empty(shape if shape is not None else elements, dtype=dtype)
    size = -(-nbytes // HUGE_PAGE) * HUGE_PAGE  # a size class: whole huge pages
    got = POOL.take(size) or _mapping(size)
    if got is None:
        return torch.empty(shape if shape is not None else elements, dtype=dtype)
    m, address = got
    block = _block_type(size).from_address(address)
    block._mapping, block._address = m, address  # the block keeps the mapping alive
    flat = torch.frombuffer(block, dtype=dtype, count=elements)
    return flat.view(shape) if shape is not None else flat
