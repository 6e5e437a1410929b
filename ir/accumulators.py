"""What a reduction accumulates in: the state of each reduction kind, stated once.

A reduction node (``sum``, ``prod``, ``max``, ``min``, ``any``, ``argmax``, ``argmin``,
``welford``) keeps a state of one or more components while it reads its values. Which dtype
each component has, and the value it starts from (the kind's identity: what masked-out lanes
contribute too), is a fact about the op, not about a back end: the C++, llvm and Triton
renderers write each component in their own syntax from :func:`state`.

The rules follow PyTorch's:

* sums and products of floats in f32 (f64 for f64: f16/bf16 are computed in f32, see
  :attr:`~fir.ir.dtypes.DType.compute_dtype`); of integers and bools in i64 (torch's rule:
  the same result modulo 2^n once stored);
* ``max``/``min`` keep a value of the reduced dtype, starting from its lowest (highest) value,
  -inf (inf) for floats; ``argmax``/``argmin`` add the i64 index of that value, starting at -1;
* ``any`` is a bool starting false;
* ``welford`` (mean, M2, count) in f64 for f64 and for 32- and 64-bit integers, else f32, all
  starting at 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .dtypes import DType

KINDS = ("sum", "prod", "max", "min", "any", "argmax", "argmin", "welford")


@dataclass(frozen=True)
class Component:
    """One component of a reduction's state: its dtype, its start value (a Python number:
    ``-inf``/``inf`` for float extremes, ``True``/``False`` for bools), and whether it is a
    result of the reduction (an argmax gives its index, not its value)."""

    dtype: DType
    start: float | int | bool
    result: bool = True


def state(kind: str, dtype: DType) -> tuple[Component, ...]:
    """The state of a ``kind`` reduction over values of ``dtype``, component by component;
    ``KeyError`` for an unknown kind."""
    if kind in ("sum", "prod"):
        start = 0 if kind == "sum" else 1
        if dtype.is_float:
            return (Component(DType.F64 if dtype is DType.F64 else DType.F32, float(start)),)
        return (Component(DType.I64, start),)
    if kind == "any":
        return (Component(DType.BOOL, False),)
    if kind in ("max", "min", "argmax", "argmin"):
        arg = kind.startswith("arg")
        value = Component(dtype, extreme(dtype, lowest=kind in ("max", "argmax")), not arg)
        return (value, Component(DType.I64, -1)) if arg else (value,)
    if kind == "welford":
        t = DType.F64 if dtype in (DType.F64, DType.I64, DType.I32) else DType.F32
        return (Component(t, 0.0),) * 3
    raise KeyError(f"unknown reduction kind '{kind}'")


def extreme(dtype: DType, lowest: bool) -> float | int | bool:
    """The lowest (or highest) value of ``dtype``: -inf (inf) for floats, False (True) for
    bools, the integer range's end for integers."""
    if dtype.is_float:
        return -math.inf if lowest else math.inf
    if dtype.is_bool:
        return not lowest
    if dtype is DType.U8:
        return 0 if lowest else 255
    bits = dtype.itemsize * 8
    return -(2 ** (bits - 1)) if lowest else 2 ** (bits - 1) - 1


# ---------------------------------------------------------------------------------------------
# merging two states


@dataclass(frozen=True)
class Step:
    """``dst = op(args)``: an elementwise op of the IR (``add``, ``lt``, ``where`` …) of
    ``dtype``. An argument is a component of the states merged (``a0``, ``a1`` … of the one
    merged into, ``b0`` … of the other), an earlier step's ``dst``, or a number (a literal
    of the dtype of the step's named operands)."""

    dst: str
    op: str
    args: tuple[str | float | int | bool, ...]
    dtype: DType


@dataclass(frozen=True)
class Merge:
    """How two states of a reduction combine into one (threads, vector lanes, the elements of
    a ``tl.reduce``): ``steps`` in order, then ``results``, the name each component takes
    from (a step's ``dst`` or an ``a``/``b`` component). ``guard`` (only :func:`update`'s):
    a bool step; the state takes the results only where it holds, and stays elsewhere.
    ``dtypes``: the dtype of every name the steps read (the components, :func:`update`'s
    ``v``, ``i`` and ``inv``) or define."""

    steps: tuple[Step, ...]
    results: tuple[str, ...]
    guard: str | None = None
    dtypes: Mapping[str, DType] = field(default_factory=dict, compare=False)

    def typed(self, inputs: Mapping[str, DType]) -> Merge:
        """This merge with its ``dtypes``: the names it reads first, then its steps'."""
        return replace(self, dtypes={**inputs, **{s.dst: s.dtype for s in self.steps}})


def merge(kind: str, dtype: DType) -> Merge:
    """The merge of two states of a ``kind`` reduction over ``dtype`` values (:func:`state`),
    stated once for every renderer, which writes each step with its op table:

    * sum, prod, max, min, any: the op of the kind (NaN-propagating ``maximum``/``minimum``);
    * argmax/argmin: the better value wins, NaN counts as the best, and of equal values (two
      NaNs are equal here) the smaller index, whichever state it comes from, as torch's
      first-index rule; an index < 0 is an empty state, which never wins;
    * welford: Chan's formula for (mean, M2, count); an empty other state leaves this one.

    The steps read the components ``a0`` … of the state merged into and ``b0`` … of the
    other."""
    comps = state(kind, dtype)
    inputs = {f"{side}{k}": c.dtype for side in "ab" for k, c in enumerate(comps)}
    return _merge(kind, dtype).typed(inputs)


def _merge(kind: str, dtype: DType) -> Merge:
    """:func:`merge`'s steps and results (it adds their dtypes)."""
    comps = state(kind, dtype)
    t = comps[0].dtype
    b = DType.BOOL
    if kind in ("sum", "prod", "max", "min", "any"):
        op = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}.get(
            kind, "logical_or"
        )
        return Merge((Step("r", op, ("a0", "b0"), t),), ("r",))
    if kind in ("argmax", "argmin"):
        i64 = DType.I64
        steps = [
            Step("better", "gt" if kind == "argmax" else "lt", ("b0", "a0"), b),
            Step("equal", "eq", ("b0", "a0"), b),
        ]
        if dtype.is_float:
            steps += [
                Step("a_nan", "ne", ("a0", "a0"), b),
                Step("b_nan", "ne", ("b0", "b0"), b),
                Step("a_num", "logical_not", ("a_nan",), b),
                Step("nan_wins", "bitwise_and", ("b_nan", "a_num"), b),
                Step("b_better", "bitwise_or", ("better", "nan_wins"), b),
                Step("nans", "bitwise_and", ("a_nan", "b_nan"), b),
                Step("same", "bitwise_or", ("equal", "nans"), b),
            ]
        better, same = ("b_better", "same") if dtype.is_float else ("better", "equal")
        steps += [
            Step("earlier", "lt", ("b1", "a1"), b),
            Step("tie", "bitwise_and", (same, "earlier"), b),
            Step("a_empty", "lt", ("a1", 0), b),
            Step("wins", "bitwise_or", (better, "tie"), b),
            Step("wins_or_empty", "bitwise_or", ("wins", "a_empty"), b),
            Step("b_full", "ge", ("b1", 0), b),
            Step("take", "bitwise_and", ("b_full", "wins_or_empty"), b),
            Step("value", "where", ("take", "b0", "a0"), dtype),
            Step("index", "where", ("take", "b1", "a1"), i64),
        ]
        return Merge(tuple(steps), ("value", "index"))
    if kind == "welford":
        return Merge(
            (
                Step("n", "add", ("a2", "b2"), t),
                Step("d", "sub", ("b0", "a0"), t),
                Step("share", "div", ("b2", "n"), t),  # NaN for two empty states: not taken
                Step("shift", "mul", ("d", "share"), t),
                Step("mean", "add", ("a0", "shift"), t),
                Step("m2s", "add", ("a1", "b1"), t),
                Step("dd", "mul", ("d", "d"), t),
                Step("dda", "mul", ("dd", "a2"), t),
                Step("spread", "mul", ("dda", "share"), t),
                Step("m2", "add", ("m2s", "spread"), t),
                Step("b_empty", "eq", ("b2", 0.0), b),
                Step("mean_", "where", ("b_empty", "a0", "mean"), t),
                Step("m2_", "where", ("b_empty", "a1", "m2"), t),
            ),
            ("mean_", "m2_", "n"),
        )
    raise KeyError(f"unknown reduction kind '{kind}'")


def update(kind: str, dtype: DType, uniform: bool = False) -> Merge:
    """How one more value ``v`` (in the dtype of the state's first component: a renderer
    converts it) at position ``i`` updates a state of a ``kind`` reduction over ``dtype``:
    :func:`merge`'s rules, cheaper, as a loop meets its positions in increasing order.

    * sum, prod, max, min, any: the merge, ``v`` as the other state;
    * argmax/argmin: ``v`` and ``i`` replace a state they beat (NaN beats a number, tested
      where the state is a float) or an empty one; a tie keeps the earlier position;
    * welford: Welford's online mean, and M2 from the deviations from the old and the new
      mean (the steps after ``mean`` read the new one). ``uniform``: every lane of a block
      has seen as many values, so the caller keeps the count and gives its reciprocal
      ``inv``: a multiplication per element instead of a division.

    The steps name ``v``, ``i``, ``inv`` besides the state's ``a0`` … and earlier steps."""
    comps = state(kind, dtype)
    t = comps[0].dtype
    inputs = {f"a{k}": c.dtype for k, c in enumerate(comps)} | {"v": t, "i": DType.I64}
    return _update(kind, dtype, uniform).typed(inputs | ({"inv": t} if uniform else {}))


def _update(kind: str, dtype: DType, uniform: bool) -> Merge:
    """:func:`update`'s steps and results (it adds their dtypes)."""
    t = state(kind, dtype)[0].dtype
    b = DType.BOOL
    if kind in ("argmax", "argmin"):
        nan = (  # NaN beats a number; an integer is never NaN
            Step("v_nan", "isnan", ("v",), b),
            Step("a_nan", "isnan", ("a0",), b),
            Step("a_num", "logical_not", ("a_nan",), b),
            Step("nan_wins", "logical_and", ("v_nan", "a_num"), b),
            Step("wins", "logical_or", ("better", "nan_wins"), b),
        )
        steps = (
            Step("better", "gt" if kind == "argmax" else "lt", ("v", "a0"), b),
            *(nan if t.is_float else ()),
            Step("a_empty", "lt", ("a1", 0), b),
            Step("take", "logical_or", ("wins" if t.is_float else "better", "a_empty"), b),
        )
        return Merge(steps, ("v", "i"), guard="take")
    if kind == "welford":
        count = () if uniform else (Step("n", "add", ("a2", 1), t),)
        share = ("d", "inv") if uniform else ("d", "n")
        steps = (
            *count,
            Step("d", "sub", ("v", "a0"), t),
            Step("shift", "mul" if uniform else "div", share, t),
            Step("mean", "add", ("a0", "shift"), t),
            Step("dev", "sub", ("v", "mean"), t),
            Step("spread", "mul", ("d", "dev"), t),
            Step("m2", "add", ("a1", "spread"), t),
        )
        return Merge(steps, ("mean", "m2", "a2" if uniform else "n"))
    (step,) = merge(kind, dtype).steps
    return Merge((replace(step, args=("a0", "v")),), (step.dst,))
