"""Kernel plans as LLVM IR, built with ``llvmlite.ir`` (no IR text assembled by hand).

One function per plan, ``i64 NAME(i8** args, i64* sizes, i64* error_value, i64 start, i64
stop)``: the C++ back end's arguments, and the range of the parallel (outermost pointwise) loop
this call runs, so that the runtime can split a kernel over threads. Each loop keeps its
counter in a stack slot (``alloca`` in the entry block, which ``mem2reg`` turns into registers),
accumulators likewise; LLVM's loop vectoriser then widens the innermost loops (a pointwise loop
of f32 becomes ``<8 x float>`` on AVX2, ``<16 x float>`` where it prefers 512-bit vectors).

The loops run as the schedule says (:mod:`fir.backends.plan.schedule`, the ``LLVM`` family;
this module decides none of it): the plan's nest, except where another order of the same
iterations reads memory better (any order of a pointwise nest is legal; a reduction's own order
is kept per accumulator, or changed within rounding where said):

* a pointwise nest in the schedule's order (a loop that walks memory in order innermost);
* the schedule's tile pair (a transposed read) in square tiles;
* a column reduction (``x.sum(0)``) in blocks of outputs, the reduction loop outside a loop
  over the block, accumulators in block arrays (:meth:`_Kernel.on_columns`);
* a float sum or product reassociates (``reassoc nsz``, ``FIR_LLVM_REASSOC``) and max/min are
  ``llvm.maximum``/``llvm.minimum``, so row reductions vectorise; Welford and argmax, which LLVM
  cannot vectorise as reductions, run in lanes with a state each (:meth:`_Kernel.row_lanes`).

f32 math functions are FIR's own branch-free code (:mod:`.vecmath`, errors in
``docs/llvm-math.md``), so loops that call them vectorise; f64 ones are LLVM intrinsics or libm
calls (digamma and erfinv excepted). An op the back end does not cover would raise
:class:`LLVMRenderError` (``UNSUPPORTED``, empty today).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial, reduce
from typing import Any

import llvmlite.ir as ir
import sympy
from fir.backends.cpu_tuning import LLVM_TUNED
from fir.backends.plan import KernelPlan, op_forms
from fir.backends.plan import instructions as ins
from fir.backends.plan.index_text import nonnegative
from fir.backends.plan.loop_nest import Columns, Lanes, NestWalker, Run, Span, Turn, loop_nest
from fir.backends.plan.loop_tree import Item, defines, has_loops, walk
from fir.backends.plan.lowering import defined, lower, lower_steps
from fir.backends.plan.magnitudes import magnitude, magnitudes
from fir.backends.plan.schedule import (
    COLUMN_BLOCK,
    independent,
    schedule,
)
from fir.ir.accumulators import Merge, merge, state, update
from fir.ir.dtypes import DType, literal_value, saturating_type
from fir.ir.errors import FirError
from fir.ir.graph import Literal
from fir.ir.symbolic import FloorDiv, Modulo

from ..runtime.llvm_omp import add_driver
from .vecmath import MATH_F32, MATH_F64, bounded_emitter

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
# fast-math flags on a float sum or product's accumulator update: ``reassoc`` lets the loop
# vectoriser keep one partial sum per lane (the order of the additions changes, the result
# within rounding); ``nsz`` lets it start the lanes at +0.0. Never ``nnan``/``ninf``: NaN and
# infinities propagate as in the interpreter. Which kinds take them is the schedule's
# (``reassociates``: sums and products, unless FIR_LLVM_REASSOC=0 keeps the sequential order).
REASSOC_FLAGS = ("reassoc", "nsz")


UNSUPPORTED: tuple[str, ...] = ()  # digamma and erfinv: vecmath.py, f32 and f64


def native(op: str, dtype: DType) -> bool:
    """Whether this renderer writes ``op`` of ``dtype`` operands itself: of the ops
    :mod:`fir.backends.plan.lowering` can write with others, an f32 function of
    :mod:`.vecmath` (``sigmoid``), whose one branch-free sequence beats the composition."""
    return op in MATH_F32 and (dtype.compute_dtype is DType.F32 or op in MATH_F64)


def _step_native(op: str, dtype: DType) -> bool:
    """:func:`native` for an accumulator's steps, which also write float max/min themselves:
    ``llvm.maximum``/``minimum`` propagate NaN like torch and are associative as they are, so
    the loop vectoriser takes them as a reduction without fast-math flags."""
    return native(op, dtype) or (op in ("maximum", "minimum") and dtype.is_float)


# float ops that are one LLVM intrinsic; the other math functions (op_forms.MATH1, MATH2) call
# libm, but fmod: ``frem`` (FLOAT_OPS) is libm's fmod, and the loop vectoriser knows it
INTRINSICS = {
    "abs": "llvm.fabs", "exp": "llvm.exp", "exp2": "llvm.exp2", "log": "llvm.log",
    "log2": "llvm.log2", "log10": "llvm.log10", "sqrt": "llvm.sqrt", "sin": "llvm.sin",
    "cos": "llvm.cos", "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc",
    "round": "llvm.rint", "pow": "llvm.pow", "copysign": "llvm.copysign",
    "maximum": "llvm.maximum", "minimum": "llvm.minimum",  # accumulator steps' (_step_native)
}  # fmt: skip
# op -> the IRBuilder method that writes it: of float operands; of integers (where unsigned
# ones differ, "signed unsigned"), the plan's tdiv, trem (floordiv and mod are lowered) and
# shifts (shl and shr are) included; of bools, where they differ from an i1's
FLOAT_OPS = {op: "f" + op for op in ("add", "sub", "mul", "div", "neg")} | {"fmod": "frem"}
INT_OPS = {
    "add": "add", "sub": "sub", "mul": "mul", "neg": "neg", "bitwise_not": "not_",
    "bitwise_and": "and_", "bitwise_or": "or_", "bitwise_xor": "xor",
    "tdiv": "sdiv udiv", "trem": "srem urem", "shl_in_range": "shl", "shr_in_range": "ashr lshr",
}  # fmt: skip
BOOL_OPS = {op: INT_OPS[same] for op, same in op_forms.ON_BOOLS.items()}  # max, min: lowered


class _AccessGroup(ir.values.MDValue):
    """``distinct !{}``: an access group (the memory accesses of one loop whose iterations are
    independent). llvmlite's metadata nodes are uniqued and never distinct, and two groups must
    stay two nodes (compared by identity, not by their empty operands)."""

    def descr(self, buf: list[str]) -> None:
        buf += ("distinct !{}\n",)

    __eq__ = object.__eq__
    __hash__ = object.__hash__


class LLVMRenderError(FirError):
    """A plan this back end cannot write (an op it does not cover yet)."""


# the type values of each dtype are computed in (f16 and bf16 in f32, bool in i1), and what a
# buffer of it holds
VALUE_TYPE: dict[DType, ir.Type] = {
    d: {DType.F32: F32, DType.F64: F64}.get(d.compute_dtype) or ir.IntType(8 * d.itemsize)
    for d in DType
} | {DType.BOOL: I1}
STORAGE_TYPE = VALUE_TYPE | {DType.BOOL: I8, DType.F16: F16, DType.BF16: I16}


class _Kernel(NestWalker):
    def __init__(
        self,
        module: ir.Module,
        plan: KernelPlan,
        symbol: str,
        aliased: frozenset[str] | None = None,
    ) -> None:
        self.m = module
        # how the loops run (the renderer decides none of it), with this machine's measured
        # choices
        self.schedule = schedule(plan, LLVM_TUNED)
        # the arguments that share storage with another (an in-place result); None: unknown,
        # any two may
        self.aliased = aliased
        # loads and stores a loop's access group may hold (by id): those of buffers and of
        # per-lane stack arrays (each iteration its own element)
        self.accesses: set[int] = set()
        self.lane_ptrs: set[int] = set()
        fnty = ir.FunctionType(
            I64, [I8.as_pointer().as_pointer(), I64.as_pointer(), I64.as_pointer(), I64, I64]
        )
        self.fn = ir.Function(module, fnty, symbol)
        args, sizes, self.err, self.start, self.stop = self.fn.args
        entry = self.fn.append_basic_block("entry")
        self.alloca_b = ir.IRBuilder(entry)  # stack slots, at the top of the entry block
        body = self.fn.append_basic_block("body")
        self.alloca_b.branch(body)
        self.alloca_b.position_at_start(entry)
        self.b = ir.IRBuilder(body)
        self.vals: dict[str, ir.Value] = {}
        # composite ops as primitive ones (the schedule above was decided on the plan as it was)
        self.plan = plan = lower(plan, native)
        self.dtypes = defined(plan.instrs)
        # a bound on |value| where the ops that made it give one (sin of anything is at most
        # 1): lets sin/cos of such a value skip the full-range reduction
        self.magnitudes = magnitudes(plan.instrs)
        self.bufs: dict[str, ir.Value] = {}
        for k, a in enumerate(plan.args):
            raw = self.b.load(self.b.gep(args, [ir.Constant(I64, k)]))
            self.bufs[a.name] = self.b.bitcast(raw, STORAGE_TYPE[a.dtype].as_pointer())
        for sc in plan.scratch:  # a row kept between passes: on the stack of the calling thread
            row = self.alloca_b.alloca(ir.ArrayType(STORAGE_TYPE[sc.dtype], sc.elements))
            self.bufs[sc.name] = self.alloca_b.bitcast(row, STORAGE_TYPE[sc.dtype].as_pointer())
        self.syms: dict[str, ir.Value] = {}
        for k, s in enumerate(plan.sizes):
            self.syms[s] = self.b.load(self.b.gep(sizes, [ir.Constant(I64, k)]))
        self.accs: dict[str, tuple[str, DType, list[Any]]] = {}
        # accumulators of a column block: one array element per output of the block
        self.lane_accs: dict[str, tuple[str, DType, list[Any]]] = {}
        # a lane's update reads from its block (welford in lanes: the count, its reciprocal)
        self.uniform: dict[str, dict[str, Any]] = {}
        # a load read from a turned tile (:meth:`on_turn`): the tile, the tile's loops, their
        # first elements, its side
        self.turned: dict[str, tuple[Any, str, str, Any, Any, int]] = {}
        # where each loop of a nest ends (a tile's elements end at its edge or there), and
        # each loop's counter (the remainder of a loop in lanes starts where its blocks stopped)
        self.ends: dict[str, Any] = {}
        self.counters: dict[str, Any] = {}
        # the column block (or block of a reduction's lanes) being written: its first output,
        # its outputs, the values crossing from one segment to another and their block arrays
        # (:meth:`on_lanes`)
        self.column: tuple[Any, Any, set[str], dict[str, Any]] = (None, None, set(), {})

    # -- helpers

    def slot(self, ty: ir.Type, init: ir.Value) -> Any:
        p = self.alloca_b.alloca(ty)
        self.b.store(init, p)
        return p

    def declared(self, name: str, result: ir.Type, params: list[ir.Type]) -> Any:
        """Function ``name`` of libm or of the prelude (``prelude.ll``), declared in the module
        at its first call."""
        fn = self.m.globals.get(name)
        return fn if fn is not None else ir.Function(self.m, ir.FunctionType(result, params), name)

    def index(self, e: Any) -> Any:
        b = self.b
        e = sympy.sympify(e)
        if isinstance(e, sympy.Integer):
            return ir.Constant(I64, int(e))
        if isinstance(e, sympy.Symbol):
            return self.syms[e.name]
        if isinstance(e, (sympy.Add, sympy.Mul)):  # operands in order, each then combined
            return reduce(b.add if isinstance(e, sympy.Add) else b.mul, map(self.index, e.args))
        if isinstance(e, sympy.Pow) and isinstance(e.args[1], sympy.Integer) and e.args[1] > 0:
            return reduce(b.mul, [self.index(e.args[0])] * int(e.args[1]))
        if isinstance(e, (FloorDiv, Modulo)):
            a, d = (self.index(x) for x in e.args)
            q, r = b.sdiv(a, d), b.srem(a, d)
            if nonnegative(e.args[0]):
                return q if isinstance(e, FloorDiv) else r
            neg = b.icmp_signed("<", r, ir.Constant(I64, 0))
            if isinstance(e, FloorDiv):
                return b.select(neg, b.sub(q, ir.Constant(I64, 1)), q)
            return b.select(neg, b.add(r, d), r)
        if isinstance(e, (sympy.Min, sympy.Max)):
            op = "<" if isinstance(e, sympy.Min) else ">"
            pick = lambda x, y: b.select(b.icmp_signed(op, x, y), x, y)  # noqa: E731
            return reduce(pick, [self.index(x) for x in e.args])
        raise LLVMRenderError(f"kernel {self.plan.name}: index {e} ({type(e).__name__})")

    def operand(self, o: Any, dtype: DType, exact: bool = True) -> Any:
        if isinstance(o, Literal):
            return self.const(o.value, dtype, exact)
        return self.vals[o]

    def const(self, v: Any, dtype: DType, exact: bool = True) -> Any:
        """Literal ``v`` in ``dtype``'s compute type; ``exact``: a value of ``dtype`` (an f16 or
        bf16 literal rounded to it first, as the interpreter makes it), else of the compute
        type (a trailing scalar of mul, div and floordiv: ``literal_in_op_dtype``)."""
        v = 0 if v is None else v
        if dtype.is_float:
            return ir.Constant(VALUE_TYPE[dtype], literal_value(float(v), dtype, exact))
        return ir.Constant(VALUE_TYPE[dtype], int(bool(v)) if dtype.is_bool else int(v))

    # -- instructions

    def write(self) -> None:
        self.visit_all(loop_nest(self.plan, self.schedule))
        self.b.ret(ir.Constant(I64, 0))

    # -- loops: the nests as the schedule runs them (:func:`loop_nest`)

    def on_run(self, r: Run) -> None:
        """A loop of a nest: a tile's elements end at the tile's edge or the loop's end; the
        tiles (``x0.t``), column blocks (``x0.c``) and whole blocks of lanes (``x0.v``) step by
        their side; a reduction's innermost loop may run in lanes (:meth:`row_lanes`), the
        remainder from where their blocks stopped."""
        if r.lanes:
            return self.row_lanes(r)
        if r.span is Span.TILE:
            lo = self.syms[r.var + ".t"]
            hi = self.smin(self.b.add(lo, ir.Constant(I64, r.block)), self.ends[r.var])
        elif r.span is Span.REST:
            lo, hi = self.b.load(self.counters[r.var + ".v"]), self.ends[r.var]
        else:  # the parallel loop runs [start, stop) of its size (the runtime splits it)
            lo, hi = ir.Constant(I64, 0), self.index(r.size)
            if r.loop.parallel:
                lo, hi = self.start, self.smin(self.stop, hi)
            self.ends[r.var] = hi
        if r.span is Span.LANES:  # while a block's first + lanes <= the end
            hi = self.b.sub(hi, ir.Constant(I64, r.block - 1))
        suffix = {Span.TILES: ".t", Span.BLOCKS: ".c", Span.LANES: ".v"}.get(r.span, "")
        parallel = r.items is not None and self.independent(r.items, r.var)
        with self.loop(r.var + suffix, lo, hi, r.block if suffix else 1, parallel=parallel):
            self.visit_all(r.body)

    def independent(self, items: list[Item], var: str) -> bool:
        """Whether ``items`` is an innermost loop body whose iterations LLVM may take as
        independent (the plan's :func:`~fir.backends.plan.schedule.independent`)."""
        return not has_loops(items) and independent(items, var, self.aliased)

    def smin(self, a: Any, b: Any) -> Any:
        return self.b.select(self.b.icmp_signed("<", a, b), a, b)

    @contextmanager
    def loop(
        self,
        var: str,
        lo: Any,
        hi: Any,
        step: int = 1,
        unroll: bool = True,
        parallel: bool = False,
    ) -> Iterator[None]:
        """``for var = lo; var < hi; var += step``, its body what the ``with`` block writes:
        the counter is ``syms[var]``, its stack slot ``counters[var]``. ``unroll=False``:
        LLVM must not unroll it (a loop over lanes of constant length would be unrolled into
        scalar code before the loop vectoriser sees it). ``parallel``: an innermost loop whose
        iterations touch memory independently (:meth:`independent`): its accesses form
        an access group the loop names in ``llvm.loop.parallel_accesses``, so the vectoriser
        needs no run-time overlap checks (which an in-place result fails)."""
        first = len(self.fn.blocks)
        self.counters[var] = counter = self.slot(I64, lo)
        cond = self.fn.append_basic_block(f"{var}.cond")
        body = self.fn.append_basic_block(f"{var}.body")
        done = self.fn.append_basic_block(f"{var}.done")
        self.b.branch(cond)
        self.b.position_at_end(cond)
        v = self.b.load(counter)
        self.b.cbranch(self.b.icmp_signed("<", v, hi), body, done)
        self.b.position_at_end(body)
        self.syms[var] = v
        yield
        self.b.store(self.b.add(self.syms[var], ir.Constant(I64, step)), counter)
        latch = self.b.branch(cond)
        hints: list[list[Any]] = []  # the loop's properties: a name and its operands
        if parallel:
            group = self.access_group([bb for bb in self.fn.blocks[first:] if bb is not done])
            if group is not None:
                hints.append(["llvm.loop.parallel_accesses", group])
        if not unroll:
            hints.append(["llvm.loop.unroll.disable"])
        if self.schedule.interleave > 1:  # a compute-heavy kernel (the schedule's)
            hints.append(["llvm.loop.interleave.count", ir.Constant(I32, self.schedule.interleave)])
        options = [self.m.add_metadata([ir.MetaDataString(self.m, n), *v]) for n, *v in hints]
        if options:
            loop_id = self.m.add_metadata(options)
            loop_id.operands = (loop_id, *options)  # a loop ID names itself
            latch.set_metadata("llvm.loop", loop_id)
        self.b.position_at_end(done)

    def access_group(self, blocks: list[Any]) -> Any:
        """A new access group holding every memory access of ``blocks`` (a loop's), or None
        where one of them is not a buffer's, a lane array's or a constant table's: the loop
        is then no parallel loop to LLVM, which keeps its checks. Stack slots of scalars are
        left out: they become registers before the vectoriser runs."""
        members = []
        for bb in blocks:
            for inst in bb.instructions:
                if not isinstance(inst, (ir.LoadInstr, ir.StoreInstr)):
                    continue
                ptr = inst.operands[0] if isinstance(inst, ir.LoadInstr) else inst.operands[1]
                if id(inst) in self.accesses or id(ptr) in self.lane_ptrs or _constant_table(ptr):
                    members.append(inst)
                elif not _scalar_slot(ptr):
                    return None
        group = _AccessGroup(self.m, [], name=str(len(self.m.metadata)))
        for inst in members:
            inst.set_metadata("llvm.access.group", group)
        return group

    def on_turn(self, turn: Turn) -> None:
        """Copy the tile of each turned load, transposed, to a stack array (``tile[i * side +
        j] = src[i + j * stride]``, ``i`` along the tile's outer loop), from which the tile's
        loops read it in order: the prelude's ``fir_turn32`` or ``fir_turn16`` by the size of
        the elements (8 x 8 blocks through a register transpose, the tile's edges one element
        at a time: ``prelude.ll``)."""
        b, a, c, side = self.b, turn.outer, turn.inner, turn.side
        at, ct = self.syms[a.var + ".t"], self.syms[c.var + ".t"]
        rows, cols = (
            b.sub(self.smin(b.add(t, ir.Constant(I64, side)), self.ends[lp.var]), t)
            for t, lp in ((at, a), (ct, c))
        )
        for tl in turn.loads:
            ld = tl.load
            ty = STORAGE_TYPE[ld.dtype]
            tile = self.alloca_b.alloca(ir.ArrayType(ty, side * side))
            tile.align = 64
            dst = self.alloca_b.bitcast(tile, ty.as_pointer())
            self.syms[a.var], self.syms[c.var] = at, ct  # the tile's first element
            src = b.gep(self.bufs[ld.buffer], [self.index(ld.index)])
            del self.syms[a.var], self.syms[c.var]
            bits = 8 * ld.dtype.itemsize  # the turn moves the elements' bits
            lane = ir.IntType(bits).as_pointer()
            turn_fn = self.declared(f"fir_turn{bits}", ir.VoidType(), [lane, lane] + [I64] * 4)
            args = [b.bitcast(dst, lane), b.bitcast(src, lane), self.index(tl.along)]
            b.call(turn_fn, [*args, rows, cols, ir.Constant(I64, side)])
            self.turned[ld.dst] = (dst, a.var, c.var, at, ct, side)

    def on_columns(self, cols: Columns) -> None:
        """A column block (the schedule's column reduction, ``x.sum(0)``): for a block of
        outputs the reduction loops run outside a loop over the block's outputs
        (:meth:`on_lanes`), each with its accumulators in a stack array, so the inner loop
        reads memory in order and vectorises (no loop-carried dependency). Values made once
        per output and read by a later pass cross in per-block arrays too."""
        xb = self.syms[cols.loop.var + ".c"]
        n = self.smin(ir.Constant(I64, COLUMN_BLOCK), self.b.sub(self.ends[cols.loop.var], xb))
        for i in cols.accs:
            start = self.acc_start(i.kind, i.dtype)
            lanes = [self.alloca_b.alloca(ir.ArrayType(c.type, COLUMN_BLOCK)) for c in start]
            self.lane_accs[i.acc] = (i.kind, i.dtype, lanes)
        self.column = (xb, n, cols.crossing, {})
        self.visit_all(cols.segments)
        self.lane_accs.clear()

    def on_lanes(self, lanes: Lanes) -> None:
        """``for l < n: var = xb + l`` over the outputs of a column block, each accumulator and
        crossing value element ``l`` of its block array; or over a block of a reduction's lanes
        (``n`` constant, never unrolled: :meth:`loop`), each accumulator its lane's
        state (Welford's count and its reciprocal once per block)."""
        b, var, items = self.b, lanes.loop.var, lanes.items
        if lanes.lanes:  # the block of lanes that starts at ``x0.v``
            self.column = (self.syms[var + ".v"], ir.Constant(I64, lanes.lanes), set(), {})
        xb, n, crossing, arrays = self.column
        for a in lanes.counted:
            t = self.acc_start(*self.accs[a][:2])[0].type
            count = b.sitofp(b.add(b.sdiv(xb, n), ir.Constant(I64, 1)), t)
            self.uniform[a] = {"a2": count, "inv": b.fdiv(ir.Constant(t, 1.0), count)}
        parallel = self.independent(items, var)
        scalar = dict(self.accs)
        with self.loop(
            var + ".l", ir.Constant(I64, 0), n, unroll=not lanes.lanes, parallel=parallel
        ):
            lane = self.syms[var + ".l"]
            self.syms[var] = b.add(xb, lane)
            for acc, (kind, dtype, arrs) in self.lane_accs.items():
                self.accs[acc] = (kind, dtype, [self.lane_ptr(a, lane) for a in arrs])
            for name, arr in arrays.items():
                self.vals[name] = b.load(self.lane_ptr(arr, lane))
            self.visit_all(items)
            for name in sorted({d for i in walk(items) for d in defines(i)} & crossing):
                v = self.vals[name]
                if name not in arrays:
                    arrays[name] = self.alloca_b.alloca(ir.ArrayType(v.type, COLUMN_BLOCK))
                b.store(v, self.lane_ptr(arrays[name], lane))
        self.accs, self.uniform = scalar, {}

    def lane_ptr(self, array: Any, lane: Any) -> Any:
        """Element ``lane`` of a stack array of lanes (or of a column block), which only the
        iteration of that lane touches."""
        p = self.b.gep(array, [ir.Constant(I32, 0), lane])
        self.lane_ptrs.add(id(p))
        return p

    def on_load(self, i: ins.Load) -> None:
        b = self.b
        if i.dst in self.turned:  # from the turned tile (:meth:`on_turn`; never masked)
            tile, a_var, c_var, at, ct, side = self.turned[i.dst]
            a, c = self.syms[a_var], self.syms[c_var]
            base, idx = tile, b.add(b.mul(b.sub(a, at), ir.Constant(I64, side)), b.sub(c, ct))
        else:
            base, idx = self.bufs[i.buffer], self.index(i.index)
        if i.mask is not None:
            idx = b.select(self.vals[i.mask], idx, ir.Constant(I64, 0))
        raw = b.load(b.gep(base, [idx]))
        self.accesses.add(id(raw))
        v = self.widen(raw, i.dtype)
        if i.mask is not None:
            other = self.const(i.other.value if i.other is not None else 0, i.dtype)
            v = b.select(self.vals[i.mask], v, other)
        self.vals[i.dst] = v

    def widen(self, raw: Any, dtype: DType) -> Any:
        b = self.b
        if dtype is DType.F16:
            return b.fpext(raw, F32)
        if dtype is DType.BF16:  # the prelude's (prelude.ll)
            return b.call(self.declared("fir_from_bf16", F32, [I16]), [raw])
        if dtype is DType.BOOL:
            return b.icmp_unsigned("!=", raw, ir.Constant(I8, 0))
        return raw

    def narrow(self, v: Any, dtype: DType) -> Any:
        b = self.b
        if dtype is DType.F16:
            return b.fptrunc(v, F16)
        if dtype is DType.BF16:  # round to nearest even, NaN a quiet NaN: the prelude's
            return b.call(self.declared("fir_to_bf16", I16, [F32]), [v])
        if dtype is DType.BOOL:
            return b.zext(v, I8)
        return v

    def on_store(self, i: ins.Store) -> None:
        v = self.narrow(self.operand(i.value, i.dtype), i.dtype)
        st = self.b.store(v, self.b.gep(self.bufs[i.buffer], [self.index(i.index)]))
        self.accesses.add(id(st))

    def on_constant(self, i: ins.Constant) -> None:
        self.vals[i.dst] = self.const(i.value.value, i.dtype)

    def on_index_value(self, i: ins.IndexValue) -> None:
        self.vals[i.dst] = self.convert(self.index(i.index), DType.I64, i.dtype)

    def on_check_index(self, i: ins.CheckIndex) -> None:
        b = self.b
        src = self.convert(self.vals[i.src], self.dtypes.get(i.src, DType.I64), DType.I64)
        if not i.proven:
            bad = b.or_(
                b.icmp_signed("<", src, ir.Constant(I64, 0)),
                b.icmp_signed(">=", src, self.index(i.bound)),
            )
            if i.mask is not None:  # checked where its loads read; 0 (read by none) elsewhere
                mask = self.convert(self.vals[i.mask], self.dtypes[i.mask], DType.BOOL)
                bad = b.and_(mask, bad)
                src = b.select(mask, src, ir.Constant(I64, 0))
            self.fail_if(bad, "check.fail", i.code, src)
        self.syms[i.symbol] = src

    def fail_if(self, bad: Any, name: str, code: int, value: Any = None) -> None:
        """Where ``bad``, the kernel returns ``code`` (and stores ``value`` as the error's)."""
        fail = self.fn.append_basic_block(name)
        ok = self.fn.append_basic_block(name.split(".")[0] + ".ok")
        self.b.cbranch(bad, fail, ok)
        self.b.position_at_end(fail)
        if value is not None:
            self.b.store(value, self.err)
        self.b.ret(ir.Constant(I64, code))
        self.b.position_at_end(ok)

    def convert(self, v: Any, src: DType, dst: DType) -> Any:
        b = self.b
        st, dt = VALUE_TYPE[src], VALUE_TYPE[dst]
        if dst.is_bool:  # a value is true where it is not zero (NaN is)
            return v if src.is_bool else self.op("ne", [v, ir.Constant(st, 0)], src)
        if dst.is_float:
            if src.is_float:
                out = v if st == dt else (b.fpext(v, dt) if dt == F64 else b.fptrunc(v, dt))
            else:
                out = (b.sitofp if src.is_signed else b.uitofp)(v, dt)
            if dst.is_narrow_float:  # round to the narrow type, compute on in f32
                out = self.widen(self.narrow(out, dst), dst)
            return out
        if src.is_float:
            # docs/ops.md, cast: round toward zero, saturate, NaN -> 0 (plain fptosi is poison
            # out of range); to u8 through i64 (saturating_type)
            via = VALUE_TYPE[saturating_type(dst)]
            fnty = ir.FunctionType(via, [st])
            sat = self.m.declare_intrinsic("llvm.fptosi.sat", [via, st], fnty)
            wide = b.call(sat, [v])
            return wide if via == dt else b.trunc(wide, dt)
        if st.width == dt.width:
            return v
        if st.width > dt.width:
            return b.trunc(v, dt)
        return (b.sext if src.is_signed else b.zext)(v, dt)

    def on_compute(self, i: ins.Compute) -> None:
        if i.op in UNSUPPORTED:
            raise LLVMRenderError(f"kernel {self.plan.name}: the llvm back end has no '{i.op}' yet")
        src = op_forms.operand_dtype(i.op, i.args, i.dtype, self.dtypes)
        forms = op_forms.operand_forms(i.op, i.args, src)
        args = [self.operand(a, d, exact) for a, (d, exact) in zip(i.args, forms)]
        # a cheaper emitter of sin or cos where the argument's magnitude has a bound
        bounded = bounded_emitter(i.op, magnitude(i.args[0], self.magnitudes))
        if ins.checks_divisor(i):  # the plan's tdiv and trem
            zero = self.b.icmp_signed("==", args[1], ir.Constant(VALUE_TYPE[src], 0))
            self.fail_if(zero, "div.zero", ins.DIVISION_BY_ZERO)
        if i.op == "cast":
            self.vals[i.dst] = self.convert(args[0], src, i.dtype)
        elif bounded is not None and VALUE_TYPE[src] == F32:
            self.vals[i.dst] = bounded(self.b, args[0])
        else:
            self.vals[i.dst] = self.op(i.op, args, src)

    def op(self, op: str, a: list[Any], src: DType) -> Any:
        b = self.b
        if op.startswith("logical_"):  # of truth values: the bitwise op of bools
            a = [self.convert(x, src, DType.BOOL) for x in a]
            op, src = "bitwise" + op.removeprefix("logical"), DType.BOOL
        predicate = op_forms.COMPARISONS.get(op)
        if predicate is not None and src.is_float:  # ordered, but ne (NaN != NaN)
            return (b.fcmp_unordered if op == "ne" else b.fcmp_ordered)(predicate, *a)
        if predicate is not None:
            return (b.icmp_signed if src.is_signed else b.icmp_unsigned)(predicate, *a)
        if op == "where":
            return b.select(*a)
        out = self.float_op(op, a, src) if src.is_float else self.int_op(op, a, src)
        if out is None:
            raise LLVMRenderError(f"kernel {self.plan.name}: the llvm back end has no {src} '{op}'")
        return out

    def float_op(self, op: str, a: list[Any], src: DType) -> Any:
        b, ty = self.b, VALUE_TYPE[src]
        if native(op, src):
            return MATH_F32[op](b, a[0])  # branch-free IR: the loop vectoriser widens it
        if op in INTRINSICS:
            fnty = ir.FunctionType(ty, [ty] * len(a))
            return b.call(self.m.declare_intrinsic(INTRINSICS[op], [ty], fnty), a)
        if op in FLOAT_OPS:
            return getattr(b, FLOAT_OPS[op])(*a)
        if op in op_forms.MATH1 or op in op_forms.MATH2:  # libm's (expf of f32)
            return b.call(self.declared(op + ("f" if ty == F32 else ""), ty, [ty] * len(a)), a)
        if op == "isnan":
            return b.fcmp_unordered("uno", a[0], a[0])
        if op == "signbit":
            bits = I32 if ty == F32 else I64
            return b.icmp_signed("<", b.bitcast(a[0], bits), ir.Constant(bits, 0))
        return None

    def int_op(self, op: str, a: list[Any], src: DType) -> Any:
        b = self.b
        if op in op_forms.ROUNDING or (op == "abs" and not src.is_signed):
            return a[0]  # an integer is whole, an unsigned one its own size
        if op == "abs":
            negative = b.icmp_signed("<", a[0], ir.Constant(VALUE_TYPE[src], 0))
            return b.select(negative, b.neg(a[0]), a[0])
        names = (BOOL_OPS.get(op) if src.is_bool else None) or INT_OPS.get(op)
        if names is None:
            return None
        signed, _, unsigned = names.partition(" ")
        return getattr(b, unsigned if unsigned and not src.is_signed else signed)(*a)

    # -- accumulators

    def on_acc_init(self, i: ins.AccInit) -> None:
        init = self.acc_start(i.kind, i.dtype)
        if i.acc in self.lane_accs:  # a column block's: this output's element of its arrays
            for c, p in zip(init, self.accs[i.acc][2]):
                self.b.store(c, p)
            return
        self.accs[i.acc] = (i.kind, i.dtype, [self.slot(c.type, c) for c in init])

    def acc_start(self, kind: str, dtype: DType) -> list[Any]:
        """The start value of each component of an accumulator's state
        (:func:`fir.ir.accumulators.state`)."""
        return [self.const(c.start, c.dtype) for c in state(kind, dtype)]

    def on_accumulate(self, i: ins.Accumulate) -> None:
        """The steps of :func:`fir.ir.accumulators.update`, each written when a result first
        needs it; a guarded update reads the old state and its results first, then selects
        between them where the guard holds."""
        b = self.b
        kind, dtype, slots = self.accs[i.acc]
        t = state(kind, dtype)[0].dtype
        v = self.operand(i.value, i.dtype)
        src = self.dtypes.get(i.value, i.dtype) if not isinstance(i.value, Literal) else i.dtype
        block = self.uniform.get(i.acc, {})
        spec = update(kind, dtype, uniform=bool(block))
        leaves: dict[str, Callable[[], Any]] = {
            **{f"a{k}": partial(b.load, p) for k, p in enumerate(slots)},
            "v": lambda: v if src is t else self.convert(v, src, t),
            "i": lambda: self.index(i.rindex) if i.rindex is not None else ir.Constant(I64, 0),
        }
        read = self.steps(spec, block, leaves)  # the block's names before the loads
        if spec.guard is not None:
            old = [read(f"a{k}") for k in range(len(slots))]
            new = [read(r) for r in spec.results]
            take = read(spec.guard)
            for slot, x, y in zip(slots, new, old):
                b.store(b.select(take, x, y), slot)
            return
        for slot, r in zip(slots, spec.results):
            b.store(read(r), slot)
        if kind in self.schedule.reassociates and t.is_float:
            read(spec.results[0]).flags.extend(REASSOC_FLAGS)

    def steps(
        self,
        spec: Merge,
        values: Mapping[str, Any],
        leaves: Mapping[str, Callable[[], Any]],
    ) -> Callable[[str], Any]:
        """A reader of the names of an accumulator's ``spec`` (:mod:`fir.ir.accumulators`),
        its steps lowered as the plan's ops are: a name's value (``values``), made by its leaf
        (a load, a conversion …) or written as its step through :meth:`op` the first time it
        is read, so the IR follows the order in which the reader asks."""
        steps, types = lower_steps(spec, _step_native)
        known = dict(values)

        def read(name: str) -> Any:
            if name not in known:
                known[name] = leaves[name]() if name in leaves else write(steps[name])
            return known[name]

        def write(s: ins.Compute) -> Any:
            test = steps.get(str(s.args[0])) if s.op == "logical_not" else None
            if test is not None and test.op == "isnan":  # "not isnan" is one compare
                v = read(str(test.args[0]))
                return self.b.fcmp_ordered("ord", v, v)
            src = op_forms.operand_dtype(s.op, s.args, s.dtype, types)
            args = [read(a) if isinstance(a, str) else self.const(a.value, src) for a in s.args]
            return self.op(s.op, args, src)

        return read

    def row_lanes(self, r: Run) -> None:
        """An innermost reduction loop with an accumulator LLVM cannot vectorise as a reduction
        (Welford's divides by the running count, argmax carries an index), in the schedule's
        lanes: each lane with its own state in a stack array, so the loop over a block's lanes
        (:meth:`on_lanes`) has no loop-carried dependency and vectorises; the remainder updates
        the scalar state, which then takes the lanes merged pairwise (ties of argmax by index)."""
        b, lanes_n = self.b, r.lanes
        for a in sorted({i.acc for i in r.loop.body if isinstance(i, ins.Accumulate)}):
            kind, dtype, _ = self.accs[a]
            arrays = []  # a stack array per component, every lane at the start value
            for c in self.acc_start(kind, dtype):
                arrays.append(self.alloca_b.alloca(ir.ArrayType(c.type, lanes_n)))
                for k in range(lanes_n):
                    b.store(c, self.lane_ptr(arrays[-1], ir.Constant(I32, k)))
            self.lane_accs[a] = (kind, dtype, arrays)
        self.visit_all(r.body)
        for a, (kind, dtype, arrays) in self.lane_accs.items():
            # the lanes pairwise (a tree: 5 dependent merges, not 32), then into the state
            slots = self.accs[a][2]
            lanes = [
                [b.load(self.lane_ptr(x, ir.Constant(I32, k))) for x in arrays]
                for k in range(lanes_n)
            ]
            while len(lanes) > 1:
                lanes = [
                    self.combine(kind, dtype, lanes[k], lanes[k + 1])
                    for k in range(0, len(lanes), 2)
                ]
            merged = self.combine(kind, dtype, [b.load(x) for x in slots], lanes[0])
            for slot, v in zip(slots, merged):
                b.store(v, slot)
        self.lane_accs.clear()

    def combine(self, kind: str, dtype: DType, cur: list[Any], other: list[Any]) -> list[Any]:
        """Two states of an accumulator (their components) merged into one: the steps of
        :func:`fir.ir.accumulators.merge`, in the order it states them."""
        values = {f"a{k}": v for k, v in enumerate(cur)} | {f"b{k}": v for k, v in enumerate(other)}
        spec = merge(kind, dtype)
        read = self.steps(spec, values, {})
        for s in spec.steps:
            read(s.dst)
        return [read(r) for r in spec.results]

    def on_acc_result(self, i: ins.AccResult) -> None:
        kind, dtype, slots = self.accs[i.acc]
        loads = [self.b.load(s) for s in slots]
        values = [(c, v) for c, v in zip(state(kind, dtype), loads) if c.result]
        for dst, dt, (c, v) in zip(i.dsts, i.dtypes, values):
            # an int64 sum of i32, a welford of ints in f64
            self.vals[dst] = v if v.type == VALUE_TYPE[dt] else self.convert(v, c.dtype, dt)


def _scalar_slot(ptr: Any) -> bool:
    """A stack slot of one scalar (a loop counter, an accumulator): ``mem2reg`` makes it a
    register before the vectoriser runs."""
    return isinstance(ptr, ir.AllocaInstr) and not isinstance(ptr.allocated_type, ir.ArrayType)


def _constant_table(ptr: Any) -> bool:
    """An element of a constant global (a table of :mod:`.vecmath`): nothing writes it."""
    return (
        isinstance(ptr, ir.GEPInstr)
        and isinstance(ptr.pointer, ir.GlobalVariable)
        and ptr.pointer.global_constant
    )


def render_module(
    plans: list[KernelPlan],
    symbol: Callable[[str], str],
    triple: str,
    omp: bool = False,
    aliased: Mapping[str, frozenset[str]] | None = None,
) -> ir.Module:
    """One LLVM module with a function for each plan; with ``omp``, also each one's OpenMP
    driver (:mod:`fir.backends.runtime.llvm_omp`). ``aliased``: per kernel, the arguments that share storage with
    another (``shared_storage`` of the program's plan); a kernel it does not name is taken
    to have any two arguments overlap."""
    m = ir.Module(name="fir")
    m.triple = triple
    for p in plans:
        _Kernel(m, p, symbol(p.name), None if aliased is None else aliased.get(p.name)).write()
        if omp:
            add_driver(m, m.globals[symbol(p.name)])
    return m
