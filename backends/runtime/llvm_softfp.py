"""The half-precision conversions LLVM calls as library functions, and a check that an object
file needs nothing the process lacks: the llvm back end's part of the process runtime (what
compiler-rt would be to a linked program). No kernel plan is rendered here: the functions are
fixed, compiled once per process beside the kernels' objects and found by MCJIT's symbol
resolution when an object is loaded (:mod:`fir.backends.llvm.build`).

On a CPU without native f16 arithmetic (no AVX512-FP16: most Xeons before Sapphire Rapids, every
AMD EPYC to date) LLVM lowers some conversions to and from ``half`` to calls of compiler-rt's
``__truncsfhf2``, ``__truncdfhf2``, ``__extendhfsf2`` and ``__extendhfdf2``. LLVM 22 (llvmlite
0.50) also folds ``fptrunc (fptrunc double to float) to half`` into one ``double -> half``
conversion, which no instruction does. MCJIT resolves such names in the process, where the
compiler runtime is not loaded (libgcc_s has some of them from GCC 12, loaded locally if at
all), and an unresolved name becomes a call to address 0: a segmentation fault at the first
call of the kernel.

So the process gets its own: the four functions written here in LLVM IR with integer
operations and float ones that every x86-64 CPU has (no ``half`` conversion at all, so
compiling them needs no library call either), compiled once per process for the same target
as the kernels (so ``half`` is passed the same way, in an XMM register since LLVM 15) and
registered with ``llvm.add_symbol``. They round to nearest, ties to even, as the hardware does
(in the default rounding mode); a NaN stays a quiet NaN with its sign and top payload bits.
And before an object is loaded, :func:`unresolved_symbols` lists the names it
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
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
I16, I32 = ir.IntType(16), ir.IntType(32)


def _c(v: int | float, ty: ir.Type = I32) -> ir.Constant:
    return ir.Constant(ty, v)


def _half_to_float(b: ir.IRBuilder, h: ir.Value) -> ir.Value:
    """The float of the half whose bits are ``h`` (exact). A normal half is its bits moved to
    float's places with the exponent rebiased; a subnormal one its fraction times 2^-24 (an
    integer and a power of two, both exact, the product a normal float whatever the
    floating-point environment flushes); infinity and NaN keep their payload, made quiet."""
    x = b.zext(h, I32)
    mag, fraction = b.and_(x, _c(0x7FFF)), b.and_(x, _c(0x3FF))
    moved = b.shl(mag, _c(13))
    normal = b.add(moved, _c((127 - 15) << 23))
    subnormal = b.bitcast(b.fmul(b.uitofp(fraction, F32), _c(2.0**-24, F32)), I32)
    quiet = b.select(b.icmp_unsigned("!=", fraction, _c(0)), _c(1 << 22), _c(0))
    special = b.or_(b.or_(moved, _c(0x7F800000)), quiet)
    finite = b.select(b.icmp_unsigned("<", mag, _c(0x400)), subnormal, normal)
    bits = b.select(b.icmp_unsigned(">=", mag, _c(0x7C00)), special, finite)
    return b.bitcast(b.or_(bits, b.shl(b.and_(x, _c(0x8000)), _c(16))), F32)


def _float_to_half(b: ir.IRBuilder, f: ir.Value) -> ir.Value:
    """The bits of the half nearest to float ``f`` (ties to even). A normal result: the
    exponent rebiased in place and the 13 dropped bits rounded by adding 0xFFF and the kept
    bits' last; a subnormal one: ``|f| + 0.5`` rounds it in the FPU, in the bits of 0.5's
    fraction (a float that small is 0 anyway where the environment flushes it); from 65520
    up, infinity; a NaN stays a quiet NaN with its sign and top payload bits."""
    x = b.bitcast(f, I32)
    mag = b.and_(x, _c(0x7FFFFFFF))
    odd = b.and_(b.lshr(mag, _c(13)), _c(1))
    normal = b.lshr(b.add(b.add(mag, _c(((15 - 127) << 23) + 0xFFF)), odd), _c(13))
    magic = _c(0.5, F32)  # its fraction's bits are the half subnormal's
    sum_ = b.fadd(b.bitcast(mag, F32), magic)
    subnormal = b.sub(b.bitcast(sum_, I32), b.bitcast(magic, I32))
    nan = b.or_(b.and_(b.lshr(mag, _c(13)), _c(0x3FF)), _c(0x7E00))
    big = b.select(b.icmp_unsigned(">", mag, _c(0x7F800000)), nan, _c(0x7C00))
    small = b.select(b.icmp_unsigned("<", mag, _c(113 << 23)), subnormal, normal)
    bits = b.select(b.icmp_unsigned(">=", mag, _c(143 << 23)), big, small)
    return b.trunc(b.or_(bits, b.lshr(b.and_(x, _c(1 << 31)), _c(16))), I16)


def _to_float_odd(b: ir.IRBuilder, d: ir.Value) -> ir.Value:
    """Double ``d`` as a float rounded to odd (toward zero, then the last bit set where that
    was inexact): rounding that float to half again gives ``d`` rounded to half once, as
    float keeps more than twice half's bits."""
    f = b.fptrunc(d, F32)
    back = b.fpext(f, F64)
    fabs = b.module.declare_intrinsic("llvm.fabs", [F64])
    away = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [d]))  # rounded up in size
    bits = b.sub(b.bitcast(f, I32), b.zext(away, I32))
    inexact = b.fcmp_ordered("!=", back, d)
    return b.bitcast(b.or_(bits, b.zext(inexact, I32)), F32)


# name -> (argument type, result type), compiler-rt's signatures
CONVERSIONS: dict[str, tuple[ir.Type, ir.Type]] = {
    "__truncsfhf2": (F32, F16),
    "__truncdfhf2": (F64, F16),
    "__extendhfsf2": (F16, F32),
    "__extendhfdf2": (F16, F64),
}


def helper_module(triple: str) -> ir.Module:
    """The conversions as LLVM IR functions with compiler-rt's names and signatures."""
    module = ir.Module(name="fir_softfp")
    module.triple = triple
    for name, (src, dst) in CONVERSIONS.items():
        fn = ir.Function(module, ir.FunctionType(dst, [src]), name)
        b = ir.IRBuilder(fn.append_basic_block())
        x = fn.args[0]
        if dst == F16:
            half = _float_to_half(b, x if src == F32 else _to_float_odd(b, x))
            b.ret(b.bitcast(half, F16))
        else:
            wide = _half_to_float(b, b.bitcast(x, I16))
            b.ret(wide if dst == F32 else b.fpext(wide, F64))
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
