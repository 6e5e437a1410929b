"""The llvm back end's OpenMP drivers: a kernel split over the cores by the OpenMP runtime the
C++ back end uses (why OpenMP, and how the runtime calls a driver:
:mod:`.llvm_threads`).

A driver is runtime glue compiled into the module, not a rendering of the kernel's plan: the
same code for every kernel (only the kernel it calls differs), the other side of
:mod:`.llvm_threads`' calls (the context's layout, ``CTX_FIELDS``, and how a chunk reports its
error are agreed between the two, so they live side by side).

A kernel takes a range ``[start, stop)`` of its parallel loop. For each kernel the module gets
a driver, ``<kernel>_omp(ctx, threads)``, that calls libgomp's ``GOMP_parallel`` with a body
in which every thread takes chunks of the range from a shared counter (``atomicrmw add``)
until none is left, each chunk a call of the kernel; the first failing chunk in the loop's
order is the call's error.

The context is seven i64 (the runtime's ``CTX_FIELDS``): the arguments' array, the sizes' array, the
results' array (two i64 a chunk: code, value), the loop's size, the chunk size, the number of
chunks, and the counter.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

I8P = ir.IntType(8).as_pointer()
I32, I64 = ir.IntType(32), ir.IntType(64)


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
