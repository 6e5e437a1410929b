"""Compile and load: LLVM IR of a program -> optimised for this CPU -> MCJIT -> loaded kernels.

One module per program, the host CPU as the target (``get_host_cpu_name`` and its features),
optimised with llvmlite's new pass builder at O3 with loop and SLP vectorisation, compiled to
an object file, and loaded into MCJIT in the process: no toolchain at all. A module LLVM's
verifier rejects is an ``LLVMBuildError`` naming the program, with the IR written to a file for
reading.

The object code is cached on disk (:class:`~fir.backends.cache.Cache` ``llvm``), keyed by the
IR text, the llvmlite and LLVM versions, the host CPU's name and features and the optimisation
settings: a hit skips optimisation and code generation (most of a build) and loads the object
as it is. An entry whose checksum does not agree is built again, never loaded.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm
from fir.backends.cache import Cache, cache_key
from fir.backends.plan import ProgramPlan
from fir.backends.plan.program import shared_storage
from fir.backends.runtime import llvm_softfp as softfp
from fir.backends.runtime.llvm_threads import SplitKernels, uses_omp
from fir.ir.errors import FirError

from .render import render_module


class LLVMBuildError(FirError):
    """LLVM rejected a generated module (a bug of the renderer): the message says where the IR
    was written."""


@functools.cache
def _initialise() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def target_cpu() -> str:
    """The CPU code is generated for: the host's, or ``$FIR_LLVM_CPU`` (an LLVM CPU name such
    as ``haswell`` or ``znver3``: code for an older CPU, run on a newer one, tests what users
    of that CPU get, e.g. the library calls LLVM makes where the host has instructions)."""
    return os.environ.get("FIR_LLVM_CPU") or llvm.get_host_cpu_name()


def cpu_features() -> str:
    """The host CPU's features, and 512-bit vectors where it has AVX-512: LLVM's tuning for
    these CPUs prefers 256-bit ones, which left the compute-bound kernels slower (one thread:
    softmax 4096 x 2048 9.0 -> 6.8 ms, x.sum(0) 4.0 -> 2.5 ms; transposes and streaming
    kernels the same or better), as the C++ back end found (-mprefer-vector-width=512). Under
    ``$FIR_LLVM_CPU``, none: the CPU name implies them."""
    if os.environ.get("FIR_LLVM_CPU"):
        return ""
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" in features.split(","):
        features += ",-prefer-256-bit"
    return features


def target_machine() -> Any:
    """A new target machine for the CPU of :func:`target_cpu` (an engine consumes its own)."""
    _initialise()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=target_cpu(), features=cpu_features(), opt=3)


def symbol(name: str) -> str:
    return "fir_" + name  # never a libm or libc name


# the helpers kernels call (bf16 conversions, turned tiles), in LLVM IR, linked into a module
# that calls any
PRELUDE = Path(__file__).with_name("prelude.ll").read_text()
PRELUDE_FUNCTIONS = tuple(re.findall(r"^define [^@]*@(\w+)\(", PRELUDE, re.M))


def with_prelude(mod: Any) -> Any:
    """``mod`` with the prelude linked in where it calls one of its functions."""
    if any(f.is_declaration and f.name in PRELUDE_FUNCTIONS for f in mod.functions):
        prelude = llvm.parse_assembly(PRELUDE)
        prelude.triple = mod.triple
        mod.link_in(prelude)
    return mod


def optimise(ir_text: str, name: str) -> tuple[Any, Any]:
    """The module parsed, the prelude linked in where it calls it, verified and optimised (O3,
    loop and SLP vectorisers on), and the target machine it was optimised for."""
    tm = target_machine()
    try:
        mod = with_prelude(llvm.parse_assembly(ir_text))
        mod.verify()
    except RuntimeError as e:
        path = Path(tempfile.mkdtemp(prefix="fir-llvm-")) / f"{name}.ll"
        path.write_text(ir_text)
        where = failing_function(ir_text, str(e))
        what = f"function @{where} of program @{name}" if where else f"the module of @{name}"
        raise LLVMBuildError(f"LLVM rejected {what} (the IR is in {path}): {e}") from None
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


def failing_function(ir_text: str, message: str) -> str | None:
    """The function of ``ir_text`` that LLVM's message is about: the one around the line a
    parse error names (``<string>:LINE:COL``), or around the first instruction a verifier
    error quotes; None where neither is found."""
    lines = ir_text.splitlines()
    at = None
    m = re.search(r":(\d+):\d+:", message)
    if m is not None:
        at = int(m.group(1)) - 1
    else:
        # the verifier prints names unquoted (%later where the text has %"later")
        plain = [line.replace('"', "").strip() for line in lines]
        quoted = [q.replace('"', "").strip() for q in message.splitlines()[1:] if q.strip()]
        at = next((k for q in quoted for k, line in enumerate(plain) if line == q), None)
    if at is None:
        return None
    defines = (re.match(r"define\b.*?@\"?([\w.$]+)\"?\(", line) for line in lines[at::-1])
    return next((d.group(1) for d in defines if d is not None), None)


# how many modules this process optimised and compiled to objects (a cache hit does neither)
STATS = {"codegen": 0, "cache_hits": 0}


def object_key(ir_text: str) -> str:
    """The cache key of a module's object code: everything the object depends on (the
    prelude it may link in included)."""
    return cache_key(
        ir_text,
        PRELUDE,
        llvmlite.__version__,
        ".".join(str(v) for v in llvm.llvm_version_info),
        llvm.get_process_triple(),
        target_cpu(),
        cpu_features(),
        "O3 loop-vectorize slp-vectorize",
    )


def compile_object(ir_text: str, name: str, cache: Cache | None = None) -> bytes:
    """The object code of a module: from the cache, or optimised, compiled and stored."""
    cache = cache or Cache("llvm")
    entry = object_key(ir_text) + ".o"
    hit = cache.read(entry)  # trusted (ours, private, no link) and whole, read through one fd
    if hit is not None:
        STATS["cache_hits"] += 1
        return hit
    module, tm = optimise(ir_text, name)
    data = tm.emit_object(module)
    STATS["codegen"] += 1
    with contextlib.suppress(OSError):  # not even the temporary folder: the code still runs
        cache.store(entry, lambda tmp: tmp.write_bytes(data))
    return data


def module_text(plan: ProgramPlan) -> str:
    """The LLVM IR of ``plan``'s kernels as this process compiles them (``fir-translate
    --target llvm`` prints this)."""
    kernels = plan.kernels()
    aliased = {k.name: shared_storage(plan, k) for k in kernels}
    triple = llvm.get_process_triple()
    return str(render_module(kernels, symbol, triple, omp=uses_omp(), aliased=aliased))


class LLVMKernels(SplitKernels):
    """A program's kernels compiled by LLVM and loaded in this process; the runtime's
    :class:`~fir.backends.runtime.llvm_threads.SplitKernels` calls them over the cores."""

    def __init__(self, plan: ProgramPlan, cache: Cache | None = None) -> None:
        start = time.perf_counter()
        omp = uses_omp()
        self.ir = self.source = module_text(plan)
        self.name = plan.name
        self.object = obj = compile_object(self.ir, plan.name, cache)  # kept while loaded
        softfp.register(target_machine)  # the half conversions LLVM may call
        missing = softfp.unresolved_symbols(obj)
        if missing:  # MCJIT would leave each a call to address 0: a crash at the first call
            raise LLVMBuildError(
                f"the code of @{plan.name} calls {', '.join(missing)}, which this process does "
                f"not provide (LLVM {'.'.join(map(str, llvm.llvm_version_info))}, CPU "
                f"{target_cpu()}); the llvm back end cannot run it here"
            )
        # the engine holds an empty module and the object file, which MCJIT links and loads
        # (relocations, libm symbols) without code generation
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine())
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self.engine.finalize_object()
        self._module: Any = None

        def address(kernel: str, driver: bool) -> int:
            return self.engine.get_function_address(symbol(kernel) + ("_omp" if driver else ""))

        super().__init__(plan.kernels(), address, omp)
        self.seconds = time.perf_counter() - start

    @property
    def module(self) -> Any:
        """The optimised module (for reading: ``fir-translate --opt``, tests), optimised again
        on demand: a cache hit never optimised it."""
        if self._module is None:
            self._module = optimise(self.ir, self.name)[0]
        return self._module


def build_program(plan: ProgramPlan, cache: Cache | None = None) -> LLVMKernels:
    return LLVMKernels(plan, cache)
