"""Every memory access of a program, checked once against its storage before anything runs.

A compiled kernel indexes memory as its plan says and checks nothing per element but its
indirect indices (against their declared bounds). What keeps it inside its buffers is this
module, which checks, as the reference interpreter does while it runs:

* every unmasked load of a loop node: its index, over the node's loops (an indirect index over
  ``[0, bound)`` as declared), lies inside the storage of the buffer it reads;
* every view: its elements lie inside its root's storage;
* every buffer written into an argument's storage (``inplace``) fits that storage;
* every loop nest's iteration count and every storage's size in bytes fits an int64 (a kernel
  counts in int64: 2^64 + 5 iterations would run 5);
* no ``max``, ``min``, ``argmax`` or ``argmin`` reduces over no element (eager raises; a kernel
  would return its identity), and every size symbol is positive, as the interpreter requires.

For an index affine in the loop variables the range is exact (each coefficient's sign says
which end of its loop gives the minimum); floor division, modulo, min and max are bounded by
interval arithmetic, and where that bound fails, the index is evaluated over its whole box (up
to :data:`EXACT_POINTS` points) before the access is rejected.

The checks are written once, when the program is planned, as one Python function of the size
values (:class:`BoundsCheck`): the cost of a call is that function, never a pass over elements.
A program without size symbols is checked at once (a :class:`~.kernel.PlanError` naming the
node); one with size symbols at each call, by the runtime, which raises what it returns.

A store needs no check: it writes where its node's result layout puts each element, inside
the result's storage by construction. A masked load is not checked: where its mask is false it
touches no memory, and the mask is data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import sympy
from fir.ir.errors import Location
from fir.ir.graph import AliasNode, BodyOp, Graph, LoopNode, Value, alias_root
from fir.ir.printer import body_op_str
from fir.ir.symbolic import FloorDiv, Modulo, indirect_symbol
from fir.ir.types import Dim, TensorType, dim_str

from .kernel import PlanError

INT64_MAX = 2**63 - 1
EXACT_POINTS = 1 << 22  # the largest box an inexact bound is checked on point by point
EMPTY_KINDS = ("max", "min", "argmax", "argmin")  # reductions with no value for no element


@dataclass(frozen=True)
class Failure:
    """A check that failed. ``kind``: ``index`` (an access outside its storage), ``empty`` (a
    max/min over no element), ``size`` (a count past int64), ``input`` (a size symbol that is not
    positive)."""

    kind: str
    message: str
    loc: Location | None


@dataclass
class _Item:
    kind: str
    where: str  # the node (and op) it checks, as the interpreter names them
    loc: Location | None
    describe: Callable[..., str]  # the message, from the values the check returns
    exact: tuple[Any, dict[sympy.Symbol, Dim]] | None = None  # (index, ranges): inexact bound


class _Unsupported(Exception):
    """An expression the checker cannot write (a symbol it does not know, a fraction)."""


@dataclass
class BoundsCheck:
    """The checks of a program as one function of its size values (``sizes``, in order)."""

    sizes: list[str]
    items: list[_Item] = field(default_factory=list)
    source: str = ""
    fn: Callable[..., Any] | None = None
    # exact ranges already evaluated, by item and size values: a call at the same sizes again
    # does not walk the box again
    exact_ranges: dict[tuple[int, tuple[int, ...]], tuple[int, int] | None] = field(
        default_factory=dict
    )

    def __call__(self, values: Mapping[str, int]) -> Failure | None:
        """The first failed check at these size values, or None."""
        assert self.fn is not None
        args = tuple(values[s] for s in self.sizes)
        got = self.fn(*args)
        if got is None:
            return None
        item = self.items[got[0]]
        at = ", ".join(f"{s} = {v}" for s, v in zip(self.sizes, args))
        text = item.describe(*got[1:])
        if at and item.kind != "input":
            text += f", with {at}"
        return Failure(item.kind, f"{item.where}: {text}" if item.where else text, item.loc)

    def exact(self, k: int, args: tuple[int, ...]) -> tuple[int, int] | None:
        """The exact range of item ``k``'s index at these size values, evaluated over its box
        (None where the box has too many points)."""
        key = (k, args)
        if key in self.exact_ranges:
            return self.exact_ranges[key]
        item = self.items[k]
        assert item.exact is not None
        index, ranges = item.exact
        got = _exact_range(index, ranges, dict(zip(self.sizes, args)))
        if len(self.exact_ranges) < 4096:
            self.exact_ranges[key] = got
        return got


def program_checks(g: Graph, buffers: Mapping[str, Any], sizes: Sequence[str]) -> BoundsCheck:
    """The checks of ``g``. ``buffers``: its plan's (:class:`~.program.Buffer` by name; a
    load of a buffer the plan keeps in no storage, a kernel-local one, reads no memory);
    ``sizes``: its size symbols, in the order the check takes their values. An expression no
    check can be written for is a :class:`~.kernel.PlanError` (never an unchecked access)."""
    w = _Writer(list(sizes))
    for n in g.nodes:
        if isinstance(n, LoopNode) and n.reduction in EMPTY_KINDS:
            _located(n, partial(w.empty, n))
    w.positive()
    for a in g.args:
        _located(g, partial(w.too_big, a.type, f"argument %{a.name}", g.loc))
    for n in g.nodes:
        if isinstance(n, LoopNode) and n.body is not None:
            _located(n, partial(w.loop, n, buffers))
        elif isinstance(n, AliasNode) and n.base is not None:
            _located(n, partial(w.view, n))
    _located(g, lambda: w.in_place(g, buffers))
    return w.finish()


def _located(where: Any, check: Callable[[], None]) -> None:
    try:
        check()
    except _Unsupported as e:
        name = _node_name(where) if hasattr(where, "results") else f"@{where.name}"
        raise PlanError(f"{name}: no bounds check can be written for {e}", where.loc) from None


# ---------------------------------------------------------------------------------------------
# Writing the check function


class _Writer:
    def __init__(self, sizes: list[str]) -> None:
        self.check = BoundsCheck(sizes)
        self.names = {s: f"z{k}" for k, s in enumerate(sizes)}
        self.lines: list[str] = []

    def add(self, item: _Item) -> int:
        self.check.items.append(item)
        return len(self.check.items) - 1

    def py(self, e: Any) -> str:
        """``e``, an expression over size symbols, as Python over the function's arguments."""
        if isinstance(e, int):
            return repr(e)
        if isinstance(e, sympy.Integer):
            return repr(int(e))
        if isinstance(e, sympy.Symbol):
            name = self.names.get(e.name)
            if name is None:
                raise _Unsupported(e.name)
            return name
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(self.py(a) for a in e.args) + ")"
        if isinstance(e, sympy.Mul):
            return "(" + " * ".join(self.py(a) for a in e.args) + ")"
        if isinstance(e, sympy.Pow) and isinstance(e.args[1], sympy.Integer) and e.args[1] >= 0:
            return f"({self.py(e.args[0])} ** {int(e.args[1])})"
        if isinstance(e, FloorDiv):
            return f"({self.py(e.args[0])} // {self.py(e.args[1])})"
        if isinstance(e, Modulo):
            return f"({self.py(e.args[0])} % {self.py(e.args[1])})"
        if isinstance(e, (sympy.Min, sympy.Max)):
            fn = "min" if isinstance(e, sympy.Min) else "max"
            return f"{fn}(" + ", ".join(self.py(a) for a in e.args) + ")"
        raise _Unsupported(str(e))

    def interval(self, e: Any, ranges: Mapping[sympy.Symbol, Dim]) -> str:
        """Python for the (low, high) of ``e`` over ``ranges`` (each variable in ``[0, size)``)
        by interval arithmetic: exact for a monotone expression, wider otherwise."""
        if isinstance(e, (int, sympy.Integer)):
            return f"({int(e)}, {int(e)})"
        if isinstance(e, sympy.Symbol):
            if e in ranges:
                return f"(0, {self.py(ranges[e])} - 1)"
            v = self.py(e)
            return f"({v}, {v})"
        args = [self.interval(a, ranges) for a in e.args]
        if isinstance(e, sympy.Add):
            return f"_add({', '.join(args)})"
        if isinstance(e, sympy.Mul):
            return f"_mul({', '.join(args)})"
        if isinstance(e, sympy.Pow) and isinstance(e.args[1], sympy.Integer) and e.args[1] > 0:
            return f"_mul({', '.join([args[0]] * int(e.args[1]))})"
        if isinstance(e, FloorDiv):
            return f"_floordiv({args[0]}, {args[1]})"
        if isinstance(e, Modulo):
            return f"_mod({args[0]}, {args[1]})"
        if isinstance(e, sympy.Min):
            return f"_min({', '.join(args)})"
        if isinstance(e, sympy.Max):
            return f"_max({', '.join(args)})"
        raise _Unsupported(str(e))

    # -- the checks

    def empty(self, n: LoopNode) -> None:
        count = _product([s for _, s in n.reduction_ranges])
        loops = ", ".join(f"{v.name} < {dim_str(s)}" for v, s in n.reduction_ranges)
        kind = n.reduction

        def describe(value: int) -> str:
            return (
                f"{kind}() over no element: eager raises 'Expected reduction dim to have "
                f"non-zero size' (the reduction loops {loops} run {value} times)"
            )

        code = self.py(count)
        k = self.add(_Item("empty", _node_name(n), n.loc, describe))
        self.lines += [
            "    try:",
            f"        t = {code}",
            "    except ZeroDivisionError:",
            "        t = 1",
            f"    if t <= 0: return ({k}, t)",
        ]

    def positive(self) -> None:
        for s, z in self.names.items():

            def describe(value: int, s: str = s) -> str:
                if value > INT64_MAX:
                    return f"size symbol {s} is {value}, more than an int64 holds"
                return f"size symbol {s} must be positive, got {value}"

            k = self.add(_Item("input", "", None, describe))
            self.lines.append(f"    if {z} < 1 or {z} > {INT64_MAX}: return ({k}, {z})")

    def too_big(self, t: TensorType, what: str, loc: Location | None) -> None:
        """``t``'s storage in bytes fits an int64."""
        size = t.storage_size()
        if isinstance(size, int) and size * t.dtype.itemsize <= INT64_MAX:
            return

        def describe(value: int) -> str:
            return (
                f"{what} ({t}) needs {value} elements of storage, {value * t.dtype.itemsize} "
                "bytes: more than an int64 counts"
            )

        code = self.py(size)
        k = self.add(_Item("size", "", loc, describe))
        self.lines.append(f"    t = {code}")
        self.lines.append(f"    if t * {t.dtype.itemsize} > {INT64_MAX}: return ({k}, t)")

    def loop(self, n: LoopNode, buffers: Mapping[str, Any]) -> None:
        name = _node_name(n)
        ranges: dict[sympy.Symbol, Dim] = dict(n.ranges + n.reduction_ranges)
        for r in n.results:
            self.too_big(r.type, f"%{r.name}", n.loc)
        count = _product(list(ranges.values()))
        if not (isinstance(count, int) and count <= INT64_MAX):
            loops = ", ".join(f"{v.name} < {dim_str(s)}" for v, s in ranges.items())

            def describe(value: int) -> str:
                return f"its loops ({loops}) run {value} times: more than an int64 counts"

            code = self.py(count)
            k = self.add(_Item("size", name, n.loc, describe))
            self.lines.append(f"    if {code} > {INT64_MAX}: return ({k}, {code})")
        bounds: dict[sympy.Symbol, Dim] = {}
        assert n.body is not None
        for op in n.body.ops:
            if op.opcode == "indirect" and op.bound is not None:
                bounds[indirect_symbol("%" + op.result.name)] = op.bound
                if not (isinstance(op.bound, int) and op.bound <= INT64_MAX):
                    self.bound_fits(n, op)
            elif (
                op.opcode == "load"
                and op.mask is None
                and op.buffer is not None
                and op.buffer.name in buffers
            ):
                self.load(n, op, ranges, bounds, buffers)

    def bound_fits(self, n: LoopNode, op: BodyOp) -> None:
        def describe(value: int) -> str:
            return f"the bound {value} is more than an int64 holds"

        code = self.py(op.bound)
        k = self.add(_Item("size", f"{_node_name(n)}: {_op_name(op)}", op.loc or n.loc, describe))
        self.lines.append(f"    if {code} > {INT64_MAX}: return ({k}, {code})")

    def load(
        self,
        n: LoopNode,
        op: BodyOp,
        ranges: dict[sympy.Symbol, Dim],
        bounds: dict[sympy.Symbol, Dim],
        buffers: Mapping[str, Any],
    ) -> None:
        assert op.buffer is not None and op.index is not None
        buf = op.buffer
        where = f"{_node_name(n)}: {_op_name(op)}"
        index = op.index if isinstance(op.index, int) else sympy.sympify(op.index)
        box = dict(ranges)
        used: list[sympy.Symbol] = []
        if not isinstance(index, int):
            for s in index.free_symbols:
                if s in bounds:
                    box[s] = bounds[s]
                    used.append(s)
        held = buffers[buf.name]  # a view reads its root's storage: the interpreter's bound
        root = buffers.get(held.alias_of, held) if held.alias_of is not None else held
        elements = root.type.storage_size()
        static = isinstance(elements, int) and all(isinstance(d, int) for d in box.values())
        if static and not used and not isinstance(index, int) and not index.free_symbols - set(box):
            return  # the verifier bounded it (an index affine in loops of known sizes)
        through = "".join(
            f", through {s.name} < {dim_str(bounds[s])}" for s in sorted(used, key=str)
        )

        def describe(lo: int, hi: int, size: int) -> str:
            return (
                f"reads elements [{lo}, {hi}]{through}, outside its storage of {size} "
                f"element(s) (%{buf.name}: {buf.type})"
            )

        lines, exact = self.index_range(index, box)
        nonempty = " and ".join(f"{self.py(d)} >= 1" for d in box.values()) or "True"
        size_code = self.py(elements)
        k = self.add(
            _Item("index", where, op.loc or n.loc, describe, None if exact else (index, box))
        )
        self.lines.append(f"    if {nonempty}:")
        self.lines += ["        " + ln for ln in lines]
        self.lines.append(f"        n = {size_code}")
        if exact:
            self.lines.append(f"        if lo < 0 or hi >= n: return ({k}, lo, hi, n)")
            return
        # a wider bound than the index reaches, maybe: its exact range over the box decides
        args = ", ".join(self.names.values()) + ("," if len(self.names) == 1 else "")
        self.lines += [
            "        if lo < 0 or hi >= n:",
            f"            e = self.exact({k}, ({args}))",
            f"            if e is None or e[0] < 0 or e[1] >= n: return ({k}, *(e or (lo, hi)), n)",
        ]

    def index_range(self, index: Any, box: Mapping[sympy.Symbol, Dim]) -> tuple[list[str], bool]:
        """Lines that set ``lo`` and ``hi`` to the range of ``index`` over ``box``; whether
        that range is exact (an affine index)."""
        if isinstance(index, int):
            return [f"lo = hi = {index}"], True
        constant: list[Any] = []
        linear: dict[sympy.Symbol, list[Any]] = {}
        other: list[Any] = []
        for term in sympy.Add.make_args(sympy.expand(index)):
            found = term.free_symbols & set(box)
            if not found:
                constant.append(term)
                continue
            v = next(iter(found)) if len(found) == 1 else None
            factors = sympy.Mul.make_args(term)
            if v is not None and factors.count(v) == 1:
                rest = [f for f in factors if f != v]
                if not any(v in f.free_symbols for f in rest):
                    linear.setdefault(v, []).append(sympy.Mul(*rest))
                    continue
            other.append(term)
        lines = [f"lo = hi = {self.py(sympy.Add(*constant))}"]
        for v, coeffs in linear.items():
            lines.append(f"t = {self.py(sympy.Add(*coeffs))} * ({self.py(box[v])} - 1)")
            lines.append("if t < 0: lo += t")
            lines.append("else: hi += t")
        if other:
            lines.append(f"a, b = {self.interval(sympy.Add(*other), box)}")
            lines.append("lo += a")
            lines.append("hi += b")
        return lines, not other

    def view(self, n: AliasNode) -> None:
        assert n.base is not None
        t = n.result.type
        root = alias_root(n.base)
        size = root.type.storage_size()
        dims = [(d, s) for d, s in zip(t.shape, t.strides)]
        if all(isinstance(x, int) for x in [size, t.offset] + [x for p in dims for x in p]):
            return  # the verifier checked it
        where = _node_name(n)
        what = f"%{n.base.name}" if root is n.base else f"%{root.name} (through %{n.base.name})"

        def describe(lo: int, hi: int, elements: int) -> str:
            return (
                f"the view ({t}) reaches elements [{lo}, {hi}] of {what}, whose storage holds "
                f"{elements} element(s)"
            )

        nonempty = " and ".join(f"{self.py(d)} >= 1" for d, _ in dims) or "True"
        lines = [f"lo = hi = {self.py(t.offset)}"]
        for d, s in dims:
            lines.append(f"t = ({self.py(d)} - 1) * {self.py(s)}")
            lines.append("if t < 0: lo += t")
            lines.append("else: hi += t")
        size_code = self.py(size)
        k = self.add(_Item("index", where, n.loc, describe))
        self.lines.append(f"    if {nonempty}:")
        self.lines += ["        " + ln for ln in lines]
        self.lines.append(f"        n = {size_code}")
        self.lines.append(f"        if lo < 0 or hi >= n: return ({k}, lo, hi, n)")

    def in_place(self, g: Graph, buffers: Mapping[str, Any]) -> None:
        """A buffer that lives in an argument's storage (written in place of it) fits there."""
        args = {b.storage: b for b in buffers.values() if getattr(b, "argument", False)}
        for b in buffers.values():
            a = args.get(b.storage)
            if a is None or a is b or b.alias_of is not None:
                continue
            need, have = b.type.storage_size(), a.type.storage_size()
            if isinstance(need, int) and isinstance(have, int) and need <= have:
                continue

            def describe(need: int, have: int, b: Any = b, a: Any = a) -> str:
                return (
                    f"%{b.name} ({b.type}) is written in place of argument %{a.name} "
                    f"({a.type}): it needs {need} element(s), the argument holds {have}"
                )

            code_need, code_have = self.py(need), self.py(have)
            owner = next((v for v in _values(g) if v.name == b.name), None)
            loc = owner.owner.loc if owner is not None and owner.owner is not None else None
            k = self.add(_Item("index", "", loc, describe))
            self.lines.append(f"    t, n = {code_need}, {code_have}")
            self.lines.append(f"    if t > n: return ({k}, t, n)")

    def finish(self) -> BoundsCheck:
        check = self.check
        args = ", ".join(self.names.values())
        body = self.lines or []
        check.source = "\n".join([f"def check({args}):", *body, "    return None"]) + "\n"
        scope: dict[str, Any] = dict(_HELPERS)
        scope["self"] = check
        exec(compile(check.source, "<fir bounds>", "exec"), scope)  # noqa: S102 - written above
        check.fn = scope["check"]
        return check


# ---------------------------------------------------------------------------------------------
# Interval arithmetic (the generated function's helpers)


def _add(*xs: tuple[int, int]) -> tuple[int, int]:
    return sum(x[0] for x in xs), sum(x[1] for x in xs)


def _mul(*xs: tuple[int, int]) -> tuple[int, int]:
    lo, hi = xs[0]
    for a, b in xs[1:]:
        corners = (lo * a, lo * b, hi * a, hi * b)
        lo, hi = min(corners), max(corners)
    return lo, hi


def _floordiv(x: tuple[int, int], d: tuple[int, int]) -> tuple[int, int]:
    # a positive divisor (FIR's floordiv): monotone in each operand, so the corners bound it
    d0, d1 = max(d[0], 1), max(d[1], 1)
    corners = (x[0] // d0, x[0] // d1, x[1] // d0, x[1] // d1)
    return min(corners), max(corners)


def _mod(x: tuple[int, int], d: tuple[int, int]) -> tuple[int, int]:
    d0, d1 = max(d[0], 1), max(d[1], 1)
    if x[0] >= 0 and x[1] < d0:
        return x
    return 0, d1 - 1


def _min(*xs: tuple[int, int]) -> tuple[int, int]:
    return min(x[0] for x in xs), min(x[1] for x in xs)


def _max(*xs: tuple[int, int]) -> tuple[int, int]:
    return max(x[0] for x in xs), max(x[1] for x in xs)


_HELPERS: dict[str, Any] = {
    "_add": _add,
    "_mul": _mul,
    "_floordiv": _floordiv,
    "_mod": _mod,
    "_min": _min,
    "_max": _max,
}


def _exact_range(
    index: Any, ranges: Mapping[sympy.Symbol, Dim], values: Mapping[str, int]
) -> tuple[int, int] | None:
    """The least and greatest value of ``index`` over its box, point by point (None: too many
    points)."""
    import torch
    from fir.ir.symbolic import evaluate

    def value(d: Dim) -> int:
        if isinstance(d, int):
            return d
        return int(d.subs({s: values[s.name] for s in d.free_symbols}))

    variables = [s for s in index.free_symbols if s in ranges]
    extents = [value(ranges[s]) for s in variables]
    points = 1
    for e in extents:
        points *= max(e, 0)
    if points > EXACT_POINTS:
        return None
    if points == 0:
        return 0, -1
    grid: dict[Any, Any] = {}
    for k, (s, e) in enumerate(zip(variables, extents)):
        shape = [1] * len(variables)
        shape[k] = e
        grid[s] = torch.arange(e, dtype=torch.int64).reshape(shape)
    for s in index.free_symbols:
        if s not in grid:
            grid[s] = values[s.name]
    got = evaluate(
        index,
        grid,
        floordiv=lambda a, b: torch.div(torch.as_tensor(a), b, rounding_mode="floor"),
        mod=lambda a, b: torch.remainder(torch.as_tensor(a), b),
        minimum=lambda a, b: torch.minimum(torch.as_tensor(a), torch.as_tensor(b)),
        maximum=lambda a, b: torch.maximum(torch.as_tensor(a), torch.as_tensor(b)),
    )
    got = torch.as_tensor(got)
    return int(got.min()), int(got.max())


# ---------------------------------------------------------------------------------------------


def _product(dims: Sequence[Dim]) -> Dim:
    out: Any = 1
    for d in dims:
        out = out * d
    return out


def _node_name(n: Any) -> str:
    """``%y = pointwise``, ``%m = reduction max``, ``%v = view %x``: as the interpreter names a
    node in its errors."""
    names = ", ".join("%" + r.name for r in n.results)
    if isinstance(n, LoopNode):
        what = f"reduction {n.reduction}" if n.reduction else "pointwise"
    elif isinstance(n, AliasNode) and n.base is not None:
        what = f"view %{n.base.name}"
    else:
        what = type(n).__name__
    return f"{names} = {what}"


def _op_name(op: BodyOp) -> str:
    try:
        return body_op_str(op)
    except (AssertionError, AttributeError, TypeError, ValueError):  # a malformed op
        return f"%{op.result.name} = {op.opcode}"


def _values(g: Graph) -> list[Value]:
    return [r for n in g.nodes for r in n.results]


__all__ = ["EXACT_POINTS", "INT64_MAX", "BoundsCheck", "Failure", "program_checks"]
