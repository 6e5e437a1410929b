"""libdevice's functions for ``TRITON_INTERPRET=1``: the interpreter runs a kernel as Python
over numpy arrays and cannot call CUDA's libdevice (its externs raise there), so generated code
and :mod:`fir.backends.triton.helpers` call math through this module instead. Each function
computes with torch's own operator on the lanes, in the lanes' dtype, so the interpreter's
results are eager's. It is a run-time library (the interpreter's stand-in for libdevice, called
while a kernel runs), not part of rendering: no generated code names it.

Only imported when ``TRITON_INTERPRET=1``; names mirror ``triton.language.extra.libdevice``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _data(x: Any) -> tuple[np.ndarray, Any]:
    if isinstance(x, tl.tensor):
        return np.asarray(x.handle.data), x
    return np.asarray(x, dtype=np.float32), None


def _wrap(data: np.ndarray, like: Any, dtype: Any = None) -> tl.tensor:
    scalar = dtype if dtype is not None else like.dtype.scalar
    block = like.type if dtype is None else _block(like, scalar)
    return tl.tensor(TensorHandle(np.ascontiguousarray(data), scalar), block)


def _block(like: Any, scalar: Any) -> Any:
    if like.type.is_block():
        return tl.block_type(scalar, like.type.get_block_shapes())
    return scalar


def _torch(fn: Callable[..., torch.Tensor], arity: int = 1) -> Callable[..., tl.tensor]:
    def run(*args: Any) -> tl.tensor:
        datas, likes = zip(*(_data(a) for a in args[:arity]))
        like = next(t for t in likes if t is not None)
        dtype = np.asarray(like.handle.data).dtype
        arrays = np.broadcast_arrays(*[np.asarray(d, dtype=dtype) for d in datas])
        out = fn(*[torch.from_numpy(np.array(a)) for a in arrays]).numpy()
        if out.dtype == np.bool_:
            return _wrap(out.astype(np.int32), like, tl.int32)
        return _wrap(out.astype(dtype), like)

    return run


# libdevice's names of torch's operators (its own where they differ)
_BINARY = ("fmod", "pow", "atan2", "hypot", "copysign")
_RENAMED = {"rint": "round"}


def __getattr__(name: str) -> Callable[..., tl.tensor]:
    """Libdevice's function ``name`` (``exp``, ``fmod``, ``rint`` …) as torch's operator on the
    lanes, made at its first use."""
    op = getattr(torch, _RENAMED.get(name, name), None)
    if name.startswith("_") or op is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    fn = globals()[name] = _torch(op, 2 if name in _BINARY else 1)
    return fn


def _float_to_int(bits: int, nan: int) -> Callable[[Any], tl.tensor]:
    """The GPU's ``cvt.rzi``: toward zero, saturating at the type's range, NaN to ``nan``
    (measured on an H200: ``float2ll_rz`` gives the smallest i64 for NaN, ``float2int_rz`` 0)."""
    top = float(2 ** (bits - 1))
    scalar, np_type = (tl.int64, np.int64) if bits == 64 else (tl.int32, np.int32)

    def run(x: Any) -> tl.tensor:
        data, like = _data(x)
        wide = data.astype(np.float64)
        safe = np.where(np.isnan(wide) | (wide >= top) | (wide < -top), 0.0, wide)
        out = np.trunc(safe).astype(np_type)
        out = np.where(wide >= top, 2 ** (bits - 1) - 1, out)
        out = np.where(wide < -top, -(2 ** (bits - 1)), out)
        out = np.where(np.isnan(wide), nan, out).astype(np_type)
        return _wrap(out, like, scalar)

    return run


float2ll_rz = _float_to_int(64, -(2**63))
float2int_rz = _float_to_int(32, 0)
double2ll_rz = _float_to_int(64, -(2**63))
double2int_rz = _float_to_int(32, 0)
