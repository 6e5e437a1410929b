"""Vectorisable f32 math functions for the llvmlite back end, written as plain LLVM IR.

libm calls (``expf``, ``tanhf``, ...) and the LLVM intrinsics that lower to them keep LLVM's
loop vectoriser from widening a pointwise loop. The emitters here write each function as
arithmetic, bit operations, branch-free ``select`` instructions and (sin/cos/tan) loads from a
constant table (the intrinsics used, ``fma``, ``rint``, ``floor``, ``sqrt``, ``fabs`` and
``copysign``, are single vector instructions), so a loop of them is vectorised (on AVX-512:
``<8 x float>``, or ``<8 x float>`` in and out around ``<8 x double>`` arithmetic, or 4 lanes
with gathers for sin/cos/tan).

Design: two kinds of kernels. exp, sigmoid, tanh, log and erf, the hottest, are pure f32 (f32 range
reduction, f32 polynomials, full vector width; max error about 1 ulp). The others widen the
argument to f64 and evaluate there with simple range reductions (Cody-Waite with split
constants for exp; for sin/cos/tan, x*2/pi mod 4 from a 256-entry table indexed by the f32
exponent, exact over the whole f32 range) and polynomials; the f64 result carries ~1e-13
relative error, so the one rounding to f32 gives the correctly rounded value but for ties
closer than that (max 0.5 ulp + a hair), and overflow, underflow to subnormals and zero come out
of that rounding for free, at half the vector width of pure-f32 code. All coefficients were
fitted for this file (``benchmarks/llvm_math.py --fit`` prints them: least squares on
Chebyshev nodes against mpmath) or computed here (Taylor series, the 2/pi table). Measured
errors and speed: ``docs/llvm-math.md``.

Special values follow torch on CPU: NaN in gives NaN out, the odd functions keep the sign of
zero, domain errors give NaN, poles give the signed infinity.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from fractions import Fraction

import llvmlite.ir as ir

F32, F64, I32, I64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)
Emitter = Callable[[ir.IRBuilder, ir.Value], ir.Value]

LN2 = math.log(2.0)
LN2_HI = LN2  # exp's reduction: x - n*ln2 in two fma steps, ln2 to ~106 bits
LN2_LO = 2.3190468138462996e-17
LOG2E, LOG10E, LOG10_2 = 1 / LN2, 1 / math.log(10.0), math.log10(2.0)
# pi/2 as 30-bit pieces plus a tail: n*piece is exact in f64 for n < 2^23 and each partial
# remainder x - n*(c1+..+ck) is exactly representable for n < 2^53 (see _E.reduce_pio2)
PIO2 = (1.5707963276654482, -8.705515692000731e-10, -3.503434396954818e-19, -1.1351118607522202e-28)
PIO2_HI, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17  # pi/2 = HI + LO to ~107 bits
# 2/pi to 260 bits (mpmath), for the sin/cos/tan reduction table (TRIG_TABLE)
TWO_OVER_PI_260 = 0xA2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163ABDEBBC561B


def _two_over_pi_mod4(biased_exponent: int) -> tuple[float, float, float]:
    """(2^(e - 150) * 2/pi) mod 4 for an f32 biased exponent e (subnormals: e = 1), in three
    pieces: a multiple of 2^-24 (26 bits), a multiple of 2^-50 below 2^-24, and the f64 rest.
    An f32 x = m 2^(e-150) (m < 2^24) then has x*2/pi mod 4 = m * (sum of the pieces) mod 4, the
    first two products exact."""
    v = Fraction(TWO_OVER_PI_260, 2**260) * Fraction(2) ** (max(biased_exponent, 1) - 150)
    v -= 4 * (v // 4)
    hi = Fraction(math.floor(v * 2**24), 2**24)
    mid = Fraction(math.floor((v - hi) * 2**50), 2**50)
    return float(hi), float(mid), float(v - hi - mid)


TRIG_TABLE = tuple(zip(*(_two_over_pi_mod4(e) for e in range(256)), strict=True))
SQRT_HALF, TAN_PI_8 = 0.7071067811865476, 0.41421356237309503
EXP_CLAMP = 200.0  # |x| beyond which exp(x) is inf or 0 in f32 (and still finite in f64)
ERFC_K, ERFC_HI = 2.5, 10.1  # erfc(x) = exp(-x^2) * F((x-K)/(x+K)) / x; 0 in f32 past 10.1

# Taylor coefficients where the series already reach f64-level error on the reduced range
SIN_S = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 8))  # |r| <= pi/4
COS_C = tuple((-1) ** k / math.factorial(2 * k) for k in range(1, 9))
ATANH_S = tuple(1 / (2 * k + 1) for k in range(1, 9))  # log via 2*atanh(s), s^2 <= 0.0295

# -- fitted coefficients (benchmarks/llvm_math.py --fit)
# pure-f32 kernels: the fits rounded to f32
EXPM1_Q_F32 = (
    0.5,
    0.1666666716337204,
    0.041666459292173386,
    0.008333374746143818,
    0.0013934486778452992,
    0.00019849685486406088,
)  # |r| <= 0.35, rel 2.9e-9
TANH_P_F32 = (
    -0.3333333432674408,
    0.1333330273628235,
    -0.05395908281207085,
    0.02176763117313385,
    -0.008340120315551758,
    0.002288759220391512,
)  # z <= 0.391
# max relative fit error 1.1e-12
EXPM1_Q = (
    0.4999999999994787,
    0.16666666666767588,
    0.041666666800787115,
    0.00833333327779849,
    0.0013888835123630086,
    0.0001984132942556977,
    2.4870489249881518e-05,
    2.7570338702199442e-06,
)
# max relative fit error 2.7e-14
ATAN_P = (
    0.9999999999999729,
    -0.33333333330799164,
    0.1999999960405996,
    -0.1428569037084974,
    0.1111038351462285,
    -0.09078369132146631,
    0.07563518957021713,
    -0.058737488976822336,
    0.030650042485292274,
)
# max relative fit error 5.6e-15
ERF_P = (
    1.1283791670955063,
    -0.37612638903011575,
    0.11283791662889928,
    -0.026866169184747424,
    0.005223964328936486,
    -0.0008547644094462029,
    0.00012034607932410825,
    -1.4555346574817715e-05,
    1.2809433084719761e-06,
)
# max relative fit error 1.3e-15
ERFCX_T = (
    0.5017525855718382,
    0.0840774273361268,
    -0.030020435209882314,
    0.006488183546085076,
    -0.0009000371638875926,
    6.544160211906786e-05,
    1.4475988594243948e-06,
    -7.19774900772399e-07,
    1.7782688261045963e-08,
    7.933952449226856e-09,
    -3.262237250488982e-10,
    -1.0835633455515167e-10,
    3.1884986170910297e-12,
    1.7337433242386499e-12,
    1.1990029513484196e-14,
    -2.842310277078125e-14,
    -1.788327691748862e-15,
    4.0408616301334495e-16,
)
# max relative fit error 1.1e-15
ERFINV_C = (
    1.4912989404744903,
    0.6017563034108298,
    -0.00917055950008097,
    -0.004962635326766538,
    0.000915379670007868,
    -3.889562757056883e-06,
    -2.4202599405043446e-05,
    3.2665715926566725e-06,
    2.7758889811027523e-07,
    -1.3023363026911902e-07,
    8.104643287748252e-09,
    2.8624384257950316e-09,
    -5.97509131709188e-10,
    -1.2223162218386266e-11,
    1.95958819054187e-11,
    -2.051103654657067e-12,
    -3.4472344293055016e-13,
    1.0532571733536958e-13,
    -2.5625885901714226e-15,
    -3.162900389044883e-15,
    2.1296897139146865e-16,
    -2.378663632451186e-17,
)
# max relative fit error 1.1e-14
ERFINV_T = (
    4.013544468332796,
    1.94420716516862,
    0.005213435233027401,
    -0.0030210900376412084,
    0.0013232944877033192,
    -0.0005679653806118908,
    0.0002356349676426616,
    -8.716247159697747e-05,
    2.54524320653902e-05,
    -4.087406949230078e-06,
    -9.951076993349106e-07,
    1.1104122266433491e-06,
    -4.770795127816663e-07,
    1.092342942930224e-07,
    3.955672417296134e-09,
    -1.5229272973711685e-08,
    6.842884921311459e-09,
    -1.461133833002448e-09,
    -8.764219915389489e-11,
    1.9477195462242158e-10,
    -7.657327559838208e-11,
    1.3878288578386542e-11,
    1.372846214277863e-12,
    -1.8787170618486827e-12,
    6.867005960727134e-13,
    -1.339389794106228e-13,
    -9.803437013579487e-16,
)
# max relative fit error 3.2e-15
DIGAMMA_R = (
    0.9835702604415669,
    -0.22706408633464437,
    0.033368899023930136,
    -0.005320077271596525,
    0.0008788656937819766,
    -0.00014773492650612237,
    2.506054346835563e-05,
    -4.27210340290709e-06,
    7.302769272837268e-07,
    -1.250288680813775e-07,
    2.1425009261165114e-08,
    -3.673295856985318e-09,
    6.299716849316414e-10,
    -1.0805931722620069e-10,
    1.8537337241862353e-11,
    -3.180225330529594e-12,
    5.456276157688846e-13,
    -9.362230976662673e-14,
    1.6013600059035777e-14,
)
DIGAMMA_ROOT = (1.4616321449683622, 9.549995429965697e-17)
ASYM = (
    0.08333333333333333,
    -0.008333333333333333,
    0.003968253968253968,
    -0.004166666666666667,
    0.007575757575757576,
    -0.021092796092796094,
    0.08333333333333333,
)


class _E:
    """Emission helpers on one builder: constants of its type (f64 unless told), fma, Horner
    and Clenshaw."""

    def __init__(self, b: ir.IRBuilder, ty: ir.Type = F64) -> None:
        self.b = b
        self.ty = ty

    def c(self, v: float) -> ir.Constant:
        return ir.Constant(self.ty, v)

    def intr(self, name: str, *args: ir.Value) -> ir.Value:
        ty = args[0].type
        fnty = ir.FunctionType(ty, [ty] * len(args))
        fn = self.b.module.declare_intrinsic(name, [ty], fnty)
        return self.b.call(fn, list(args))

    def fma(self, a: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.intr("llvm.fma", a, x, y)

    def add(self, a: ir.Value, c: ir.Value | float) -> ir.Value:
        return self.b.fadd(a, c if isinstance(c, ir.Value) else self.c(c))

    def sub(self, a: ir.Value | float, c: ir.Value | float) -> ir.Value:
        a = a if isinstance(a, ir.Value) else self.c(a)
        return self.b.fsub(a, c if isinstance(c, ir.Value) else self.c(c))

    def mul(self, a: ir.Value, c: ir.Value | float) -> ir.Value:
        return self.b.fmul(a, c if isinstance(c, ir.Value) else self.c(c))

    def div(self, a: ir.Value | float, c: ir.Value) -> ir.Value:
        return self.b.fdiv(a if isinstance(a, ir.Value) else self.c(a), c)

    def abs(self, a: ir.Value) -> ir.Value:
        return self.intr("llvm.fabs", a)

    def sqrt(self, a: ir.Value) -> ir.Value:
        return self.intr("llvm.sqrt", a)

    def copysign(self, mag: ir.Value, sign: ir.Value) -> ir.Value:
        return self.intr("llvm.copysign", mag, sign)

    def lt(self, a: ir.Value, v: float) -> ir.Value:
        return self.b.fcmp_ordered("<", a, ir.Constant(a.type, v))

    def gt(self, a: ir.Value, v: float) -> ir.Value:
        return self.b.fcmp_ordered(">", a, ir.Constant(a.type, v))

    def eq(self, a: ir.Value, v: float) -> ir.Value:
        return self.b.fcmp_ordered("==", a, ir.Constant(a.type, v))

    def sel(self, cond: ir.Value, a: ir.Value | float, c: ir.Value | float) -> ir.Value:
        a = a if isinstance(a, ir.Value) else self.c(a)
        return self.b.select(cond, a, c if isinstance(c, ir.Value) else self.c(c))

    def clamp(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        # ordered compares: a NaN passes through untouched
        return self.sel(self.gt(x, hi), hi, self.sel(self.lt(x, lo), lo, x))

    def horner(self, x: ir.Value, coeffs: tuple[float, ...]) -> ir.Value:
        """sum coeffs[k] * x**k."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def clenshaw(self, x: ir.Value, lo: float, hi: float, coeffs: tuple[float, ...]) -> ir.Value:
        """sum coeffs[k] * T_k(u), u = x mapped from [lo, hi] onto [-1, 1] (stable at any
        degree, unlike the power basis of a shifted interval)."""
        u = self.fma(x, self.c(2 / (hi - lo)), self.c(-(hi + lo) / (hi - lo)))
        u2 = self.add(u, u)
        b1, b2 = self.c(0.0), self.c(0.0)
        for k in reversed(coeffs[1:]):
            b1, b2 = self.sub(self.fma(u2, b1, self.c(k)), b2), b1
        return self.sub(self.fma(u, b1, self.c(coeffs[0])), b2)

    # -- f64 kernels (arguments already free of NaN where they convert to integers)

    def exp_parts(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(2^n, expm1(r)) with x = n*ln2 + r, |r| <= ln2/2; x must lie in +-EXP_CLAMP."""
        b = self.b
        n = self.intr("llvm.rint", self.mul(x, LOG2E))
        r = self.fma(n, self.c(-LN2_HI), x)
        r = self.fma(n, self.c(-LN2_LO), r)
        p = self.fma(self.mul(r, r), self.horner(r, EXPM1_Q), r)
        bits = b.shl(b.add(b.fptosi(n, I64), ir.Constant(I64, 1023)), ir.Constant(I64, 52))
        return b.bitcast(bits, F64), p

    def exp(self, x: ir.Value) -> ir.Value:
        """exp(x) for any f64 x that is not NaN (clamped: inf and 0 survive rounding to f32)."""
        s, p = self.exp_parts(self.clamp(x, -EXP_CLAMP, EXP_CLAMP))
        return self.fma(s, p, s)

    def expm1(self, x: ir.Value) -> ir.Value:
        s, p = self.exp_parts(self.clamp(x, -EXP_CLAMP, EXP_CLAMP))
        return self.fma(s, p, self.sub(s, 1.0))  # 2^n - 1 is exact

    def log_parts(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(k, log(m)) with x = 2^k * m, m in [sqrt(1/2), sqrt(2)), for finite x > 0 (f64
        normal: every f32, subnormals included, is one)."""
        b = self.b
        bits = b.bitcast(x, I64)
        k = b.sub(b.lshr(bits, ir.Constant(I64, 52)), ir.Constant(I64, 1023))
        mbits = b.or_(b.and_(bits, ir.Constant(I64, (1 << 52) - 1)), ir.Constant(I64, 1023 << 52))
        m = b.bitcast(mbits, F64)
        big = self.gt(m, 2 * SQRT_HALF)
        m = self.sel(big, self.mul(m, 0.5), m)
        kf = self.add(b.sitofp(k, F64), self.sel(big, 1.0, 0.0))
        f = self.sub(m, 1.0)
        s = self.div(f, self.add(f, 2.0))
        s2 = self.add(s, s)
        z = self.mul(s, s)
        return kf, self.fma(self.mul(s2, z), self.horner(z, ATANH_S), s2)

    def log(self, x: ir.Value) -> ir.Value:
        k, lm = self.log_parts(x)
        return self.fma(k, self.c(LN2), lm)

    def log1p(self, u: ir.Value) -> ir.Value:
        """log(1 + u) for u > -1 finite: the rounding of 1 + u is put back to first order."""
        w = self.add(u, 1.0)
        corr = self.div(self.sub(u, self.sub(w, 1.0)), w)
        return self.add(self.log(w), corr)

    def reduce_pio2(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(r, n mod 4) with x = n*pi/2 + r, |r| <= ~pi/4, for finite x. The partial remainders
        are exact while n < 2^53 (each piece of pi/2 has 30 bits), so r is good to ~1e-16
        absolute (accurate up to |x| ~ 2^50; digamma's cot uses it for |x| <= pi/2)."""
        b = self.b
        n = self.intr("llvm.rint", self.mul(x, 2 / math.pi))
        r = x
        for piece in PIO2:
            r = self.fma(n, self.c(-piece), r)
        q = self.sub(n, self.mul(self.intr("llvm.floor", self.mul(n, 0.25)), 4.0))
        return r, b.fptosi(q, I32)

    def table(self, name: str, values: tuple[float, ...], index: ir.Value) -> ir.Value:
        """values[index], from a private constant array of the module (a gather once
        vectorised)."""
        module = self.b.module
        ty = ir.ArrayType(F64, len(values))
        if name not in module.globals:
            g = ir.GlobalVariable(module, ty, name)
            g.global_constant = True
            g.linkage = "private"
            g.initializer = ir.Constant(ty, list(values))
        g = module.globals[name]
        return self.b.load(self.b.gep(g, [ir.Constant(I32, 0), index], inbounds=True))

    def reduce_table(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(r, n mod 4) with x = n*pi/2 + r for any finite f32 x: x = m 2^(e-150) and
        x*2/pi mod 4 = m * TRIG_TABLE[e] mod 4; m times the first two pieces is exact, their
        integer parts come off exactly, the third product rounds at 2^-79, and r is formed with
        one fma around the exact part."""
        b = self.b
        bits = b.and_(b.bitcast(x, I32), ir.Constant(I32, 0x7FFFFFFF))
        e = b.lshr(bits, ir.Constant(I32, 23))
        mant = b.and_(bits, ir.Constant(I32, 0x7FFFFF))
        normal = b.icmp_signed(">", e, ir.Constant(I32, 0))
        m = b.sitofp(b.select(normal, b.or_(mant, ir.Constant(I32, 0x800000)), mant), F64)
        idx = b.zext(e, I64)
        hi, mid, lo = (
            self.table(f"fir_vecmath_2pi_mod4_{k}", TRIG_TABLE[k], idx) for k in range(3)
        )
        # integer parts taken off as early as possible (a short dependency chain for r: chains
        # of sin are latency-bound): every step below is exact but the third product
        a = self.mul(m, hi)  # < 2^26, grid 2^-24
        na = self.intr("llvm.rint", a)
        w = self.add(self.sub(a, na), self.mul(m, mid))  # |w| < 1.5, grid 2^-50
        nb = self.intr("llvm.rint", w)
        frac = self.sub(w, nb)  # |frac + small| <= 1/2 + 2^-26
        small = self.mul(m, lo)
        r = self.fma(
            frac, self.c(PIO2_HI), self.fma(frac, self.c(PIO2_LO), self.mul(small, PIO2_HI))
        )
        q = b.fptosi(self.mod4(self.add(self.mod4(na), nb)), I32)
        neg = b.icmp_signed("<", b.bitcast(x, I32), ir.Constant(I32, 0))
        r = self.sel(neg, b.fneg(r), r)
        q_neg = b.and_(b.sub(ir.Constant(I32, 4), q), ir.Constant(I32, 3))
        return r, b.select(neg, q_neg, q)

    def mod4(self, t: ir.Value) -> ir.Value:
        """t - 4 floor(t/4) in [0, 4), exact for any f64 t."""
        return self.fma(self.intr("llvm.floor", self.mul(t, 0.25)), self.c(-4.0), t)

    def sin_cos_poly(self, r: ir.Value) -> tuple[ir.Value, ir.Value]:
        z = self.mul(r, r)
        s = self.fma(self.mul(r, z), self.estrin(z, SIN_S), r)
        c = self.fma(z, self.estrin(z, COS_C), self.c(1.0))
        return s, c

    def estrin(self, x: ir.Value, coeffs: tuple[float, ...]) -> ir.Value:
        """sum coeffs[k] * x**k by Estrin's scheme (pairs joined with x^2, then x^4, ...): a
        dependency chain of ~log2(degree) fmas instead of Horner's degree, which matters in
        long chains of math (they are latency-bound)."""
        terms = [self.c(v) for v in coeffs]
        power = x
        while len(terms) > 1:
            joined = [self.fma(hi, power, lo) for lo, hi in zip(terms[::2], terms[1::2])]
            terms = joined + terms[len(terms) - len(terms) % 2 :]
            if len(terms) > 1:
                power = self.mul(power, power)
        return terms[0]

    def quadrant(self, q: ir.Value, v: tuple[ir.Value, ir.Value, ir.Value, ir.Value]) -> ir.Value:
        """v[q] for q in 0..3, as selects."""
        b = self.b
        lo = b.select(b.icmp_signed("==", q, ir.Constant(I32, 0)), v[0], v[1])
        hi = b.select(b.icmp_signed("==", q, ir.Constant(I32, 2)), v[2], v[3])
        return b.select(b.icmp_signed("<", q, ir.Constant(I32, 2)), lo, hi)

    def atan(self, x: ir.Value) -> ir.Value:
        """atan for any f64 (+-inf included): 1/x folds |x| > 1 into [0, 1], then the addition
        formula folds (tan(pi/8), 1] around pi/4."""
        a = self.abs(x)
        inv = self.gt(a, 1.0)
        t = self.sel(inv, self.div(1.0, a), a)
        big = self.gt(t, TAN_PI_8)
        t = self.sel(big, self.div(self.sub(t, 1.0), self.add(t, 1.0)), t)
        r = self.mul(t, self.horner(self.mul(t, t), ATAN_P))
        r = self.add(r, self.sel(big, math.pi / 4, 0.0))
        r = self.sel(inv, self.sub(math.pi / 2, r), r)
        return self.copysign(r, x)

    def erfc_pos(self, a: ir.Value) -> ir.Value:
        """erfc(a) for a >= 0.75 (NaN-free), as exp(-a^2) * F(t) / a with F fitted in
        t = (a - K) / (a + K); a^2 is exact in f64 for an f32 a."""
        a = self.sel(self.gt(a, ERFC_HI), ERFC_HI, a)
        t = self.div(self.sub(a, ERFC_K), self.add(a, ERFC_K))
        lo, hi = (0.75 - ERFC_K) / (0.75 + ERFC_K), (ERFC_HI - ERFC_K) / (ERFC_HI + ERFC_K)
        f = self.clenshaw(t, lo, hi, ERFCX_T)
        return self.div(self.mul(self.exp(self.b.fneg(self.mul(a, a))), f), a)

    def erf_small(self, x: ir.Value) -> ir.Value:
        """erf(x) for |x| <= 0.75."""
        return self.mul(x, self.horner(self.mul(x, x), ERF_P))


def _f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


# pure-f32 exp (16 lanes where the vectoriser picks them): ln2 as a 16-bit head (n * head and
# x - n * head exact) and an f32 tail taken by fma
LN2_HEAD_F32 = math.floor(LN2 * 2**16) / 2**16
LN2_TAIL_F32 = _f32(LN2 - LN2_HEAD_F32)
EXP_LO_F32, EXP_HI_F32 = -104.0, 89.0  # exp is 0 / inf in f32 beyond these


def _exp_f32_parts(e: _E, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(n, expm1(r)) in f32 with x = n ln2 + r, |r| <= ln2/2, for x in [-104, 89]."""
    n = e.intr("llvm.rint", e.mul(x, LOG2E))
    r = e.fma(n, e.c(-LN2_HEAD_F32), x)
    r = e.fma(n, e.c(-LN2_TAIL_F32), r)
    return n, e.fma(e.mul(r, r), e.horner(r, EXPM1_Q_F32), r)


def _pow2_f32(e: _E, n: ir.Value) -> ir.Value:
    """2^n as f32 for an integer n in [-126, 127], built in the exponent bits."""
    b = e.b
    bits = b.shl(b.add(n, ir.Constant(I32, 127)), ir.Constant(I32, 23))
    return b.bitcast(bits, F32)


def _exp_f32(e: _E, x: ir.Value) -> ir.Value:
    """exp(x) in f32 for any non-NaN x: 2^n applied as two halves, so subnormal results are
    rounded once and 2^128 * (1 + p) still overflows to inf."""
    b = e.b
    n, p = _exp_f32_parts(e, e.clamp(x, EXP_LO_F32, EXP_HI_F32))
    ni = b.fptosi(n, I32)
    half = b.ashr(ni, ir.Constant(I32, 1))
    s1, s2 = _pow2_f32(e, b.sub(ni, half)), _pow2_f32(e, half)
    return e.mul(e.fma(s1, p, s1), s2)


# pure-f32 log: log(1 + f) = f - f^2/2 + s (f^2/2 + z Q(z)), s = f/(2+f), z = s^2 (the
# atanh series' Taylor coefficients); f is exact, so s's rounding only touches a small term
LOG_Q_F32 = tuple(2 / (2 * k + 1) for k in range(1, 5))  # z <= 0.0295: truncation ~1e-9


def _log_f32(e: _E, x: ir.Value) -> ir.Value:
    """log(x) in f32 for a positive finite x (subnormals scaled by 2^23 first)."""
    b = e.b
    sub = e.lt(x, 2.0**-126)
    x = e.sel(sub, e.mul(x, 2.0**23), x)
    # k and m in [sqrt(1/2), sqrt(2)) from the bits: offset by sqrt(1/2)'s bits, then shift
    ix = b.sub(b.bitcast(x, I32), ir.Constant(I32, 0x3F3504F3))
    k = b.ashr(ix, ir.Constant(I32, 23))
    m = b.bitcast(b.add(b.and_(ix, ir.Constant(I32, 0x7FFFFF)), ir.Constant(I32, 0x3F3504F3)), F32)
    kf = e.sub(b.sitofp(k, F32), e.sel(sub, 23.0, 0.0))
    f = e.sub(m, 1.0)
    s = e.div(f, e.add(f, 2.0))
    z = e.mul(s, s)
    hfsq = e.mul(e.mul(f, f), 0.5)
    r = e.mul(z, e.horner(z, LOG_Q_F32))
    inner = e.sub(hfsq, e.fma(s, e.add(hfsq, r), e.mul(kf, LN2_TAIL_F32)))
    return e.fma(kf, e.c(LN2_HEAD_F32), e.sub(f, inner))


def _widen(b: ir.IRBuilder, x: ir.Value) -> tuple[_E, ir.Value]:
    return _E(b), (x if x.type == F64 else b.fpext(x, F64))


def _finish(e: _E, x: ir.Value, r: ir.Value, *, odd: bool = False) -> ir.Value:
    """r rounded to f32; NaN in gives NaN out; odd functions return +-0 for +-0."""
    b = e.b
    y = r if x.type == F64 else b.fptrunc(r, F32)
    if odd:
        y = b.select(b.fcmp_ordered("==", x, ir.Constant(x.type, 0.0)), x, y)
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def _special(e: _E, cond: ir.Value, value: float, y: ir.Value) -> ir.Value:
    return e.b.select(cond, ir.Constant(y.type, value), y)


def _nan_free(e: _E, xd: ir.Value) -> ir.Value:
    # NaN replaced by 0 before a float -> int conversion (poison otherwise); _finish puts the
    # NaN back. Infinities are clamped by the kernels that take them.
    return e.sel(e.b.fcmp_unordered("uno", xd, xd), 0.0, xd)


# -- exponentials and logarithms


def emit_exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # pure f32 (not widened): the hottest function gets the full vector width
    e = _E(b, F32)
    return _finish(e, x, _exp_f32(e, _nan_free(e, x)))


def emit_exp2(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    return _finish(e, x, e.exp(e.mul(_nan_free(e, xd), LN2)))


def emit_expm1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    return _finish(e, x, e.expm1(_nan_free(e, xd)), odd=True)


def emit_sigmoid(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # pure f32: with t = exp(-|x|) <= 1 (no overflow), 1/(1+t) for x >= 0 and t/(1+t) below
    e = _E(b, F32)
    xs = _nan_free(e, x)
    t = _exp_f32(e, b.fneg(e.abs(xs)))
    d = e.add(t, 1.0)
    return _finish(e, x, e.div(e.sel(e.lt(xs, 0.0), t, 1.0), d))


def _log_domain(e: _E, x: ir.Value, y: ir.Value, at: float = 0.0) -> ir.Value:
    """log-like special values: x < at is NaN, x == at is -inf, +inf is +inf."""
    y = _special(e, e.lt(x, at), math.nan, y)
    y = _special(e, e.eq(x, at), -math.inf, y)
    return _special(e, e.eq(x, math.inf), math.inf, y)


def _log_arg(e: _E, xd: ir.Value) -> ir.Value:
    # anything that is not a positive finite number is answered by _log_domain
    ok = e.b.and_(e.gt(xd, 0.0), e.lt(xd, math.inf))
    return e.sel(ok, xd, 1.0)


def emit_log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # pure f32 (not widened): log is common enough to get the full vector width
    e = _E(b, F32)
    ok = b.and_(e.gt(x, 0.0), e.lt(x, math.inf))
    return _log_domain(e, x, _finish(e, x, _log_f32(e, e.sel(ok, x, 1.0))))


def emit_log2(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    k, lm = e.log_parts(_log_arg(e, xd))
    return _log_domain(e, x, _finish(e, x, e.fma(lm, e.c(LOG2E), k)))


def emit_log10(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    k, lm = e.log_parts(_log_arg(e, xd))
    return _log_domain(e, x, _finish(e, x, e.fma(k, e.c(LOG10_2), e.mul(lm, LOG10E))))


def emit_log1p(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    ok = e.b.and_(e.gt(xd, -1.0), e.lt(xd, math.inf))
    y = _finish(e, x, e.log1p(e.sel(ok, xd, 0.0)), odd=True)
    return _log_domain(e, x, y, at=-1.0)


# -- trigonometric functions


def _sin_cos(b: ir.IRBuilder, x: ir.Value) -> tuple[_E, ir.Value, ir.Value, ir.Value]:
    e = _E(b)
    finite = b.fcmp_ordered("<", e.intr("llvm.fabs", x), ir.Constant(F32, math.inf))
    r, q = e.reduce_table(b.select(finite, x, ir.Constant(F32, 0.0)))
    s, c = e.sin_cos_poly(r)
    return e, s, c, q


# |x| below which sin/cos may skip the table: reduce_pio2's products n * piece are exact while
# n < 2^23 (30-bit pieces of pi/2), so r keeps ~1e-16 absolute accuracy there
TRIG_BOUND = 2.0**20


def _sin_cos_bounded(b: ir.IRBuilder, x: ir.Value) -> tuple[_E, ir.Value, ir.Value, ir.Value]:
    """:func:`_sin_cos` for an argument known to be at most ``TRIG_BOUND`` in magnitude (the
    renderer proves it, e.g. for sin of a sin): Cody-Waite in f64 with no table lookups, which
    once vectorised are gathers. NaN (and inf, which the bound excludes) reduce as 0 and are
    restored by the callers' checks."""
    e = _E(b)
    finite = b.fcmp_ordered("<", e.intr("llvm.fabs", x), ir.Constant(F32, math.inf))
    xd = b.fpext(b.select(finite, x, ir.Constant(F32, 0.0)), F64)
    r, q = e.reduce_pio2(xd)
    s, c = e.sin_cos_poly(r)
    return e, s, c, q


# |x| up to which sin/cos run entirely in f32 (n = rint(x 2/pi) has at most 7 bits, so n times
# each 17-bit piece of pi/2 below is exact and the reduction loses nothing but its last rounding)
TRIG_BOUND_F32 = 128.0
PIO2_F32 = (1.57080078125, -4.45445766672492e-06, 2.5633440682570896e-12)  # 17 + 17 + 24 bits
# sin r = r + r^3 P(r^2), cos r = 1 - r^2/2 + r^4 Q(r^2) on |r| <= pi/4: least-squares fits on
# 600 Chebyshev nodes, targets computed with mpmath at 50 digits, rounded to f32 (0.71 and 1.10
# ulp for the polynomials alone, evaluated in f32)
SIN_P32 = (
    -0.1666666716337204,
    0.008333331905305386,
    -0.00019840087043121457,
    2.724996420511161e-06,
)
COS_Q32 = (0.0416666679084301, -0.00138888880610466, 2.480059993104078e-05, -2.730098742631526e-07)


def _sin_cos_f32(b: ir.IRBuilder, x: ir.Value) -> tuple[_E, ir.Value, ir.Value, ir.Value]:
    """sin and cos of r and the quadrant, all in f32 at full vector width, for an argument
    known to be at most ``TRIG_BOUND_F32`` in magnitude: a three-piece Cody-Waite reduction
    with fma, then the two polynomials."""
    # no finite-select: the bound excludes inf, and NaN only makes the quadrant poison, which
    # _finish_f32's NaN select never chooses (short code matters: 40 of these in deep_chain)
    e = _E(b, F32)
    n = e.intr("llvm.rint", e.mul(x, 2 / math.pi))
    r = x
    for piece in PIO2_F32:
        r = e.fma(n, e.c(-piece), r)
    q = b.and_(b.fptosi(n, I32), ir.Constant(I32, 3))  # n mod 4, two's complement
    z = e.mul(r, r)
    s = e.fma(e.mul(r, z), e.estrin(z, SIN_P32), r)
    c = e.fma(z, e.fma(z, e.estrin(z, COS_Q32), e.c(-0.5)), e.c(1.0))
    return e, s, c, q


def _finish_f32(b: ir.IRBuilder, x: ir.Value, y: ir.Value, *, odd: bool) -> ir.Value:
    """NaN in gives NaN out, and an odd function keeps the sign of zero (the argument is
    bounded: never inf)."""
    if odd:
        y = b.select(b.fcmp_ordered("==", x, ir.Constant(F32, 0.0)), x, y)
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def emit_sin_small(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, s, c, q = _sin_cos_f32(b, x)
    return _finish_f32(b, x, e.quadrant(q, (s, c, b.fneg(s), b.fneg(c))), odd=True)


def emit_cos_small(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, s, c, q = _sin_cos_f32(b, x)
    return _finish_f32(b, x, e.quadrant(q, (c, b.fneg(s), b.fneg(c), s)), odd=False)


def emit_sin_bounded(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _sin_of(b, x, _sin_cos_bounded(b, x))


def emit_cos_bounded(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _cos_of(b, x, _sin_cos_bounded(b, x))


def _inf_is_nan(e: _E, x: ir.Value, y: ir.Value) -> ir.Value:
    return _special(e, e.eq(e.intr("llvm.fabs", x), math.inf), math.nan, y)


def _sin_of(
    b: ir.IRBuilder, x: ir.Value, parts: tuple[_E, ir.Value, ir.Value, ir.Value]
) -> ir.Value:
    """sin x from a reduction's sin r, cos r and quadrant."""
    e, s, c, q = parts
    y = e.quadrant(q, (s, c, b.fneg(s), b.fneg(c)))
    return _inf_is_nan(e, x, _finish(e, x, y, odd=True))


def _cos_of(
    b: ir.IRBuilder, x: ir.Value, parts: tuple[_E, ir.Value, ir.Value, ir.Value]
) -> ir.Value:
    e, s, c, q = parts
    y = e.quadrant(q, (c, b.fneg(s), b.fneg(c), s))
    return _inf_is_nan(e, x, _finish(e, x, y))


def emit_sin(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _sin_of(b, x, _sin_cos(b, x))


def emit_cos(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _cos_of(b, x, _sin_cos(b, x))


def emit_tan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, s, c, q = _sin_cos(b, x)
    odd_q = b.trunc(q, ir.IntType(1))
    y = b.select(odd_q, e.div(b.fneg(c), s), e.div(s, c))
    return _inf_is_nan(e, x, _finish(e, x, y, odd=True))


def emit_atan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    return _finish(e, x, e.atan(xd), odd=True)


def emit_asin(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # atan(x / sqrt(1 - x^2)): 1 - x^2 is exact in f64 near |x| = 1; |x| > 1 gives sqrt(<0)
    e, xd = _widen(b, x)
    one_m = e.fma(b.fneg(xd), xd, e.c(1.0))
    return _finish(e, x, e.atan(e.div(xd, e.sqrt(one_m))), odd=True)


def emit_acos(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # 2 atan(sqrt((1 - x) / (1 + x))): no cancellation near either end; |x| > 1 gives NaN
    e, xd = _widen(b, x)
    t = e.sqrt(e.div(e.sub(1.0, xd), e.add(xd, 1.0)))
    return _finish(e, x, e.mul(e.atan(t), 2.0))


# -- hyperbolic functions


TANH_SMALL = 0.625  # below: odd polynomial; above: 1 - 2/(exp(2|x|) + 1), no cancellation


def emit_tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # pure f32: tanh is GELU's inner function, so it gets the full vector width
    e = _E(b, F32)
    a = e.abs(_nan_free(e, x))
    z = e.mul(a, a)
    small = e.fma(e.mul(a, z), e.horner(z, TANH_P_F32), a)
    n, p = _exp_f32_parts(e, e.mul(e.sel(e.gt(a, 9.5), 9.5, a), 2.0))  # tanh(9.5) is 1 in f32
    s1 = _pow2_f32(e, b.fptosi(n, I32))  # 2|x| in [1.25, 19]: n in [2, 28]
    big = e.sub(1.0, e.div(2.0, e.add(e.fma(s1, p, s1), 1.0)))
    y = e.sel(e.lt(a, TANH_SMALL), small, big)
    return _finish(e, x, e.copysign(y, x), odd=True)


def emit_sinh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    t = e.expm1(e.abs(_nan_free(e, xd)))  # (e^a - e^-a)/2 = (t + t/(t+1))/2, no cancellation
    y = e.mul(e.add(t, e.div(t, e.add(t, 1.0))), 0.5)
    return _finish(e, x, e.copysign(y, xd), odd=True)


def emit_cosh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    t = e.exp(e.abs(_nan_free(e, xd)))
    return _finish(e, x, e.mul(e.add(t, e.div(1.0, t)), 0.5))


def _log_big(e: _E, a: ir.Value) -> ir.Value:
    """log(2a) for a large finite a: asinh(a) and acosh(a) past 1e10."""
    return e.add(e.log(a), LN2)


def emit_asinh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    a = e.abs(_nan_free(e, xd))
    big = e.gt(a, 1e10)
    small = e.sel(big, 1.0, a)
    a2 = e.mul(small, small)  # log1p(a + a^2 / (1 + sqrt(1 + a^2)))
    y = e.log1p(e.add(small, e.div(a2, e.add(e.sqrt(e.add(a2, 1.0)), 1.0))))
    y = e.sel(big, _log_big(e, e.sel(big, a, 1.0)), y)
    y = _finish(e, x, e.copysign(y, xd), odd=True)
    return b.select(e.eq(e.intr("llvm.fabs", x), math.inf), x, y)


def emit_acosh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    ok = e.b.and_(e.gt(xd, 1.0), e.lt(xd, math.inf))
    xs = e.sel(ok, xd, 1.0)
    big = e.gt(xs, 1e10)
    t = e.sub(e.sel(big, 1.0, xs), 1.0)  # log1p(t + sqrt(2t + t^2)), t = x - 1 exact
    y = e.log1p(e.add(t, e.sqrt(e.fma(t, t, e.add(t, t)))))
    y = _finish(e, x, e.sel(big, _log_big(e, xs), y))
    y = _special(e, e.eq(x, 1.0), 0.0, y)
    y = _special(e, e.lt(x, 1.0), math.nan, y)
    return _special(e, e.eq(x, math.inf), math.inf, y)


def emit_atanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    a = e.abs(xd)
    ok = e.lt(a, 1.0)
    a = e.sel(ok, a, 0.5)
    y = e.mul(e.log1p(e.div(e.add(a, a), e.sub(1.0, a))), 0.5)  # 1 - a is exact
    y = _finish(e, x, e.copysign(y, xd), odd=True)
    ax = e.intr("llvm.fabs", x)
    y = _special(e, e.gt(ax, 1.0), math.nan, y)
    inf = b.select(e.lt(x, 0.0), ir.Constant(x.type, -math.inf), ir.Constant(x.type, math.inf))
    return b.select(e.eq(ax, 1.0), inf, y)


# -- error function and friends


# pure-f32 erf (GELU's inner function, so at the full f32 vector width; the f64-evaluated
# version made BERT's gelu kernels 4-5x slower than the C++ back end's libmvec erff):
# below ERF_SMALL_F32, x (c0 + z Q(z)), z = x^2, c0 = 2/sqrt(pi) as an f32 head and tail so
# that its rounding does not count; above, 1 - exp(L(a) - a^2) with L(a) = log(erfcx(a))
# fitted in a - ERF_MID_F32 up to ERF_ONE_F32, where erf is 1 in f32. Fits: least squares on
# Chebyshev nodes against mpmath, coefficients rounded to f32 (L weighted by erfc/erf, the
# error it makes in erf); max 1.2 ulp measured over 1M arguments
ERF_SMALL_F32, ERF_MID_F32, ERF_ONE_F32 = 0.75, 2.375, 4.0
ERF_C0_F32 = (1.128379225730896, -5.8635382771399236e-08)
ERF_Q_F32 = (
    -0.37612637877464294,
    0.11283789575099945,
    -0.026865661144256592,
    0.005220070481300354,
    -0.0008411685703322291,
    9.809060429688543e-05,
)  # z <= 0.5625: (erf(x)/x - c0)/z, abs 1.2e-8
ERF_L_F32 = (
    -1.5118318796157837,
    -0.36723342537879944,
    0.0603947751224041,
    -0.011997074820101261,
    0.0024512624368071556,
    -0.0005066483281552792,
    5.312388748279773e-05,
    -3.561530320439488e-05,
    -2.5977649329433916e-06,
)  # a in [0.75, 4]: log(erfc(a)) + a^2 in a - 2.375, weighted abs 3.8e-10


def emit_erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _E(b, F32)
    a = e.abs(_nan_free(e, x))
    z = e.mul(a, a)
    r = e.fma(z, e.horner(z, ERF_Q_F32), e.c(ERF_C0_F32[1]))
    small = e.fma(a, e.c(ERF_C0_F32[0]), e.mul(a, r))
    ab = e.sel(e.gt(a, ERF_ONE_F32), ERF_ONE_F32, e.sel(e.lt(a, ERF_SMALL_F32), ERF_SMALL_F32, a))
    t = e.fma(b.fneg(ab), ab, e.horner(e.sub(ab, ERF_MID_F32), ERF_L_F32))  # in [-17, -0.8]
    n, p = _exp_f32_parts(e, t)
    s = _pow2_f32(e, b.fptosi(n, I32))
    big = e.sub(1.0, e.fma(s, p, s))
    y = e.sel(e.lt(a, ERF_SMALL_F32), small, big)
    return _finish_f32(b, x, e.copysign(y, x), odd=True)


def emit_erfc(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e, xd = _widen(b, x)
    xs = _nan_free(e, xd)
    xs = e.sel(e.eq(xd, math.inf), ERFC_HI, e.sel(e.eq(xd, -math.inf), -ERFC_HI, xs))
    a = e.abs(xs)
    small = e.lt(a, 0.75)
    tail = e.erfc_pos(e.sel(small, 0.75, a))
    big = e.sel(e.lt(xs, 0.0), e.sub(2.0, tail), tail)
    return _finish(e, x, e.sel(small, e.sub(1.0, e.erf_small(xs)), big))


def emit_erfinv(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # erfinv(y) = y * P(w), w = -log((1 - y)(1 + y)) (exact product in f64): one fit of P on
    # w in [0, 5], one in sqrt(w) past it (up to 6.1 > sqrt(w) of the f64 next to 1)
    e, xd = _widen(b, x)
    a = e.abs(xd)
    a = e.sel(e.lt(a, 1.0), a, 0.0)
    w = e.b.fneg(e.log(e.mul(e.sub(1.0, a), e.add(a, 1.0))))
    centre = e.clenshaw(e.sel(e.gt(w, 5.0), 5.0, w), 0.0, 5.0, ERFINV_C)
    s = e.sqrt(w)
    s = e.sel(e.lt(s, math.sqrt(5.0)), math.sqrt(5.0), s)
    tail = e.clenshaw(s, math.sqrt(5.0), 6.1, ERFINV_T)
    y = e.copysign(e.mul(e.abs(xd), e.sel(e.gt(w, 5.0), tail, centre)), xd)
    y = _finish(e, x, y, odd=True)
    ax = e.intr("llvm.fabs", x)
    y = _special(e, e.gt(ax, 1.0), math.nan, y)
    inf = b.select(e.lt(x, 0.0), ir.Constant(x.type, -math.inf), ir.Constant(x.type, math.inf))
    return b.select(e.eq(ax, 1.0), inf, y)


# -- digamma


def _digamma_pos(e: _E, z: ir.Value) -> ir.Value:
    """psi(z) for finite z > 0. Below 2: psi(z) = (z - x0) R(z) on [1, 2], x0 the positive
    root in two pieces (full relative accuracy next to it), and psi(z) = psi(z + 1) - 1/z below
    1. From 2 on: the asymptotic series at y = z (+ 8 below 10) minus the 1/(z + j) it skipped."""
    below1 = e.lt(z, 1.0)
    zz = e.sel(below1, e.add(z, 1.0), z)
    zz = e.sel(e.gt(zz, 2.0), 2.0, zz)
    lo = e.mul(
        e.sub(e.sub(zz, DIGAMMA_ROOT[0]), DIGAMMA_ROOT[1]), e.clenshaw(zz, 1.0, 2.0, DIGAMMA_R)
    )
    lo = e.sel(below1, e.sub(lo, e.div(1.0, z)), lo)
    shift = e.lt(z, 10.0)
    zs = e.sel(e.lt(z, 2.0), 2.0, z)
    y = e.sel(shift, e.add(zs, 8.0), zs)
    iy2 = e.div(1.0, e.mul(y, y))
    hi = e.sub(e.sub(e.log(y), e.div(0.5, y)), e.mul(iy2, e.horner(iy2, ASYM)))
    skipped = e.c(0.0)
    for j in range(8):
        skipped = e.add(skipped, e.div(1.0, e.add(zs, float(j))))
    hi = e.sel(shift, e.sub(hi, skipped), hi)
    return e.sel(e.lt(z, 2.0), lo, hi)


def emit_digamma(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # x < 0 by reflection: psi(x) = psi(1 - x) - pi cot(pi x), with cot(pi f) for the exact
    # fraction f = x - rint(x)
    e, xd = _widen(b, x)
    ok = e.b.and_(e.lt(e.abs(xd), math.inf), e.b.fcmp_ordered("!=", xd, e.c(0.0)))
    xs = e.sel(ok, xd, 1.0)
    neg = e.lt(xs, 0.0)
    y = _digamma_pos(e, e.sel(neg, e.sub(1.0, xs), xs))
    f = e.sub(xs, e.intr("llvm.rint", xs))
    r, q = e.reduce_pio2(e.mul(f, math.pi))
    s, c = e.sin_cos_poly(r)
    odd_q = b.trunc(q, ir.IntType(1))
    cot = b.select(odd_q, e.div(b.fneg(s), c), e.div(c, s))
    y = _finish(e, x, e.sel(neg, e.sub(y, e.mul(cot, math.pi)), y))
    pole = e.b.and_(e.lt(x, 0.0), e.b.fcmp_ordered("==", x, e.intr("llvm.rint", x)))
    y = _special(e, pole, math.nan, y)  # negative integers and -inf
    y = _special(e, e.eq(x, math.inf), math.inf, y)
    zero = b.fneg(b.fdiv(ir.Constant(x.type, 1.0), x))  # psi(+-0) = -+inf, as -1/x
    return b.select(e.eq(x, 0.0), zero, y)


MATH_F32: dict[str, Emitter] = {
    "exp": emit_exp, "exp2": emit_exp2, "expm1": emit_expm1, "sigmoid": emit_sigmoid,
    "log": emit_log, "log2": emit_log2, "log10": emit_log10, "log1p": emit_log1p,
    "sin": emit_sin, "cos": emit_cos, "tan": emit_tan,
    "atan": emit_atan, "asin": emit_asin, "acos": emit_acos,
    "tanh": emit_tanh, "sinh": emit_sinh, "cosh": emit_cosh,
    "asinh": emit_asinh, "acosh": emit_acosh, "atanh": emit_atanh,
    "erf": emit_erf, "erfc": emit_erfc, "erfinv": emit_erfinv, "digamma": emit_digamma,
}  # fmt: skip
"""FIR op name -> emitter of the f32 function (f16 and bf16 are computed in f32 too)."""
MATH_F64 = frozenset({"digamma", "erfinv"})
"""The emitters that also take an f64 argument (libm has no digamma or erfinv; these two are
accurate to ~1e-13 relative in f64 rather than correctly rounded)."""
MATH_F32_BOUNDED: dict[str, Emitter] = {"sin": emit_sin_bounded, "cos": emit_cos_bounded}
"""Cheaper emitters for an f32 argument of magnitude at most ``TRIG_BOUND``."""
MATH_F32_SMALL: dict[str, Emitter] = {"sin": emit_sin_small, "cos": emit_cos_small}
"""All-f32 emitters for an argument of magnitude at most ``TRIG_BOUND_F32``."""


def bounded_emitter(op: str, bound: float) -> Emitter | None:
    """The cheapest emitter of ``op`` for an f32 argument of magnitude at most ``bound``, where
    it has one cheaper than :data:`MATH_F32`'s (sin and cos: :data:`MATH_F32_SMALL` up to
    ``TRIG_BOUND_F32``, :data:`MATH_F32_BOUNDED` up to ``TRIG_BOUND``); None otherwise."""
    if op in MATH_F32_SMALL and bound <= TRIG_BOUND_F32:
        return MATH_F32_SMALL[op]
    return MATH_F32_BOUNDED.get(op) if bound <= TRIG_BOUND else None
