"""Running the llvm back end's kernels over the cores (the runtime half of ``backends/llvm``).

A kernel takes a range ``[start, stop)`` of its parallel loop. A kernel with such a loop and
enough work runs on every core: its loop's range is split into the schedule's chunks (the LLVM
family's ``chunks_per_thread`` a thread, none below the grain), which the threads take in turn,
so a core that another process holds for a while costs a chunk, not half the kernel; the first
failing chunk's error (in the loop's order) is the call's.

The threads are an OpenMP team where the process has a libgomp: the module then holds a driver
per kernel (:func:`.llvm_omp.add_driver`), and one ctypes call (which releases the
GIL) runs the whole kernel. Why OpenMP and not Python threads: the C++ back end (and PyTorch)
leave OpenMP worker threads spinning for a while after each parallel region; Python threads
started next compete with them for the cores (on 2 cores a kernel right after a C++ one got
about half the second core). The same runtime's threads pick the next region up instead. The
runtime is the process's ``libgomp`` (the one g++'s ``-fopenmp`` links, which the C++ back end's
libraries load), found with ``ctypes.util.find_library``; where there is none, the kernels'
chunks go to a pool of Python threads, each chunk a ctypes call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fir.ir.types import dims_mul

from ..plan import KernelPlan
from ..plan.instructions import LoopBegin
from ..plan.schedule import LLVM, chunks

CTX_FIELDS = 7  # the i64 of a driver's context (:mod:`.llvm_omp` says which)

_gomp: Any = None
_gomp_checked = False
_lock = threading.Lock()


def gomp_library() -> str | None:
    """The path of the process's libgomp, made visible to MCJIT's symbol resolution; None
    where there is none."""
    global _gomp, _gomp_checked
    with _lock:
        if not _gomp_checked:
            _gomp_checked = True
            import llvmlite.binding as llvm

            # the soname first (dlopen's search, a few ms); find_library runs ldconfig or the
            # compiler (0.2 s), so it is only the fallback
            for find in (lambda: "libgomp.so.1", lambda: ctypes.util.find_library("gomp")):
                name = find()
                if name is None:
                    continue
                try:
                    _gomp = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
                    llvm.load_library_permanently(name)
                    break
                except (OSError, RuntimeError):
                    _gomp = None
        return None if _gomp is None else str(_gomp._name)


def max_threads() -> int | None:
    """The runtime's ``omp_get_max_threads()``: the team a ``parallel`` region of the C++
    back end (and PyTorch's) gets, which follows ``OMP_NUM_THREADS``, ``torch.set_num_threads``
    and the cores this process may run on; None without a libgomp."""
    return None if gomp_library() is None else int(_omp_max_threads()())


def _omp_max_threads() -> Any:
    """libgomp's ``omp_get_max_threads`` as a ctypes function (where there is a libgomp)."""
    f = _gomp.omp_get_max_threads
    f.restype, f.argtypes = ctypes.c_int, []
    return f


def forced_threads() -> int:
    return int(os.environ.get("FIR_LLVM_THREADS", "0") or 0)


def cores() -> int:
    """The cores this process may run on. Not ``os.cpu_count()``, which counts the machine's
    even where the process's CPU set (a container's) is smaller."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def threads() -> int:
    """The threads a kernel's parallel loop is split over: ``FIR_LLVM_THREADS`` if set, else the
    OpenMP runtime's team size, read at each call as the C++ back end's regions do (it follows
    ``OMP_NUM_THREADS`` and ``torch.set_num_threads``), else the cores this process may run on.
    A team larger than PyTorch's (``FIR_LLVM_THREADS=64`` on 16 cores) leaves the extra threads
    spinning over PyTorch's BLAS after each kernel."""
    forced = forced_threads()
    if forced > 0:
        return forced
    team = max_threads()
    return max(1, team) if team is not None else cores()


def uses_omp() -> bool:
    """Whether kernels split their parallel loop over an OpenMP team (more than one core, or
    threads asked for, and a libgomp to call), which gives each kernel a driver in the module."""
    return (forced_threads() or cores()) > 1 and gomp_library() is not None


# a tiled kernel's chunks start on a multiple of this many iterations of its parallel loop
# where the loop has a block for each chunk: its tiles start at its chunk's start, and its
# turned tiles copy 8 x 8 blocks through registers, the rows past the last whole block one
# element at a time. Chunks of 46 rows (2896 over 64 chunks: 16 threads) left 6 rows of every
# tile so. Other kernels keep chunks of equal length (rounding up would cost them balance:
# 600 rows in chunks of 16 instead of 10 is 38 chunks instead of 60 on 16 threads)
CHUNK_ALIGN = 8


def chunk_step(outer: int, n: int, align: int = 1) -> int:
    """The iterations of each of (about) ``n`` chunks of a parallel loop of ``outer``: a
    multiple of ``align`` where the loop has a block of ``align`` for each chunk."""
    step = -(-outer // n)
    if align > 1 and outer >= align * n:
        step = -(-step // align) * align
    return step


class _Fn:
    """One kernel: its entry point and OpenMP driver (None: no team), the size of its parallel
    loop and its work, and sets of argument arrays. A call takes a set, copies the pointers and
    sizes in and passes the arrays as they are (no ``argtypes`` conversions: a tiny kernel's
    call took 4 us through them against the C++ back end's 0.85), then gives the set back; a
    call from another thread at the same time makes a set of its own."""

    def __init__(self, address: int, driver: int | None, plan: KernelPlan) -> None:
        p = ctypes.c_void_p
        fn: Any = ctypes.CFUNCTYPE(ctypes.c_int64)(address)
        fn.argtypes = None  # arrays, a byref and c_int64 values: passed as they are
        self.fn = fn
        self.omp: Any = (
            None if driver is None else ctypes.CFUNCTYPE(None, p, ctypes.c_int32)(driver)
        )
        self.nargs, self.nsizes = len(plan.args), len(plan.sizes)
        outer = next((i for i in plan.instrs if isinstance(i, LoopBegin) and i.parallel), None)
        self.outer = outer.size if outer is not None else None  # Dim, or no parallel loop
        tiled = outer is not None and plan.tile is not None and outer.var in plan.tile
        self.align = CHUNK_ALIGN if tiled else 1  # of the chunks (chunk_step)
        self.work = dims_mul((plan.numel, plan.rnumel)) if plan.reduction else plan.numel
        self.sizes_of = plan.sizes
        # list.pop and list.append are atomic: taking and giving back a set needs no lock
        self.free: list[tuple[Any, Any, Any, Any]] = [self.new_set()]
        self.size_fns: dict[Any, Callable[[dict[str, int]], int]] = {}
        # a static kernel's chunk count by team size (sizes cannot change it)
        self.split: dict[int, int] = {}

    def new_set(self) -> tuple[Any, Any, Any, Any]:
        """Pointer array, size array, error value and a reference to it."""
        err = ctypes.c_int64(0)
        return (
            (ctypes.c_uint64 * max(self.nargs, 1))(),
            (ctypes.c_int64 * max(self.nsizes, 1))(),
            err,
            ctypes.byref(err),
        )

    def arrays(self, args: Sequence[int], sizes: Sequence[int]) -> tuple[Any, Any]:
        a = (ctypes.c_uint64 * max(self.nargs, 1))(*args)
        return a, (ctypes.c_int64 * max(self.nsizes, 1))(*sizes)

    def run(
        self, args: Sequence[int], sizes: Sequence[int], start: Any = None, stop: Any = None
    ) -> tuple[int, int]:
        """The kernel over ``[start, stop)`` of its parallel loop (the whole loop by default)."""
        try:
            arrays = self.free.pop()
        except IndexError:  # another thread holds the set
            arrays = self.new_set()
        pointers, values, err, err_ref = arrays
        if self.nargs:
            pointers[:] = args
        if self.nsizes:
            values[:] = sizes
        first = _WHOLE[0] if start is None else ctypes.c_int64(start)
        last = _WHOLE[1] if stop is None else ctypes.c_int64(stop)
        code = self.fn(pointers, values, err_ref, first, last)
        failed = err.value if code else 0
        self.free.append(arrays)
        return code, failed

    def value(self, d: Any, sizes: Sequence[int]) -> int:
        """A size of the kernel (an int or an expression of its size symbols) for ``sizes``."""
        if isinstance(d, int):
            return d
        fn = self.size_fns.get(d)
        if fn is None:
            from .compiled_program import size_function

            fn = self.size_fns[d] = size_function(d)
        return int(fn(dict(zip(self.sizes_of, sizes))))


# a whole parallel loop: its range from 0 to past any size
_WHOLE = (ctypes.c_int64(0), ctypes.c_int64(1 << 62))


class SplitKernels:
    """A program's compiled kernels, ``call`` as the C++ back end's, each run over the threads
    as the module docstring says. ``address(name, driver)``: the entry point of kernel ``name``
    (of its OpenMP driver where ``driver``)."""

    def __init__(
        self, kernels: list[KernelPlan], address: Callable[[str, bool], int], omp: bool
    ) -> None:
        self.threads = threads()
        self.forced = forced_threads() > 0
        self.fns = {
            k.name: _Fn(address(k.name, False), address(k.name, True) if omp else None, k)
            for k in kernels
        }
        self.team: Any = _omp_max_threads() if omp else None  # read at each call
        self.pool: ThreadPoolExecutor | None = None

    def names(self) -> list[str]:
        return list(self.fns)

    def call(self, name: str, args: Sequence[int], sizes: Sequence[int] = ()) -> tuple[int, int]:
        f = self.fns[name]
        if len(args) != f.nargs or len(sizes) != f.nsizes:
            raise ValueError(
                f"kernel {name} takes {f.nargs} pointer(s) and {f.nsizes} size(s), "
                f"got {len(args)} and {len(sizes)}"
            )
        team = self.threads
        if f.omp is not None and not self.forced:
            team = max(1, int(self.team()))
        if f.outer is None or team == 1:
            return f.run(args, sizes)
        n = f.split.get(team, 0) if not f.nsizes else 0
        if n == 0:
            n = chunks(LLVM, team, f.value(f.outer, sizes), f.value(f.work, sizes))
            if not f.nsizes:
                f.split[team] = n
        if n <= 1:  # a small kernel: one call on this thread, no team
            return f.run(args, sizes)
        outer = f.value(f.outer, sizes)
        step = chunk_step(outer, n, f.align)
        n = -(-outer // step)
        if f.omp is not None:
            return self._call_omp(f, args, sizes, outer, step, n, team)
        ranges = iter(enumerate(range(0, outer, step)))
        results: dict[int, tuple[int, int]] = {}
        lock = threading.Lock()

        def drain() -> None:  # take the next chunk until none is left
            while True:
                with lock:
                    k, lo = next(ranges, (-1, 0))
                if k < 0:
                    return
                results[k] = f.run(args, sizes, lo, min(lo + step, outer))

        workers = min(team, n) - 1  # and this thread
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="fir-llvm")
        futures = [self.pool.submit(drain) for _ in range(workers)]
        drain()
        for fu in futures:
            fu.result()
        return next((results[k] for k in sorted(results) if results[k][0]), (0, 0))

    def _call_omp(
        self,
        f: _Fn,
        args: Sequence[int],
        sizes: Sequence[int],
        outer: int,
        step: int,
        chunks: int,
        team: int,
    ) -> tuple[int, int]:
        """The kernel's range in ``chunks`` chunks over an OpenMP team, in one call."""
        a, s = f.arrays(args, sizes)
        results = (ctypes.c_int64 * (2 * chunks))()
        ctx = (ctypes.c_int64 * CTX_FIELDS)(
            ctypes.addressof(a), ctypes.addressof(s), ctypes.addressof(results), outer, step,
            chunks, 0,
        )  # fmt: skip
        # the whole team even where there are fewer chunks (the idle threads find none left):
        # a region smaller than the last one makes libgomp shrink its pool and grow it again at
        # the next full region, PyTorch's BLAS ones included. With teams of min(threads,
        # chunks), T5 on 16 cores took 30.6 ms against the C++ back end's 15.3 (whose regions
        # always take the whole team); with the whole team 14.0 against 13.1
        f.omp(ctypes.addressof(ctx), team)
        for k in range(chunks):  # the first failing chunk in the loop's order
            if results[2 * k]:
                return results[2 * k], results[2 * k + 1]
        return 0, 0
