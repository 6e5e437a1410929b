"""The half conversions the llvm back end gives MCJIT (backends/runtime/llvm_softfp.py), and the
check that an object needing a name nothing provides is an error, not a call to address 0.

Before them, an f16 program with transcendental ops segfaulted under llvmlite 0.50 (LLVM 22)
on every CPU without AVX512-FP16: LLVM called ``__truncdfhf2``, which the process lacks. The
host of a test run may have AVX512-FP16, so the program is also compiled for older CPUs by
name (``FIR_LLVM_CPU``), which makes LLVM use the library calls on any x86-64 host.
"""

from __future__ import annotations

import ctypes
import platform
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
pytest.importorskip("llvmlite")

import llvmlite.binding as llvm  # noqa: E402
from fir.backends.llvm import LLVMBuildError, build  # noqa: E402
from fir.backends.runtime import llvm_softfp as softfp  # noqa: E402
from fir.ir.dtypes import DType  # noqa: E402
from llvmlite import ir  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_cpp_render as cpp  # noqa: E402
import test_llvm  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
CTYPE = {16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}
BITS = {"half": 16, "float": 32, "double": 64}
# the bits of infinity and of the quiet bit of each format
INF = {16: 0x7C00, 32: 0x7F800000, 64: 0x7FF0000000000000}
QUIET = {16: 1 << 9, 32: 1 << 22, 64: 1 << 51}
_keep: list = []  # engines of the wrappers, alive for the test session


def conversion(name: str):  # type: ignore[no-untyped-def]
    """``name`` (one of softfp.CONVERSIONS) as a ctypes function from bits to bits: called
    through a wrapper compiled by LLVM, as a kernel would call it."""
    softfp.register(build.target_machine)
    src, dst = softfp.CONVERSIONS[name]
    src_bits, dst_bits = BITS[str(src)], BITS[str(dst)]
    module = ir.Module(name="wrap")
    module.triple = llvm.get_process_triple()
    callee = ir.Function(module, ir.FunctionType(dst, [src]), name)
    wrapper = ir.Function(
        module, ir.FunctionType(ir.IntType(dst_bits), [ir.IntType(src_bits)]), "wrap"
    )
    b = ir.IRBuilder(wrapper.append_basic_block())
    value = b.bitcast(wrapper.args[0], src)
    b.ret(b.bitcast(b.call(callee, [value]), ir.IntType(dst_bits)))
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), build.target_machine())
    engine.finalize_object()
    _keep.append(engine)
    fn = ctypes.CFUNCTYPE(CTYPE[dst_bits], CTYPE[src_bits])(engine.get_function_address("wrap"))
    return fn


def _unsigned(values: np.ndarray, bits: int) -> list[int]:
    return values.view({16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]).tolist()


@pytest.mark.parametrize(
    "name,wide", [("__extendhfsf2", np.float32), ("__extendhfdf2", np.float64)]
)
def test_half_widens_exactly_for_every_half(name: str, wide: type) -> None:
    fn = conversion(name)
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    want = _unsigned(halves.astype(wide), 32 if wide is np.float32 else 64)
    got = [fn(h) for h in range(1 << 16)]
    nan = np.isnan(halves)
    # NaNs: numpy and the hardware both keep the payload and set the quiet bit
    assert [g for g, w, n in zip(got, want, nan) if g != w and not n] == []
    bits = BITS[str(softfp.CONVERSIONS[name][1])]
    quiet_nan = INF[bits] | QUIET[bits]
    assert all(g & quiet_nan == quiet_nan for g, n in zip(got, nan) if n)


def _narrow_cases(bits: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    floaty = np.float32 if bits == 32 else np.float64
    uint = np.uint32 if bits == 32 else np.uint64
    raw = rng.integers(0, np.iinfo(uint).max, 100_000, dtype=uint, endpoint=True).view(floaty)
    # around every rounding boundary: halves' midpoints, the subnormal range, overflow
    mids = np.arange(1 << 15, dtype=np.uint32).astype(np.uint16).view(np.float16)
    mids = mids[np.isfinite(mids)].astype(np.float64)
    up = np.nextafter(mids.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    mid = (mids + up) / 2
    near = [mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)]
    special = [
        0.0,
        65504.0,
        65519.99,
        65520.0,
        2.0**-24,
        2.0**-25,
        2.0**-26,
        6.1e-5,
        1e-30,
        np.inf,
        np.nan,
        1e300,
    ]
    values = np.concatenate([raw.astype(np.float64), *near, np.array(special)])
    values = np.concatenate([values, -values]).astype(floaty)
    return values[np.isfinite(values) | np.isinf(values)]


@pytest.mark.parametrize("name,bits", [("__truncsfhf2", 32), ("__truncdfhf2", 64)])
def test_narrowing_to_half_rounds_to_nearest_even(name: str, bits: int) -> None:
    # numpy converts to half with one correct rounding, as compiler-rt and the hardware do
    fn = conversion(name)
    values = _narrow_cases(bits)
    want = _unsigned(values.astype(np.float16), 16)
    got = [fn(v) for v in _unsigned(values, bits)]
    bad = [
        (hex(v), hex(g), hex(w)) for v, g, w in zip(_unsigned(values, bits), got, want) if g != w
    ]
    assert bad == []
    nan = INF[bits] | 1  # a signalling NaN comes back a quiet one
    assert fn(nan) & 0x7E00 == 0x7E00


def test_the_helpers_need_no_library_themselves() -> None:
    tm = build.target_machine()
    module = llvm.parse_assembly(str(softfp.helper_module(tm.triple)))
    assert softfp.undefined_symbols(tm.emit_object(module)) == []


def test_undefined_names_of_an_object_are_listed() -> None:
    module = ir.Module(name="calls")
    module.triple = llvm.get_process_triple()
    missing = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "fir_no_such_function")
    powf = ir.Function(
        module, ir.FunctionType(ir.FloatType(), [ir.FloatType(), ir.FloatType()]), "powf"
    )
    f = ir.Function(module, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "f")
    b = ir.IRBuilder(f.append_basic_block())
    b.call(missing, [])
    b.ret(b.call(powf, [f.args[0], f.args[0]]))
    obj = build.target_machine().emit_object(llvm.parse_assembly(str(module)))
    assert sorted(softfp.undefined_symbols(obj) or []) == ["fir_no_such_function", "powf"]
    assert softfp.unresolved_symbols(obj) == ["fir_no_such_function"]


def test_a_kernel_that_needs_a_missing_name_is_an_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = build.render_module

    def with_a_missing_call(*args, **kwargs):  # type: ignore[no-untyped-def]
        module = real(*args, **kwargs)
        missing = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "fir_planted_missing")
        f = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "fir_caller")
        b = ir.IRBuilder(f.append_basic_block())
        b.call(missing, [])
        b.ret_void()
        return module

    monkeypatch.setattr(build, "render_module", with_a_missing_call)
    text = "func @f(%x: f32[8]) -> (f32[8]) {\n  %y = exp %x : f32[8]\n  return %y\n}\n"
    with pytest.raises(LLVMBuildError, match="fir_planted_missing"):
        test_llvm.compile_text(text)


OLDER_CPUS = ["haswell", "znver3", "x86-64"]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 CPU names")
@pytest.mark.parametrize("cpu", OLDER_CPUS)
@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16], ids=str)
def test_every_elementwise_op_on_cpus_without_native_f16(
    cpu: str, dtype: DType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIR_LLVM_CPU", cpu)
    text, inputs = cpp._op_program(dtype)
    tol = 1e-3 if dtype is DType.F16 else 8e-3
    test_llvm.check(test_llvm._without_unsupported(text), inputs, rtol=tol, atol=tol)
