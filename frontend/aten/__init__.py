"""The aten → FIR op table: one converter per aten overload, one module per op family.

A converter receives an :class:`~fir.frontend.emitter.Emitter` and the node's arguments (FX
nodes already replaced by FIR values) and returns the FIR value(s) of the node. It raises
:class:`~fir.frontend.emitter.Fallback` for a call it does not handle; the importer then runs
the aten op itself (an extern node), so no table lists the ops kept as extern calls. Result
types always come from PyTorch's own shape propagation (``node.meta['val']``); the emitter
refuses ops whose FIR typing disagrees, so a converter cannot silently change a dtype or a shape.

Every family registers its converters into the one table, :data:`CONVERTERS`, with the
``@register("aten.<op>.<overload>")`` decorator of :mod:`.registry`; importing this package
loads every family:

- :mod:`.pointwise`: elementwise math, comparisons, logical and bitwise ops, ``where``,
  ``clamp``, casts;
- :mod:`.reductions`: ``sum``, ``mean``, ``max``/``min``, arg-reductions, ``var``/``std``, norms;
- :mod:`.views`: views, layout and data movement, pads, identities, the ``*_copy`` variants;
- :mod:`.indexing`: ``embedding``, ``gather``, ``index_select``, advanced indexing, scatters;
- :mod:`.creation`: ``full``/``zeros``/``ones``, ``arange``, ``linspace``, ``eye``, fills;
- :mod:`.linalg`: matmul and friends, ``trace``, ``linalg_cross``;
- :mod:`.nn`: softmax, activations, pooling;
- :mod:`.normalization`: layer, RMS, batch and group norm;
- :mod:`.losses`: NLL, cross entropy, MSE, Huber, BCE …;
- :mod:`.collectives`: functional collectives (``_c10d_functional.*``) as ordered extern calls;
- :mod:`.higher_order`: ``auto_functionalized_v2`` (a custom op that writes its arguments) as
  copies of the bases and one extern call of the op;
- :mod:`.backward`: the ops of backward graphs (activation and layer-norm gradients, NLL's,
  slices placed back into zeros, the embedding's scatter-add).

:mod:`.common` holds the helpers the families share.

Each family has two parts. First the aten ops that map to a FIR op (FIR keeps composite ops
such as ``softmax``, ``layer_norm`` or ``gelu`` composite: breaking them into primitives is the
``decompose`` pass's job). Then the *compositions*: aten ops with no FIR op of their own, written
with FIR tensor ops. Each composition follows the formula of ATen's CPU kernel (order of
operations, NaN and infinity cases), so the interpreter's result matches eager; where a case
cannot be matched the converter falls back.
"""

from . import (
    backward,
    collectives,
    creation,
    higher_order,
    indexing,
    linalg,
    losses,
    nn,
    normalization,
    pointwise,
    reductions,
    views,
)
from .registry import CONVERTERS, Converter, mapped_ops, register

__all__ = [
    "CONVERTERS",
    "Converter",
    "backward",
    "collectives",
    "creation",
    "higher_order",
    "indexing",
    "linalg",
    "losses",
    "mapped_ops",
    "nn",
    "normalization",
    "pointwise",
    "reductions",
    "register",
    "views",
]
