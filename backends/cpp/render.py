"""Kernel plans -> one C++17 translation unit (OpenMP for threads and vectorisation).

Each kernel is ``extern "C" int64_t NAME(void* const* args, const int64_t* sizes, int64_t*
error_value)``: ``args[k]`` points at element 0 of the storage of the plan's ``args[k]``,
``sizes[k]`` is the value of the plan's ``sizes[k]``; it returns 0, or the code of the first
check that failed (the plan's error code, or :data:`DIVISION_BY_ZERO`) with the offending value
in ``*error_value``. A failed check skips the rest of its loop iteration, so nothing is read out
of bounds, and no kernel returns from inside a parallel region.

An instruction is one table lookup (:mod:`.ops`, walked by :mod:`.emit`); how each loop is
written (threads, lanes, interchange, tiles) is :mod:`.loops`.
"""

from __future__ import annotations

from fir.backends.plan.kernel import KernelPlan
from fir.backends.plan.lowering import lower
from fir.backends.plan.program import ProgramPlan, shared_storage
from fir.ir.types import dim_str

from .emit import DIVISION_BY_ZERO, RESERVED
from .loops import KernelWriter
from .ops import NATIVE_OPS, STORAGE
from .prelude import PRELUDE

__all__ = ["DIVISION_BY_ZERO", "kernel_symbol", "render_kernel", "render_program"]

# names a kernel's symbol must not take: libm and libc functions the library calls (calls in
# the library bind to its own symbols first, so a kernel named ``expf`` would be called by
# every exp), and the prelude's names
_LIBRARY_WORDS = (
    "exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
    "acosh atanh erf erfc pow atan2 hypot sqrt floor ceil trunc rint fabs fmod copysign "
    "lgamma_r memcpy memset memmove malloc free abort "
)
_LIBRARY = set(_LIBRARY_WORDS.split())


def kernel_symbol(name: str) -> str:
    """The exported symbol of the kernel the plan names ``name``: the name itself, unless it
    would clash with C++ or a library function (then ``fir_kernel_`` + name)."""
    clash = name in RESERVED or name in _LIBRARY or name.removesuffix("f") in _LIBRARY
    if clash or name.lower().startswith(("fir_", "omp_", "gomp_", "_")):
        return "fir_kernel_" + name
    return name


def render_program(plan: ProgramPlan) -> str:
    """The translation unit of every kernel of ``plan``."""
    kernels = [render_kernel(k, shared_storage(plan, k)) for k in plan.kernels()]
    return "\n".join([PRELUDE, *kernels])


def render_kernel(plan: KernelPlan, aliased: frozenset[str] = frozenset()) -> str:
    """One kernel's function. ``aliased``: arguments that share storage with another argument
    of the kernel (an in-place result): they get no ``__restrict``."""
    plan = lower(plan, NATIVE_OPS)
    w = KernelWriter(plan)
    for k, a in enumerate(plan.args):
        ctype = STORAGE[a.dtype]
        const = "" if a.written else "const "
        restrict = "" if a.name in aliased else " __restrict"
        name = w.names("buffer", a.name)
        w.emit(f"{const}{ctype}*{restrict} {name} = static_cast<{const}{ctype}*>(args[{k}]);")
    for k, s in enumerate(plan.sizes):
        w.emit(f"const int64_t {w.names('size', s)} = sizes[{k}];")
    if w.fails:
        w.emit("int64_t fir_err = 0, fir_errv = 0;")
    w.kernel_body()
    if w.uses_done:
        w.emit("fir_done:;")
    if w.fails:
        w.emit("*error_value = fir_errv;")
        w.emit("return fir_err;")
    else:
        w.emit("(void)error_value;")
        w.emit("return 0;")
    members = ", ".join("%" + m for m in plan.members)
    space = dim_str(plan.numel)
    if plan.reduction:
        space += f"; {dim_str(plan.rnumel)}"
    head = [
        f"// kernel {plan.name} over ({space}): {members}",
        f'extern "C" {"FIR_TILED " if w.tile_gathers else ""}int64_t {kernel_symbol(plan.name)}('
        "void* const* args, const int64_t* sizes, "
        "int64_t* error_value) {",
    ]
    return "\n".join(head + w.lines + ["}", ""])
