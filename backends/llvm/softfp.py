"""The half-precision conversions LLVM calls as library functions, and a check that an object
file needs nothing the process lacks.

On a CPU without native f16 arithmetic (no AVX512-FP16: most Xeons before Sapphire Rapids, every
AMD EPYC to date) LLVM lowers some conversions to and from ``half`` to calls of compiler-rt's
``__truncsfhf2``, ``__truncdfhf2``, ``__extendhfsf2`` and ``__extendhfdf2``. LLVM 22 (llvmlite
0.50) also folds ``fptrunc (fptrunc double to float) to half`` into one ``double -> half``
conversion, which no instruction does. MCJIT resolves such names in the process, where the
compiler runtime is not loaded (libgcc_s has some of them from GCC 12, loaded locally if at
all), and an unresolved name becomes a call to address 0: a segmentation fault at the first
call of the kernel.

So the process gets its own: the four functions written here in integer LLVM IR (no
floating-point conversion at all, so compiling them needs no library call either), compiled
once per process for the same target as the kernels (so ``half`` is passed the same way,
in an XMM register since LLVM 15) and registered with ``llvm.add_symbol``. They round to
nearest, ties to even, as the hardware does; a NaN stays a quiet NaN with its sign and top
payload bits. And before an object is loaded, :func:`unresolved_symbols` lists the names it
needs that nothing provides, so a missing one is an error that says so, never a jump to 0.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable
from typing import Any

from llvmlite import ir

_lock = threading.Lock()
_engine: Any = None  # keeps the compiled helpers alive for the process's lifetime
_provided: dict[str, int] = {}


class _Format:
    """An IEEE binary format: total, exponent and fraction bits."""

    def __init__(self, bits: int, exponent: int, fraction: int) -> None:
        self.bits, self.exponent, self.fraction = bits, exponent, fraction
        self.bias = (1 << (exponent - 1)) - 1
        self.int = ir.IntType(bits)

    @property
    def inf(self) -> int:  # the bits of +infinity
        return ((1 << self.exponent) - 1) << self.fraction


HALF, SINGLE, DOUBLE = _Format(16, 5, 10), _Format(32, 8, 23), _Format(64, 11, 52)
_FLOAT_TYPES = {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}


def _narrow(b: ir.IRBuilder, x: ir.Value, src: _Format, dst: _Format) -> ir.Value:
    """The bits of ``dst`` nearest (ties to even) to the value whose ``src`` bits are ``x``."""
    t = src.int

    def c(v: int) -> ir.Constant:
        return ir.Constant(t, v)

    drop = src.fraction - dst.fraction  # fraction bits that rounding removes
    sign = b.shl(b.zext(b.trunc(b.lshr(x, c(src.bits - 1)), ir.IntType(1)), t), c(dst.bits - 1))
    mag = b.and_(x, c((1 << (src.bits - 1)) - 1))
    is_nan = b.icmp_unsigned(">", mag, c(src.inf))
    quiet = (1 << (dst.fraction - 1)) | dst.inf
    nan = b.or_(c(quiet), b.lshr(b.and_(mag, c((1 << src.fraction) - 1)), c(drop)))

    def rounded(value: ir.Value, shift: ir.Value) -> ir.Value:
        """``value >> shift`` rounded to nearest even (1 <= shift < src.bits)."""
        kept = b.lshr(value, shift)
        rest = b.and_(value, b.sub(b.shl(c(1), shift), c(1)))
        half = b.shl(c(1), b.sub(shift, c(1)))
        odd = b.icmp_unsigned("!=", b.and_(kept, c(1)), c(0))
        up = b.or_(
            b.icmp_unsigned(">", rest, half),
            b.and_(b.icmp_unsigned("==", rest, half), odd),
        )
        return b.add(kept, b.zext(up, t))

    # a normal result: rebias the exponent in place, then round the fraction; a carry out of
    # the fraction steps the exponent, and past the largest finite value gives infinity
    rebias = (src.bias - dst.bias) << src.fraction
    smallest_normal = (src.bias - dst.bias + 1) << src.fraction
    normal = rounded(b.sub(mag, c(rebias)), c(drop))
    normal = b.select(b.icmp_unsigned(">=", normal, c(dst.inf)), c(dst.inf), normal)
    # a subnormal (or zero) result: the significand with its leading bit, shifted further by
    # how far the exponent is below the smallest normal one (at most fraction + 2: all gone)
    exponent = b.lshr(mag, c(src.fraction))
    significand = b.and_(mag, c((1 << src.fraction) - 1))
    has_lead = b.icmp_unsigned("!=", exponent, c(0))
    significand = b.select(has_lead, b.or_(significand, c(1 << src.fraction)), significand)
    exponent = b.select(has_lead, exponent, c(1))
    below = b.sub(c(src.bias - dst.bias + 1), exponent)  # >= 1 where the result is subnormal
    shift = b.add(c(drop), below)
    shift = b.select(b.icmp_unsigned(">", shift, c(src.fraction + 2)), c(src.fraction + 2), shift)
    subnormal = rounded(significand, shift)
    finite = b.select(b.icmp_unsigned(">=", mag, c(smallest_normal)), normal, subnormal)
    result = b.or_(sign, b.select(is_nan, nan, finite))
    return b.trunc(result, dst.int)


def _widen(b: ir.IRBuilder, h: ir.Value, src: _Format, dst: _Format) -> ir.Value:
    """The ``dst`` bits of the value whose ``src`` bits are ``h`` (exact: ``dst`` is wider)."""
    t = dst.int

    def c(v: int) -> ir.Constant:
        return ir.Constant(t, v)

    x = b.zext(h, t)
    widen = dst.fraction - src.fraction
    sign = b.shl(b.lshr(x, c(src.bits - 1)), c(dst.bits - 1))
    exponent = b.and_(b.lshr(x, c(src.fraction)), c((1 << src.exponent) - 1))
    fraction = b.and_(x, c((1 << src.fraction) - 1))
    # infinity, or a NaN: its payload kept and made quiet, as the hardware's conversions do
    special = b.or_(c(dst.inf), b.shl(fraction, c(widen)))
    quiet = b.select(b.icmp_unsigned("!=", fraction, c(0)), c(1 << (dst.fraction - 1)), c(0))
    special = b.or_(special, quiet)
    rebias = dst.bias - src.bias
    normal = b.or_(b.shl(b.add(exponent, c(rebias)), c(dst.fraction)), b.shl(fraction, c(widen)))
    # a subnormal source: shift its leading one into the implicit place, lower the exponent
    ctlz = b.module.declare_intrinsic("llvm.ctlz", [t], ir.FunctionType(t, [t, ir.IntType(1)]))
    lead = b.call(ctlz, [fraction, ir.Constant(ir.IntType(1), 0)])
    move = b.sub(lead, c(dst.bits - 1 - dst.fraction))  # shift that puts it at bit dst.fraction
    sub_exp = b.sub(c(rebias + dst.bits - src.fraction), lead)
    sub_frac = b.and_(b.shl(fraction, move), c((1 << dst.fraction) - 1))
    subnormal = b.or_(b.shl(sub_exp, c(dst.fraction)), sub_frac)
    is_zero = b.icmp_unsigned("==", fraction, c(0))
    subnormal = b.select(is_zero, c(0), subnormal)
    all_ones = (1 << src.exponent) - 1
    magnitude = b.select(
        b.icmp_unsigned("==", exponent, c(all_ones)),
        special,
        b.select(b.icmp_unsigned("==", exponent, c(0)), subnormal, normal),
    )
    return b.or_(sign, magnitude)


# name -> (source format, result format)
CONVERSIONS: dict[str, tuple[_Format, _Format]] = {
    "__truncsfhf2": (SINGLE, HALF),
    "__truncdfhf2": (DOUBLE, HALF),
    "__extendhfsf2": (HALF, SINGLE),
    "__extendhfdf2": (HALF, DOUBLE),
}


def helper_module(triple: str) -> ir.Module:
    """The conversions as LLVM IR functions with compiler-rt's names and signatures."""
    module = ir.Module(name="fir_softfp")
    module.triple = triple
    for name, (src, dst) in CONVERSIONS.items():
        fnty = ir.FunctionType(_FLOAT_TYPES[dst.bits], [_FLOAT_TYPES[src.bits]])
        fn = ir.Function(module, fnty, name)
        b = ir.IRBuilder(fn.append_basic_block())
        bits = b.bitcast(fn.args[0], src.int)
        out = _narrow(b, bits, src, dst) if dst.bits < src.bits else _widen(b, bits, src, dst)
        b.ret(b.bitcast(out, _FLOAT_TYPES[dst.bits]))
    return module


def register(make_target_machine: Callable[[], Any]) -> dict[str, int]:
    """Compile the conversions once per process for a target machine that
    ``make_target_machine`` makes (the kernels' own: an engine consumes its target machine)
    and make MCJIT resolve their names to them; returns name -> address."""
    global _engine
    with _lock:
        if _engine is not None:
            return _provided
        import llvmlite.binding as llvm

        tm = make_target_machine()
        mod = llvm.parse_assembly(str(helper_module(tm.triple)))
        mod.verify()
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        for name in CONVERSIONS:
            address = engine.get_function_address(name)
            llvm.add_symbol(name, address)
            _provided[name] = address
        _engine = engine
        return _provided


def undefined_symbols(obj: bytes) -> list[str] | None:
    """The global names a 64-bit little-endian ELF object file uses but does not define (weak
    references excluded: they may stay unresolved); None for any other kind of file."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    shoff = struct.unpack_from("<Q", obj, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + k * shentsize) for k in range(shnum)]
    names: list[str] = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab_offset = sections[link][4]
        for at in range(offset, offset + size, entsize or 24):
            st_name, st_info, _, st_shndx = struct.unpack_from("<IBBH", obj, at)
            if st_shndx == 0 and st_name and st_info >> 4 == 1:  # undefined, STB_GLOBAL
                end = obj.index(b"\0", strtab_offset + st_name)
                names.append(obj[strtab_offset + st_name : end].decode())
    return names


def unresolved_symbols(obj: bytes) -> list[str]:
    """The names ``obj`` needs that neither the conversions here nor the process (its loaded
    global libraries: libc, libm, libgomp) provide."""
    import llvmlite.binding as llvm

    needed = undefined_symbols(obj) or []
    process = ctypes.CDLL(None)
    missing = []
    for name in needed:
        if name in _provided or llvm.address_of_symbol(name):
            continue
        try:
            getattr(process, name)
        except AttributeError:
            missing.append(name)
    return missing
