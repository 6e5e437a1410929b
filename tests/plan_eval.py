"""A slow, scalar evaluator of kernel plans: the tests' check that a plan means what the program
means, independent of any renderer.

``PlanKernels(plans)`` has the ``call(name, pointers, sizes)`` method the runtime calls; it
views each buffer through its data pointer and runs the plan's instructions one element at a
time in Python, using the reference interpreter's scalar semantics (``apply_elementwise`` on
0-d tensors). Keep shapes small.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import sympy
import torch
from fir.backends.plan import KernelPlan
from fir.backends.plan import instructions as ins
from fir.ir.dtypes import DType
from fir.ir.graph import Literal
from fir.ir.interpreter import apply_elementwise, cast_tensor, eval_index, literal_tensor


class PlanKernels:
    def __init__(self, plans: list[KernelPlan]) -> None:
        self.plans = {p.name: p for p in plans}

    def call(self, name: str, pointers: list[int], sizes: list[int]) -> tuple[int, int]:
        plan = self.plans[name]
        env: dict[Any, Any] = {}
        for s, v in zip(plan.sizes, sizes):
            env[sympy.Symbol(s, integer=True, positive=True)] = v
        buffers: dict[str, torch.Tensor] = {}
        for a, ptr in zip(plan.args, pointers):
            n = (
                int(sympy.sympify(a.elements).subs(env))
                if not isinstance(a.elements, int)
                else a.elements
            )
            dt = a.dtype.to_torch()
            itemsize = torch.empty(0, dtype=dt).element_size()
            raw = (ctypes.c_char * max(n * itemsize, 1)).from_address(ptr)
            buffers[a.name] = (
                torch.frombuffer(raw, dtype=dt, count=n) if n else torch.empty(0, dtype=dt)
            )
        for sc in plan.scratch:  # one row at a time here: one array serves every row
            buffers[sc.name] = torch.empty(sc.elements, dtype=sc.dtype.to_torch())
        try:
            _Run(plan, buffers, env).block(0, len(plan.instrs))
        except _Fault as f:
            return f.code, f.value
        return 0, 0


class _Fault(Exception):
    def __init__(self, code: int, value: int) -> None:
        self.code, self.value = code, value


class _Run:
    def __init__(self, plan: KernelPlan, buffers: dict[str, torch.Tensor], env: dict[Any, Any]):
        self.plan, self.buffers, self.env = plan, buffers, env
        self.values: dict[str, Any] = {}
        self.accs: dict[str, Any] = {}
        self.match = _match_loops(plan)

    def index(self, e: Any) -> int:
        if isinstance(e, int):
            return e
        return int(eval_index(e, self.env))

    def operand(self, o: Any, dtype: DType | None = None) -> Any:
        if isinstance(o, Literal):
            return o
        return self.values[o]

    def block(self, start: int, end: int) -> None:
        k = start
        instrs = self.plan.instrs
        while k < end:
            i = instrs[k]
            if isinstance(i, ins.LoopBegin):
                close = self.match[k]
                var = sympy.Symbol(i.var, integer=True, nonnegative=True)
                for v in range(self.index(i.size)):
                    self.env[var] = v
                    self.block(k + 1, close)
                k = close + 1
                continue
            self.step(i)
            k += 1

    def step(self, i: Any) -> None:
        if isinstance(i, ins.Load):
            if i.mask is not None and not bool(self.values[i.mask]):
                other = i.other if i.other is not None else Literal(0)
                self.values[i.dst] = literal_tensor(other.value, i.dtype.to_torch())
            else:
                self.values[i.dst] = self.buffers[i.buffer][self.index(i.index)].clone()
        elif isinstance(i, ins.Compute):
            args = [self.operand(a) for a in i.args]
            if i.op == "cast":
                (a,) = args
                a = literal_tensor(a.value, i.dtype.to_torch()) if isinstance(a, Literal) else a
                # FIR's cast rule (saturating, NaN to 0), not torch's undefined ``.to``
                self.values[i.dst] = cast_tensor(a, i.dtype.to_torch())
                return
            out = apply_elementwise(i.op, args, i.dtype.to_torch())
            self.values[i.dst] = out.to(i.dtype.to_torch())
        elif isinstance(i, ins.Constant):
            self.values[i.dst] = literal_tensor(i.value.value, i.dtype.to_torch())
        elif isinstance(i, ins.IndexValue):
            self.values[i.dst] = torch.tensor(self.index(i.index), dtype=i.dtype.to_torch())
        elif isinstance(i, ins.CheckIndex):
            v = int(self.values[i.src])
            if not 0 <= v < self.index(i.bound):
                raise _Fault(i.code, v)
            self.env[sympy.Symbol(i.symbol, integer=True)] = v
            self.values[i.symbol] = v
        elif isinstance(i, ins.AccInit):
            self.accs[i.acc] = []
        elif isinstance(i, ins.Accumulate):
            v = self.operand(i.value)
            if isinstance(v, Literal):
                v = literal_tensor(v.value, i.dtype.to_torch())
            at = self.index(i.rindex) if i.rindex is not None else 0
            self.accs[i.acc].append((at, v.to(i.dtype.to_torch()).reshape(())))
        elif isinstance(i, ins.AccResult):
            from fir.ir.interpreter import _reduce_rows

            # argmax/argmin count positions row-major over the reduced loops as the IR writes
            # them, whatever order the loops run in
            items = [v for _, v in sorted(self.accs[i.acc], key=lambda p: p[0])]
            rows = torch.stack(items) if items else torch.empty(0)
            outs = _reduce_rows(i.kind, rows.reshape(1, -1), [d.to_torch() for d in i.dtypes])
            for name, out in zip(i.dsts, outs):
                self.values[name] = out.reshape(())
        elif isinstance(i, ins.Store):
            v = self.operand(i.value)
            if isinstance(v, Literal):
                v = literal_tensor(v.value, i.dtype.to_torch())
            self.buffers[i.buffer][self.index(i.index)] = v.to(i.dtype.to_torch())
        elif isinstance(i, ins.LoopEnd):  # pragma: no cover - consumed by block
            pass
        else:  # pragma: no cover
            raise TypeError(i)


def _match_loops(plan: KernelPlan) -> dict[int, int]:
    out: dict[int, int] = {}
    stack: list[int] = []
    for k, i in enumerate(plan.instrs):
        if isinstance(i, ins.LoopBegin):
            stack.append(k)
        elif isinstance(i, ins.LoopEnd):
            out[stack.pop()] = k
    return out


def element_count(e: Any) -> int:
    return math.prod(e) if isinstance(e, (list, tuple)) else int(e)
