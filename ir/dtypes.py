"""Element types. Torch is imported only when a torch dtype is asked for."""

from __future__ import annotations

import math
import struct
from enum import Enum
from typing import Any


class DType(Enum):
    """An element type; ``value`` is its name in the text format."""

    BOOL = "bool"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    U8 = "u8"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.BF16, DType.F32, DType.F64)

    @property
    def is_narrow_float(self) -> bool:
        """f16 and bf16: stored in 16 bits, computed in f32 (:attr:`compute_dtype`)."""
        return self in (DType.F16, DType.BF16)

    @property
    def compute_dtype(self) -> DType:
        """What arithmetic on this dtype computes in, in every back end, the interpreter and
        the frontend's compositions: f32 for f16 and bf16 (PyTorch's "opmath" type: a value is
        rounded to 16 bits only where it is stored), the dtype itself otherwise."""
        return DType.F32 if self.is_narrow_float else self

    @property
    def is_int(self) -> bool:
        return self in (DType.I8, DType.I16, DType.I32, DType.I64, DType.U8)

    @property
    def is_bool(self) -> bool:
        return self is DType.BOOL

    @property
    def is_signed(self) -> bool:
        return self.is_float or self in (DType.I8, DType.I16, DType.I32, DType.I64)

    def to_torch(self) -> Any:
        import torch

        return getattr(torch, _TORCH_NAME[self])

    @staticmethod
    def from_torch(dtype: Any) -> DType:
        name = str(dtype).removeprefix("torch.")
        for dt, tname in _TORCH_NAME.items():
            if tname == name:
                return dt
        raise KeyError(f"no FIR dtype for torch dtype {dtype}")

    def __str__(self) -> str:
        return self.value


_ITEMSIZE = {
    DType.BOOL: 1,
    DType.I8: 1,
    DType.I16: 2,
    DType.I32: 4,
    DType.I64: 8,
    DType.U8: 1,
    DType.F16: 2,
    DType.BF16: 2,
    DType.F32: 4,
    DType.F64: 8,
}

_TORCH_NAME = {
    DType.BOOL: "bool",
    DType.I8: "int8",
    DType.I16: "int16",
    DType.I32: "int32",
    DType.I64: "int64",
    DType.U8: "uint8",
    DType.F16: "float16",
    DType.BF16: "bfloat16",
    DType.F32: "float32",
    DType.F64: "float64",
}

DTYPES_BY_NAME: dict[str, DType] = {dt.value: dt for dt in DType}


def parse_dtype(name: str) -> DType | None:
    return DTYPES_BY_NAME.get(name)


def torch_name(dtype: DType) -> str:
    """``dtype``'s name in torch (``float32``, ``bfloat16``, ``bool``), without importing it."""
    return _TORCH_NAME[dtype]


def round_to(v: float, dtype: DType) -> float:
    """``v`` rounded to ``dtype`` (to nearest, ties to even), as a Python float."""
    if dtype is DType.F16:
        try:
            return struct.unpack("<e", struct.pack("<e", v))[0]
        except OverflowError:
            return math.copysign(math.inf, v)
    if dtype is DType.BF16 and not math.isnan(v):
        bits = struct.unpack("<I", struct.pack("<f", _f32(v)))[0]
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    return v if dtype is DType.F64 or math.isnan(v) else _f32(v)


def literal_value(v: float, dtype: DType, exact: bool = False) -> float:
    """The float ``v`` as a value of the float ``dtype``'s compute type (f32 for f16 and bf16,
    :attr:`DType.compute_dtype`); ``exact``: rounded to ``dtype`` first, as the interpreter
    rounds a literal that becomes a tensor of that dtype."""
    return round_to(round_to(v, dtype) if exact else v, dtype.compute_dtype)


def saturating_type(dtype: DType) -> DType:
    """The integer type a float converts to on its way to the integer ``dtype`` (toward zero,
    saturating, NaN to 0: docs/ops.md, ``cast``): i64 for u8, whose low 8 bits it keeps (as
    PyTorch converts: -1.5 -> 255), ``dtype`` itself otherwise."""
    return DType.I64 if dtype is DType.U8 else dtype


def int_to_float(v: int, dtype: DType) -> float:
    """The integer ``v`` converted to the float ``dtype`` as PyTorch converts a Python integer
    (``torch.tensor(v, dtype=...)``, what a masked load's integer ``other`` holds): within
    int64, rounded to nearest (ties to even) from the integer itself to f32 or f64, and f16 and
    bf16 through f32; past int64, through a double."""
    if not -(1 << 63) <= v < 1 << 63:
        try:
            return round_to(float(v), dtype)
        except OverflowError:
            return math.copysign(math.inf, v)
    bits, mag = (53 if dtype is DType.F64 else 24), abs(v)
    drop = max(mag.bit_length() - bits, 0)
    if drop:
        q, r = divmod(mag, 1 << drop)
        half = 1 << (drop - 1)
        mag = (q + (r > half or (r == half and q & 1))) << drop
    out = math.copysign(float(mag), v)  # exact: at most ``bits`` significant bits
    return out if dtype in (DType.F32, DType.F64) else round_to(out, dtype)


def _f32(v: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)
