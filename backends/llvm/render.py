"""Kernel plans as LLVM IR, built with ``llvmlite.ir`` (no IR text assembled by hand).

One function per plan, ``i64 NAME(i8** args, i64* sizes, i64* error_value, i64 start, i64
stop)``: the C++ back end's arguments, and the range of the parallel (outermost pointwise) loop
this call runs, so that the runtime can split a kernel over threads. The plan's loop nest is written as
it is: each loop keeps its counter in a stack slot (``alloca`` in the entry block, which
``mem2reg`` turns into registers), accumulators likewise; LLVM's loop vectoriser then widens the
innermost loops (a pointwise loop of f32 becomes ``<8 x float>`` on AVX2, ``<16 x float>`` where
it prefers 512-bit vectors). Float reductions keep their order (no ``reassoc``), so they match
the interpreter and are not vectorised.

This first slice calls libm for the math functions LLVM has
no intrinsic for; the ops it does not cover raise :class:`LLVMRenderError` (the frontend then
runs the graph with PyTorch): see ``UNSUPPORTED``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import llvmlite.ir as ir
import sympy
from fir.backends.plan import KernelPlan
from fir.backends.plan.index_text import nonnegative
from fir.backends.plan.instructions import (
    AccInit,
    AccResult,
    Accumulate,
    CheckIndex,
    Compute,
    Constant,
    IndexValue,
    Load,
    LoopBegin,
    LoopEnd,
    Store,
)
from fir.ir.dtypes import DType
from fir.ir.errors import FirError
from fir.ir.graph import Literal
from fir.ir.symbolic import FloorDiv, Modulo

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
UNSUPPORTED = ("digamma", "erfinv")
DIVISION_BY_ZERO = -1


class LLVMRenderError(FirError):
    """A plan this back end cannot write (an op it does not cover yet)."""


def value_type(dtype: DType) -> ir.Type:
    """The type values of ``dtype`` are computed in (f16 and bf16 in f32, bool in i1)."""
    return {
        DType.BOOL: I1,
        DType.I8: I8,
        DType.I16: I16,
        DType.I32: I32,
        DType.I64: I64,
        DType.U8: I8,
        DType.F16: F32,
        DType.BF16: F32,
        DType.F32: F32,
        DType.F64: F64,
    }[dtype]


def storage_type(dtype: DType) -> ir.Type:
    return {DType.BOOL: I8, DType.F16: F16, DType.BF16: I16}.get(dtype) or value_type(dtype)


class _Kernel:
    def __init__(self, module: ir.Module, plan: KernelPlan, symbol: str) -> None:
        self.m = module
        self.plan = plan
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
        self.dtypes: dict[str, DType] = {}
        self.bufs: dict[str, ir.Value] = {}
        for k, a in enumerate(plan.args):
            raw = self.b.load(self.b.gep(args, [ir.Constant(I64, k)]))
            self.bufs[a.name] = self.b.bitcast(raw, storage_type(a.dtype).as_pointer())
            self.dtypes["@" + a.name] = a.dtype
        self.syms: dict[str, ir.Value] = {}
        for k, s in enumerate(plan.sizes):
            self.syms[s] = self.b.load(self.b.gep(sizes, [ir.Constant(I64, k)]))
        self.loops: list[tuple[str, Any, Any, Any]] = []
        self.accs: dict[str, tuple[str, DType, list[Any]]] = {}

    # -- helpers

    def slot(self, ty: ir.Type, init: ir.Value) -> Any:
        p = self.alloca_b.alloca(ty)
        self.b.store(init, p)
        return p

    def intrinsic(self, name: str, ty: ir.Type, args: list[Any]) -> Any:
        fnty = ir.FunctionType(ty, [ty] * len(args))
        return self.b.call(self.m.declare_intrinsic(name, [ty], fnty), args)

    def libm(self, name: str, ty: ir.Type, args: list[Any]) -> Any:
        fname = name + ("f" if ty == F32 else "")
        fn = self.m.globals.get(fname)
        if fn is None:
            fn = ir.Function(self.m, ir.FunctionType(ty, [ty] * len(args)), fname)
        return self.b.call(fn, args)

    def index(self, e: Any) -> Any:
        b = self.b
        if isinstance(e, int):
            return ir.Constant(I64, e)
        e = sympy.sympify(e)
        if isinstance(e, sympy.Integer):
            return ir.Constant(I64, int(e))
        if isinstance(e, sympy.Symbol):
            return self.syms[e.name]
        if isinstance(e, sympy.Add):
            out = self.index(e.args[0])
            for a in e.args[1:]:
                out = b.add(out, self.index(a))
            return out
        if isinstance(e, sympy.Mul):
            out = self.index(e.args[0])
            for a in e.args[1:]:
                out = b.mul(out, self.index(a))
            return out
        if isinstance(e, sympy.Pow) and isinstance(e.args[1], sympy.Integer):
            base = self.index(e.args[0])
            out = base
            for _ in range(int(e.args[1]) - 1):
                out = b.mul(out, base)
            return out
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
            vals = [self.index(x) for x in e.args]
            out = vals[0]
            for v in vals[1:]:
                op = "<" if isinstance(e, sympy.Min) else ">"
                out = b.select(b.icmp_signed(op, out, v), out, v)
            return out
        raise LLVMRenderError(f"kernel {self.plan.name}: index {e} ({type(e).__name__})")

    def operand(self, o: Any, dtype: DType) -> Any:
        if isinstance(o, Literal):
            return self.const(o.value, dtype)
        return self.vals[o]

    def const(self, v: Any, dtype: DType) -> Any:
        ty = value_type(dtype)
        if v is None:
            v = 0
        if dtype.is_float:
            return ir.Constant(ty, float(v))
        if dtype.is_bool:
            return ir.Constant(I1, 1 if v else 0)
        return ir.Constant(ty, int(v))

    # -- instructions

    def write(self) -> None:
        for i in self.plan.instrs:
            getattr(self, "_" + type(i).__name__.lower())(i)
        self.b.ret(ir.Constant(I64, 0))

    def _loopbegin(self, i: LoopBegin) -> None:
        # the parallel loop runs [start, stop) of its range: the runtime splits it over threads
        first = self.start if i.parallel else ir.Constant(I64, 0)
        counter = self.slot(I64, first)
        cond = self.fn.append_basic_block(f"{i.var}.cond")
        body = self.fn.append_basic_block(f"{i.var}.body")
        done = self.fn.append_basic_block(f"{i.var}.done")
        self.b.branch(cond)
        self.b.position_at_end(cond)
        v = self.b.load(counter)
        end = self.index(i.size)
        if i.parallel:
            end = self.b.select(self.b.icmp_signed("<", self.stop, end), self.stop, end)
        self.b.cbranch(self.b.icmp_signed("<", v, end), body, done)
        self.b.position_at_end(body)
        self.syms[i.var] = v
        self.loops.append((i.var, counter, cond, done))

    def _loopend(self, i: LoopEnd) -> None:
        var, counter, cond, done = self.loops.pop()
        self.b.store(self.b.add(self.syms[var], ir.Constant(I64, 1)), counter)
        self.b.branch(cond)
        self.b.position_at_end(done)

    def _load(self, i: Load) -> None:
        b = self.b
        idx = self.index(i.index)
        if i.mask is not None:
            idx = b.select(self.vals[i.mask], idx, ir.Constant(I64, 0))
        raw = b.load(b.gep(self.bufs[i.buffer], [idx]))
        v = self.widen(raw, i.dtype)
        if i.mask is not None:
            other = self.const(i.other.value if i.other is not None else 0, i.dtype)
            v = b.select(self.vals[i.mask], v, other)
        self.vals[i.dst] = v
        self.dtypes[i.dst] = i.dtype

    def widen(self, raw: Any, dtype: DType) -> Any:
        b = self.b
        if dtype is DType.F16:
            return b.fpext(raw, F32)
        if dtype is DType.BF16:
            return b.bitcast(b.shl(b.zext(raw, I32), ir.Constant(I32, 16)), F32)
        if dtype is DType.BOOL:
            return b.icmp_unsigned("!=", raw, ir.Constant(I8, 0))
        return raw

    def narrow(self, v: Any, dtype: DType) -> Any:
        b = self.b
        if dtype is DType.F16:
            return b.fptrunc(v, F16)
        if dtype is DType.BF16:  # round to nearest even; NaN stays a quiet NaN
            u = b.bitcast(v, I32)
            bit = b.and_(b.lshr(u, ir.Constant(I32, 16)), ir.Constant(I32, 1))
            r = b.lshr(b.add(u, b.add(ir.Constant(I32, 0x7FFF), bit)), ir.Constant(I32, 16))
            nan = b.fcmp_unordered("uno", v, v)
            return b.trunc(b.select(nan, ir.Constant(I32, 0x7FC0), r), I16)
        if dtype is DType.BOOL:
            return b.zext(v, I8)
        return v

    def _store(self, i: Store) -> None:
        v = self.operand(i.value, i.dtype)
        self.b.store(
            self.narrow(v, i.dtype), self.b.gep(self.bufs[i.buffer], [self.index(i.index)])
        )

    def _constant(self, i: Constant) -> None:
        self.vals[i.dst] = self.const(i.value.value, i.dtype)
        self.dtypes[i.dst] = i.dtype

    def _indexvalue(self, i: IndexValue) -> None:
        self.vals[i.dst] = self.convert(self.index(i.index), DType.I64, i.dtype)
        self.dtypes[i.dst] = i.dtype

    def _checkindex(self, i: CheckIndex) -> None:
        b = self.b
        src = self.convert(self.vals[i.src], self.dtypes.get(i.src, DType.I64), DType.I64)
        bad = b.or_(
            b.icmp_signed("<", src, ir.Constant(I64, 0)),
            b.icmp_signed(">=", src, self.index(i.bound)),
        )
        fail = self.fn.append_basic_block("check.fail")
        ok = self.fn.append_basic_block("check.ok")
        b.cbranch(bad, fail, ok)
        b.position_at_end(fail)
        b.store(src, self.err)
        b.ret(ir.Constant(I64, i.code))
        b.position_at_end(ok)
        self.syms[i.symbol] = src

    def convert(self, v: Any, src: DType, dst: DType) -> Any:
        b = self.b
        st, dt = value_type(src), value_type(dst)
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("une", v, ir.Constant(st, 0.0))
            return v if src.is_bool else b.icmp_unsigned("!=", v, ir.Constant(st, 0))
        if dst.is_float:
            if src.is_float:
                out = v if st == dt else (b.fpext(v, dt) if dt == F64 else b.fptrunc(v, dt))
            elif src.is_bool or src is DType.U8:
                out = b.uitofp(v, dt)
            else:
                out = b.sitofp(v, dt)
            if dst in (DType.F16, DType.BF16):  # round to the narrow type, compute on in f32
                out = self.widen(self.narrow(out, dst), dst)
            return out
        if src.is_float:
            wide = b.fptosi(v, I64)
            return wide if dt == I64 else b.trunc(wide, dt)
        if st.width == dt.width:
            return v
        if st.width > dt.width:
            return b.trunc(v, dt)
        return b.zext(v, dt) if (src.is_bool or src is DType.U8) else b.sext(v, dt)

    def _compute(self, i: Compute) -> None:
        if i.op in UNSUPPORTED:
            raise LLVMRenderError(f"kernel {self.plan.name}: the llvm back end has no '{i.op}' yet")
        kinds = [self.dtypes.get(a) for a in i.args if not isinstance(a, Literal)]
        src = i.dtype if i.op == "where" else next((d for d in kinds if d is not None), i.dtype)
        args = [
            self.operand(a, DType.BOOL if (i.op == "where" and k == 0) else src)
            for k, a in enumerate(i.args)
        ]
        if i.op == "cast":
            self.vals[i.dst] = self.convert(args[0], src, i.dtype)
        else:
            self.vals[i.dst] = self.op(i.op, args, src, i.dtype)
        self.dtypes[i.dst] = i.dtype

    def op(self, op: str, a: list[Any], src: DType, dst: DType) -> Any:
        b = self.b
        ty = value_type(src)
        if op in ("eq", "ne", "lt", "le", "gt", "ge"):
            sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
            if src.is_float:
                return b.fcmp_unordered(sym, *a) if op == "ne" else b.fcmp_ordered(sym, *a)
            if src.is_bool or src is DType.U8:
                return b.icmp_unsigned(sym, *a)
            return b.icmp_signed(sym, *a)
        if op in ("logical_and", "logical_or", "logical_xor", "logical_not"):
            t = [self.convert(x, src, DType.BOOL) for x in a]
            if op == "logical_not":
                return b.not_(t[0])
            return {"logical_and": b.and_, "logical_or": b.or_, "logical_xor": b.xor}[op](*t)
        if op == "where":
            return b.select(*a)
        if src.is_float:
            return self.float_op(op, a, ty)
        return self.int_op(op, a, ty, src)

    def float_op(self, op: str, a: list[Any], ty: ir.Type) -> Any:
        b = self.b
        one, zero = ir.Constant(ty, 1.0), ir.Constant(ty, 0.0)
        simple: dict[str, Callable[[], Any]] = {
            "add": lambda: b.fadd(*a),
            "sub": lambda: b.fsub(*a),
            "mul": lambda: b.fmul(*a),
            "div": lambda: b.fdiv(*a),
            "neg": lambda: b.fneg(a[0]),
            "square": lambda: b.fmul(a[0], a[0]),
            "reciprocal": lambda: b.fdiv(one, a[0]),
            "relu": lambda: b.select(b.fcmp_ordered("<", a[0], zero), zero, a[0]),
            "sigmoid": lambda: b.fdiv(
                one, b.fadd(one, self.intrinsic("llvm.exp", ty, [b.fneg(a[0])]))
            ),
            "rsqrt": lambda: b.fdiv(one, self.intrinsic("llvm.sqrt", ty, [a[0]])),
            "isnan": lambda: b.fcmp_unordered("uno", a[0], a[0]),
            "isinf": lambda: b.fcmp_ordered(
                "==", self.intrinsic("llvm.fabs", ty, [a[0]]), ir.Constant(ty, float("inf"))
            ),
            "isfinite": lambda: b.fcmp_ordered(
                "<", self.intrinsic("llvm.fabs", ty, [a[0]]), ir.Constant(ty, float("inf"))
            ),
            "signbit": lambda: b.icmp_signed(
                "<",
                b.bitcast(a[0], I32 if ty == F32 else I64),
                ir.Constant(I32 if ty == F32 else I64, 0),
            ),
            "sign": lambda: b.fsub(
                b.uitofp(b.fcmp_ordered(">", a[0], zero), ty),
                b.uitofp(b.fcmp_ordered("<", a[0], zero), ty),
            ),
            "maximum": lambda: b.select(
                b.or_(b.fcmp_unordered("uno", a[0], a[0]), b.fcmp_ordered(">", a[0], a[1])),
                a[0],
                a[1],
            ),
            "minimum": lambda: b.select(
                b.or_(b.fcmp_unordered("uno", a[0], a[0]), b.fcmp_ordered("<", a[0], a[1])),
                a[0],
                a[1],
            ),
            "mod": lambda: self.fmod_floor(a[0], a[1], ty),
            "floordiv": lambda: self.floordiv(a[0], a[1], ty),
        }
        if op in simple:
            return simple[op]()
        intrinsics = {
            "abs": "llvm.fabs", "exp": "llvm.exp", "exp2": "llvm.exp2", "log": "llvm.log",
            "log2": "llvm.log2", "log10": "llvm.log10", "sqrt": "llvm.sqrt", "sin": "llvm.sin",
            "cos": "llvm.cos", "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc",
            "round": "llvm.rint", "pow": "llvm.pow", "copysign": "llvm.copysign",
        }  # fmt: skip
        if op in intrinsics:
            return self.intrinsic(intrinsics[op], ty, a)
        libm = {
            "expm1", "log1p", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
            "acosh", "atanh", "erf", "erfc", "atan2", "hypot", "fmod", "lgamma",
        }  # fmt: skip
        if op in libm:
            return self.libm(op, ty, a)
        raise LLVMRenderError(f"kernel {self.plan.name}: the llvm back end has no '{op}' yet")

    def fmod_floor(self, x: Any, y: Any, ty: ir.Type) -> Any:
        b = self.b
        m = b.frem(x, y)
        zero = ir.Constant(ty, 0.0)
        fix = b.and_(
            b.fcmp_ordered("!=", m, zero),
            b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", m, zero)),
        )
        return b.select(fix, b.fadd(m, y), m)

    def floordiv(self, x: Any, y: Any, ty: ir.Type) -> Any:
        # torch's: through fmod, rounded to the nearest integer; x / y for a zero divisor
        b = self.b
        zero, one, half = ir.Constant(ty, 0.0), ir.Constant(ty, 1.0), ir.Constant(ty, 0.5)
        m = b.frem(x, y)
        d = b.fdiv(b.fsub(x, m), y)
        fix = b.and_(
            b.fcmp_ordered("!=", m, zero),
            b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", m, zero)),
        )
        d = b.select(fix, b.fsub(d, one), d)
        f = self.intrinsic("llvm.floor", ty, [d])
        r = b.select(b.fcmp_ordered(">", b.fsub(d, f), half), b.fadd(f, one), f)
        q = b.fdiv(x, y)
        r = b.select(
            b.fcmp_ordered("==", d, zero), self.intrinsic("llvm.copysign", ty, [zero, q]), r
        )
        return b.select(b.fcmp_ordered("==", y, zero), q, r)

    def int_op(self, op: str, a: list[Any], ty: ir.Type, src: DType) -> Any:
        b = self.b
        zero = ir.Constant(ty, 0)
        unsigned = src is DType.U8 or src.is_bool
        if op in ("floordiv", "mod"):
            fail = self.fn.append_basic_block("div.zero")
            ok = self.fn.append_basic_block("div.ok")
            b.cbranch(b.icmp_signed("==", a[1], zero), fail, ok)
            b.position_at_end(fail)
            b.ret(ir.Constant(I64, DIVISION_BY_ZERO))
            b.position_at_end(ok)
            if unsigned:
                return b.udiv(*a) if op == "floordiv" else b.urem(*a)
            minus_one = b.icmp_signed("==", a[1], ir.Constant(ty, -1))
            d = b.select(minus_one, ir.Constant(ty, 1), a[1])  # INT_MIN / -1 traps; torch wraps
            q, r = b.sdiv(a[0], d), b.srem(a[0], d)
            fix = b.and_(
                b.icmp_signed("!=", r, zero),
                b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", d, zero)),
            )
            if op == "floordiv":
                out = b.select(fix, b.sub(q, ir.Constant(ty, 1)), q)
                return b.select(minus_one, b.neg(a[0]), out)
            out = b.select(fix, b.add(r, d), r)
            return b.select(minus_one, zero, out)
        cmp = b.icmp_unsigned if unsigned else b.icmp_signed
        table: dict[str, Callable[[], Any]] = {
            "add": lambda: b.or_(*a) if src.is_bool else b.add(*a),
            "sub": lambda: b.sub(*a),
            "mul": lambda: b.and_(*a) if src.is_bool else b.mul(*a),
            "neg": lambda: b.neg(a[0]),
            "square": lambda: b.mul(a[0], a[0]),
            "abs": lambda: a[0] if unsigned else b.select(cmp("<", a[0], zero), b.neg(a[0]), a[0]),
            "relu": lambda: a[0] if unsigned else b.select(cmp("<", a[0], zero), zero, a[0]),
            "maximum": lambda: b.select(cmp(">", a[0], a[1]), a[0], a[1]),
            "minimum": lambda: b.select(cmp("<", a[0], a[1]), a[0], a[1]),
            "sign": lambda: b.sub(
                b.zext(cmp(">", a[0], zero), ty) if ty != I1 else cmp(">", a[0], zero),
                b.zext(cmp("<", a[0], zero), ty) if ty != I1 else cmp("<", a[0], zero),
            ),
            "floor": lambda: a[0],
            "ceil": lambda: a[0],
            "round": lambda: a[0],
            "trunc": lambda: a[0],
            "bitwise_not": lambda: b.not_(a[0]),
            "bitwise_and": lambda: b.and_(*a),
            "bitwise_or": lambda: b.or_(*a),
            "bitwise_xor": lambda: b.xor(*a),
            "shl": lambda: self.shift(a, ty, left=True, unsigned=unsigned),
            "shr": lambda: self.shift(a, ty, left=False, unsigned=unsigned),
        }
        if op in table:
            return table[op]()
        raise LLVMRenderError(f"kernel {self.plan.name}: the llvm back end has no integer '{op}'")

    def shift(self, a: list[Any], ty: ir.Type, left: bool, unsigned: bool) -> Any:
        b = self.b
        if ty == I1:
            return b.and_(a[0], b.not_(a[1]))
        bits = ir.Constant(ty, ty.width)
        inside = b.and_(
            b.icmp_signed(">=", a[1], ir.Constant(ty, 0)) if not unsigned else ir.Constant(I1, 1),
            (b.icmp_unsigned if unsigned else b.icmp_signed)("<", a[1], bits),
        )
        if left:
            return b.select(
                inside, b.shl(a[0], b.select(inside, a[1], ir.Constant(ty, 0))), ir.Constant(ty, 0)
            )
        amount = b.select(inside, a[1], ir.Constant(ty, ty.width - 1))
        return b.lshr(a[0], amount) if unsigned else b.ashr(a[0], amount)

    # -- accumulators

    def _accinit(self, i: AccInit) -> None:
        vt = value_type(i.dtype)
        if i.kind in ("sum", "prod"):
            t = (F64 if i.dtype is DType.F64 else F32) if i.dtype.is_float else I64
            init = [ir.Constant(t, 0 if i.kind == "sum" else 1)]
        elif i.kind == "any":
            t, init = I1, [ir.Constant(I1, 0)]
        elif i.kind in ("max", "min", "argmax", "argmin"):
            low = i.kind in ("max", "argmax")
            if i.dtype.is_float:
                start = ir.Constant(vt, float("-inf") if low else float("inf"))
            elif i.dtype.is_bool:
                start = ir.Constant(I1, 0 if low else 1)
            elif i.dtype is DType.U8:
                start = ir.Constant(vt, 0 if low else 255)
            else:
                w = vt.width
                start = ir.Constant(vt, -(2 ** (w - 1)) if low else 2 ** (w - 1) - 1)
            t, init = vt, [start]
            if i.kind.startswith("arg"):
                init.append(ir.Constant(I64, -1))
        elif i.kind == "welford":
            t = F64 if i.dtype in (DType.F64, DType.I64, DType.I32) else F32
            init = [ir.Constant(t, 0.0)] * 3
        else:
            raise LLVMRenderError(f"kernel {self.plan.name}: reduction kind '{i.kind}'")
        slots = [self.slot(c.type, c) for c in init]
        self.accs[i.acc] = (i.kind, i.dtype, slots)

    def _accumulate(self, i: Accumulate) -> None:
        b = self.b
        kind, dtype, slots = self.accs[i.acc]
        v = self.operand(i.value, i.dtype)
        src = self.dtypes.get(i.value, i.dtype) if not isinstance(i.value, Literal) else i.dtype
        s = b.load(slots[0])
        if kind in ("sum", "prod"):
            t = s.type
            w = self.convert(
                v, src, DType.F64 if t == F64 else (DType.F32 if t == F32 else DType.I64)
            )
            if t in (F32, F64):
                out = b.fadd(s, w) if kind == "sum" else b.fmul(s, w)
            else:
                out = b.add(s, w) if kind == "sum" else b.mul(s, w)
            b.store(out, slots[0])
        elif kind == "any":
            b.store(b.or_(s, self.convert(v, src, DType.BOOL)), slots[0])
        elif kind in ("max", "min"):
            b.store(
                self.op("maximum" if kind == "max" else "minimum", [s, v], dtype, dtype), slots[0]
            )
        elif kind in ("argmax", "argmin"):
            si = b.load(slots[1])
            ri = self.index(i.rindex) if i.rindex is not None else ir.Constant(I64, 0)
            if dtype.is_float:
                better = b.fcmp_ordered(">" if kind == "argmax" else "<", v, s)
                nan = b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", s, s))
                better = b.or_(better, nan)
            else:
                cmp = b.icmp_unsigned if (dtype is DType.U8 or dtype.is_bool) else b.icmp_signed
                better = cmp(">" if kind == "argmax" else "<", v, s)
            take = b.or_(better, b.icmp_signed("<", si, ir.Constant(I64, 0)))
            b.store(b.select(take, v, s), slots[0])
            b.store(b.select(take, ri, si), slots[1])
        else:  # welford
            t = s.type
            x = self.convert(v, src, DType.F64 if t == F64 else DType.F32)
            n = b.fadd(b.load(slots[2]), ir.Constant(t, 1.0))
            d = b.fsub(x, s)
            mean = b.fadd(s, b.fdiv(d, n))
            b.store(mean, slots[0])
            b.store(b.fadd(b.load(slots[1]), b.fmul(d, b.fsub(x, mean))), slots[1])
            b.store(n, slots[2])

    def _accresult(self, i: AccResult) -> None:
        kind, dtype, slots = self.accs[i.acc]
        loaded = [self.b.load(s) for s in slots]
        if kind in ("argmax", "argmin"):
            loaded = [loaded[1]]
        for dst, dt, v in zip(i.dsts, i.dtypes, loaded):
            if v.type != value_type(dt):  # an int64 sum of i32, a welford of ints in f64
                v = self.convert(v, _dtype_of(v.type, dt), dt)
            self.vals[dst] = v
            self.dtypes[dst] = dt


def _dtype_of(ty: ir.Type, fallback: DType) -> DType:
    if ty == F64:
        return DType.F64
    if ty == F32:
        return DType.F32 if fallback not in (DType.F16, DType.BF16) else fallback
    if ty == I64:
        return DType.I64
    return fallback


def render_module(plans: list[KernelPlan], symbol: Callable[[str], str], triple: str) -> ir.Module:
    """One LLVM module with a function for each plan."""
    m = ir.Module(name="fir")
    m.triple = triple
    for p in plans:
        _Kernel(m, p, symbol(p.name)).write()
    return m
