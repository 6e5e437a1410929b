"""The llvm back end's kernels split over the cores by the OpenMP runtime the C++ back end uses.

A kernel takes a range ``[start, stop)`` of its parallel loop. For each kernel the module gets
a driver, ``<kernel>_omp(ctx, threads)``, that calls libgomp's ``GOMP_parallel`` with a body
in which every thread takes chunks of the range from a shared counter (``atomicrmw add``)
until none is left, each chunk a call of the kernel; the first failing chunk in the loop's
order is the call's error. One ctypes call (which releases the GIL) runs the whole kernel.

Why OpenMP and not Python threads: the C++ back end (and PyTorch) leave OpenMP worker threads
spinning for a while after each parallel region; Python threads started next compete with them
for the cores (on 2 cores a kernel right after a C++ one got about half the second core). The
same runtime's threads pick the next region up instead. The runtime is the process's
``libgomp`` (the one g++'s ``-fopenmp`` links, which the C++ back end's libraries load), found
with ``ctypes.util.find_library``; where there is none, the back end keeps its thread pool.

The context is seven i64: the arguments' array, the sizes' array, the results' array (two i64
a chunk: code, value), the loop's size, the chunk size, the number of chunks, and the counter.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Any

from llvmlite import ir

I8P = ir.IntType(8).as_pointer()
I32, I64 = ir.IntType(32), ir.IntType(64)
CTX_FIELDS = 7

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


def gomp_function(name: str, restype: Any) -> Any:
    """A function of the process's libgomp (which :func:`gomp_library` found), for ctypes."""
    f = getattr(_gomp, name)
    f.restype, f.argtypes = restype, []
    return f


def max_threads() -> int | None:
    """The runtime's ``omp_get_max_threads()``: the team a ``parallel`` region of the C++
    back end (and PyTorch's) gets, which follows ``OMP_NUM_THREADS``, ``torch.set_num_threads``
    and the cores this process may run on; None without a libgomp."""
    if gomp_library() is None:
        return None
    return int(gomp_function("omp_get_max_threads", ctypes.c_int)())


def add_driver(m: ir.Module, kernel: ir.Function) -> ir.Function:
    """``<kernel>_omp(i64* ctx, i32 threads)``: the kernel's range split in chunks over an
    OpenMP team (see the module docstring)."""
    i64p = I64.as_pointer()
    gomp = m.globals.get("GOMP_parallel")
    if gomp is None:
        body_ty = ir.FunctionType(ir.VoidType(), [I8P])
        gomp = ir.Function(
            m,
            ir.FunctionType(ir.VoidType(), [body_ty.as_pointer(), I8P, I32, I32]),
            "GOMP_parallel",
        )
    body = ir.Function(m, ir.FunctionType(ir.VoidType(), [I8P]), f"{kernel.name}_omp_body")
    body.linkage = "internal"
    b = ir.IRBuilder(body.append_basic_block("entry"))
    ctx = b.bitcast(body.args[0], i64p)

    def field(k: int) -> Any:
        return b.load(b.gep(ctx, [ir.Constant(I64, k)]))

    args = b.inttoptr(field(0), I8P.as_pointer())
    sizes = b.inttoptr(field(1), i64p)
    results = b.inttoptr(field(2), i64p)
    outer, step, chunks = field(3), field(4), field(5)
    counter = b.gep(ctx, [ir.Constant(I64, 6)])
    loop = body.append_basic_block("take")
    run = body.append_basic_block("run")
    done = body.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    c = b.atomic_rmw("add", counter, ir.Constant(I64, 1), "monotonic")
    b.cbranch(b.icmp_signed("<", c, chunks), run, done)
    b.position_at_end(run)
    lo = b.mul(c, step)
    hi = b.add(lo, step)
    hi = b.select(b.icmp_signed("<", hi, outer), hi, outer)
    slot = b.gep(results, [b.mul(c, ir.Constant(I64, 2))])
    value = b.gep(slot, [ir.Constant(I64, 1)])
    code = b.call(kernel, [args, sizes, value, lo, hi])
    b.store(code, slot)
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()

    driver = ir.Function(m, ir.FunctionType(ir.VoidType(), [i64p, I32]), f"{kernel.name}_omp")
    b = ir.IRBuilder(driver.append_basic_block("entry"))
    b.call(gomp, [body, b.bitcast(driver.args[0], I8P), driver.args[1], ir.Constant(I32, 0)])
    b.ret_void()
    return driver
