"""OpInfo conformance: PyTorch's own op database run through ``torch.compile(backend="fir")``.

For each selected OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` this
takes its float32 CPU sample inputs (the first ``MAX_SAMPLES``), compiles
``lambda *a, **k: op.op(*a, **k)`` with the fir backend (its defaults: the ``fusion`` pipeline
and the C++ back end), runs it, and
compares with eager PyTorch within the OpInfo's float32 CPU tolerance overrides (else the
``assert_close`` defaults), ``equal_nan=True``.

Each sample is compiled from scratch (``torch._dynamo.reset()``, ``dynamic=False``), so a new
shape never hits a recompile limit and silently runs in eager.

Every OpInfo ends in one class:

* ``covered``: every sample ran through FIR, every aten op it produced was mapped to FIR ops,
  and every result matched eager;
* ``fallback``: results matched, but some aten op ran as an extern call of PyTorch, or Dynamo
  broke the graph, or the fir backend handed a whole graph back to PyTorch, or Dynamo produced
  no graph at all;
* ``skipped``: no float32 CPU support or no samples, random or uninitialized results, or
  listed in ``SKIPPED`` with the reason (features FIR does not model);
* ``failed``: a result differs from eager, or compiling/running raised, or the C++ back end
  could not compile a graph that FIR imported (PyTorch ran it, but that is FIR's fault).

Selection (keeps the CI run at about 3.5 minutes on a two-core machine; the whole database
takes 4 to 7, depending on load): every OpInfo named in ``SELECTED`` — those whose aten ops FIR maps, or
that exercise a converter's fallback path (elementwise, reductions, views and data movement,
creation, matmul, activations, norms, losses, plus a few neighbours with no FIR op such as
cumsum, sort, conv2d, to keep their fallbacks visible) — and one in ``SAMPLE_EVERY`` of the
remaining OpInfos in database order (linear algebra, FFT, special functions, pooling, sparse,
complex …), so the fallback count keeps tracking the rest of the database. When a converter is
added, add the OpInfos it serves to ``SELECTED``. ``FIR_OPINFO=all`` runs every OpInfo;
``FIR_OPINFO=name,name`` runs those; ``FIR_OPINFO_SAMPLES=n`` changes the samples per OpInfo;
``FIR_OPINFO_BACKEND=llvm`` compiles with the llvmlite back end.
Sample inputs are generated under ``torch.manual_seed(0)`` per OpInfo, so runs repeat.

The suite fails on any ``failed`` OpInfo (``EXPECTED_FAILURES`` lists the ones whose cause is
outside FIR, with the reason; it is empty). It prints a table and the summary line
``opinfo: N covered (M distinct aten ops), F fallback, S skipped, X failed``.

Re-generate ``docs/opinfo.md`` (whole database, with the CI selection's line too):
``python tests/frontend/test_opinfo.py --ops all --write-docs``.

``test_composite_converter`` adds argument combinations the samples leave out for the
converters written as compositions of FIR ops (a few seconds).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # torch.testing._internal needs it

MAX_SAMPLES = int(os.environ.get("FIR_OPINFO_SAMPLES", "4"))
# the device the samples live on: "cuda" runs the suite through the Triton back end on a GPU
# (``python tests/frontend/test_opinfo.py --device cuda``); CI runs it on the CPU
DEVICE = os.environ.get("FIR_OPINFO_DEVICE", "cpu")
# the code generator (``FIR_OPINFO_BACKEND=llvm``); by default the device's (C++ or Triton)
BACKEND = os.environ.get("FIR_OPINFO_BACKEND") or None
SAMPLE_EVERY = 6

# OpInfos (by name, or name.variant) chosen because their aten ops are mapped or are close to
# something FIR ops can express.
# fmt: off
SELECTED = {
    # unary elementwise
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "deg2rad",
    "digamma", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "floor", "frac", "isfinite",
    "isinf", "isnan", "isneginf", "isposinf", "isreal", "lgamma", "log", "log10", "log1p", "log2",
    "logical_not", "logit", "nan_to_num", "neg", "positive", "rad2deg", "reciprocal", "round",
    "round.decimals_0", "round.decimals_3", "round.decimals_neg_3", "rsqrt", "sgn", "sigmoid",
    "sign", "signbit", "sin", "sinc", "sinh", "sqrt", "square", "tan", "tanh", "trunc",
    "nn.functional.relu", "special.erfcx", "special.log_ndtr", "special.ndtr", "special.ndtri",
    "special.entr", "special.i0e", "special.xlog1py", "i0", "angle", "conj", "conj_physical",
    "real", "resolve_conj", "resolve_neg", "float", "mvlgamma.mvlgamma_p_1", "mvlgamma.mvlgamma_p_3",
    "mvlgamma.mvlgamma_p_5", "polygamma.polygamma_n_0", "nn.functional.logsigmoid",
    "nn.functional.tanhshrink", "nn.functional.softsign", "nn.functional.hardshrink",
    "nn.functional.softshrink", "nn.functional.threshold", "nn.functional.celu",
    "nn.functional.selu", "to", "double", "half", "bfloat16", "bool", "byte", "char", "int",
    "long", "short",
    # binary / ternary elementwise
    "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding", "div.trunc_rounding",
    "true_divide", "floor_divide", "remainder", "fmod", "pow", "float_power", "atan2", "hypot",
    "copysign", "maximum", "minimum", "fmax", "fmin", "max.binary", "min.binary", "eq", "ne",
    "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "clamp", "clamp_min",
    "clamp_max", "where", "masked_fill", "addcmul", "addcdiv", "lerp", "xlogy", "logaddexp",
    "logaddexp2", "rsub", "nextafter", "ldexp", "heaviside", "isclose",
    "nn.functional.pairwise_distance", "dist", "__radd__", "__rsub__", "__rmul__", "__rdiv__",
    "__rpow__", "__rmod__", "masked.logaddexp",
    # reductions and normalizing ops
    "sum", "mean", "prod", "amax", "amin", "max.reduction_no_dim", "max.reduction_with_dim",
    "min.reduction_no_dim", "min.reduction_with_dim", "argmax", "argmin", "any", "all",
    "logsumexp", "var", "std", "var_mean", "std_mean", "var.unbiased", "std.unbiased",
    "var_mean.unbiased", "std_mean.unbiased", "nansum", "nanmean", "norm", "norm.fro",
    "norm.inf", "linalg.vector_norm", "linalg.norm", "linalg.vecdot", "count_nonzero", "aminmax",
    "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "softmax", "log_softmax",
    "log_softmax.with_dtype", "softmax.with_dtype", "nn.functional.softmin",
    "_softmax_backward_data", "torch.ops.aten._safe_softmax.default", "masked.amax",
    "masked.argmax", "masked.argmin", "masked.log_softmax", "masked.logsumexp", "masked.mean",
    "masked.norm", "masked.prod", "masked.softmax", "masked.softmin", "masked.std", "masked.sum",
    "masked.var",
    "trapezoid", "trapz", "diff", "gradient",
    # views and data movement
    "reshape", "view", "reshape_as", "view_as", "flatten", "unflatten", "squeeze",
    "squeeze.multiple", "unsqueeze", "permute", "transpose", "movedim", "t", "T", "mT", "H",
    "mH", "expand", "expand_as", "broadcast_to", "broadcast_tensors", "broadcast_shapes",
    "sum_to_size", "narrow", "narrow_copy", "select", "select_scatter", "slice",
    "slice_scatter", "split", "split.list_args", "split_with_sizes", "chunk", "unbind",
    "tensor_split", "hsplit", "vsplit", "dsplit", "cat", "stack", "hstack", "vstack", "dstack",
    "column_stack", "meshgrid.variadic_tensors", "meshgrid.list_of_tensors", "unsafe_chunk", "cartesian_prod", "flip", "fliplr", "flipud",
    "roll", "rot90", "fft.fftshift", "fft.ifftshift", "repeat", "tile", "tril", "triu",
    "diagonal", "linalg.diagonal", "diagonal_copy", "diag", "diag_embed", "diagflat", "trace", "contiguous", "clone", "atleast_1d",
    "atleast_2d", "atleast_3d", "ravel", "nn.functional.pad.constant",
    "nn.functional.pad.reflect", "nn.functional.pad.replicate", "nn.functional.pad.circular",
    "constant_pad_nd", "as_strided", "unfold", "index_select", "gather", "take_along_dim",
    "take", "__getitem__", "index_put", "masked_select", "nn.functional.embedding",
    "nn.functional.pixel_shuffle", "nn.functional.pixel_unshuffle",
    "nn.functional.channel_shuffle", "nn.functional.interpolate.nearest",
    "nn.functional.interpolate.nearest-exact", "nn.functional.interpolate.linear",
    "nn.functional.interpolate.bilinear", "nn.functional.interpolate.bicubic",
    "nn.functional.interpolate.trilinear", "nn.functional.upsample_bilinear",
    "nn.functional.upsample_nearest", "sort", "topk",
    "argsort", "kthvalue", "median", "view_copy", "permute_copy", "t_copy", "expand_copy",
    "unsqueeze_copy", "squeeze_copy", "transpose_copy", "unbind_copy", "alias_copy",
    "as_strided_copy", "split_with_sizes_copy",
    # creation
    "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "zeros",
    "ones", "full", "arange", "linspace", "logspace", "eye", "scalar_tensor", "fill", "zero_",
    "signal.windows.hann", "signal.windows.gaussian", "signal.windows.kaiser",
    "signal.windows.bartlett", "signal.windows.cosine", "signal.windows.general_cosine",
    "signal.windows.general_hamming", "signal.windows.hamming", "signal.windows.nuttall",
    "signal.windows.exponential",
    # matmul
    "mm", "bmm", "matmul", "addmm", "addmm.decomposed", "addmv", "addbmm", "baddbmm", "addr",
    "mv", "dot", "vdot", "inner", "outer", "einsum", "tensordot", "nn.functional.linear",
    "nn.functional.bilinear", "__rmatmul__", "kron", "linalg.multi_dot", "cross", "linalg.cross",
    # activations, norms, losses
    "nn.functional.gelu", "nn.functional.silu", "nn.functional.mish", "nn.functional.hardswish",
    "nn.functional.hardsigmoid", "nn.functional.softplus", "nn.functional.leaky_relu",
    "nn.functional.elu", "nn.functional.hardtanh", "nn.functional.relu6", "nn.functional.glu",
    "nn.functional.prelu", "nn.functional.layer_norm", "nn.functional.rms_norm",
    "nn.functional.group_norm", "native_group_norm", "nn.functional.batch_norm",
    "native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update",
    "nn.functional.instance_norm", "nn.functional.local_response_norm",
    "nn.functional.normalize", "masked.normalize", "nn.functional.cosine_similarity",
    "native_layer_norm", "native_dropout_backward",
    "nn.functional.cross_entropy", "nn.functional.linear_cross_entropy", "nn.functional.nll_loss", "nn.functional.mse_loss",
    "nn.functional.l1_loss", "nn.functional.smooth_l1_loss", "nn.functional.huber_loss",
    "nn.functional.binary_cross_entropy", "nn.functional.binary_cross_entropy_with_logits",
    "nn.functional.kl_div", "nn.functional.soft_margin_loss",
    "nn.functional.hinge_embedding_loss", "nn.functional.poisson_nll_loss",
    "nn.functional.margin_ranking_loss", "nn.functional.cosine_embedding_loss",
    "nn.functional.triplet_margin_loss", "nn.functional.triplet_margin_with_distance_loss",
    "nn.functional.multi_margin_loss", "nn.functional.multilabel_margin_loss",
    "nn.functional.multilabel_soft_margin_loss", "nn.functional.scaled_dot_product_attention",
    "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.conv2d", "nn.functional.max_pool2d",
}

# OpInfos skipped on purpose, with why.
SKIPPED = {
    "empty": "uninitialized result",
    "empty_like": "uninitialized result",
    "new_empty": "uninitialized result",
    "new_empty_strided": "uninitialized result",
    "empty_strided": "uninitialized result",
    "empty_permuted": "uninitialized result",
    "nonzero_static": "uninitialized padding",
    # CUDA only: besides the attention it returns the philox seed and offset it drew from the
    # generator, which advances between the eager and the compiled call
    "torch.ops.aten._efficient_attention_forward": "returns the RNG offset it drew",
}
# OpInfos whose results are random (compared by name, not substring: normalize is not normal)
RANDOM = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "uniform", "rand_like", "randint", "randint_like", "randn", "randn_like",
    "nn.functional.rrelu", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout",
}
NOT_RANDOM = {"nn.functional.feature_alpha_dropout.without_train"}  # the identity

# OpInfos that fail for reasons outside FIR (a PyTorch or Dynamo bug), with the reason; they are
# reported as failed but do not fail the suite. Empty: every failure so far was FIR's to fix.
EXPECTED_FAILURES: dict[str, str] = {}
# fmt: on


@dataclass
class Outcome:
    name: str
    status: str  # covered, fallback, skipped, failed
    detail: str = ""
    imported: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)  # aten op -> why it fell back
    samples: int = 0
    seconds: float = 0.0


def _load_op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def _full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _is_selected(op: Any) -> bool:
    return _full_name(op) in SELECTED or op.name in SELECTED


def select_ops(op_db: list[Any], which: str | None = None) -> list[Any]:
    """The OpInfos to run: ``which`` (or ``$FIR_OPINFO``) is ``all``, a comma-separated list of
    names, or empty for the CI selection described at the top of this file."""
    which = which if which is not None else os.environ.get("FIR_OPINFO", "")
    if which == "all":
        return list(op_db)
    if which:
        names = set(which.split(","))
        return [op for op in op_db if _full_name(op) in names or op.name in names]
    others = [op for op in op_db if not _is_selected(op)]
    sampled = {id(op) for k, op in enumerate(others) if k % SAMPLE_EVERY == 0}
    return [op for op in op_db if _is_selected(op) or id(op) in sampled]


def _tolerance(op: Any) -> dict[str, float]:
    """The loosest float32 tolerance override the OpInfo declares for CPU (or any device)
    forward tests; {} means assert_close's defaults."""
    from torch.testing._internal.common_device_type import toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    atol = rtol = None
    for d in op.decorators:
        if not isinstance(d, DecorateInfo) or d.device_type not in (None, DEVICE):
            continue
        test = d.test_name or ""
        if any(w in test for w in ("grad", "vjp", "jvp", "backward", "forward_ad")):
            continue
        for dec in d.decorators:
            if isinstance(dec, toleranceOverride) and torch.float32 in dec.d:
                tol = dec.d[torch.float32]
                atol = max(atol or 0.0, tol.atol)
                rtol = max(rtol or 0.0, tol.rtol)
    return {} if atol is None else {"atol": atol, "rtol": rtol}


def _skip_reason(op: Any) -> str | None:
    name = _full_name(op)
    if name in SKIPPED or op.name in SKIPPED:
        return SKIPPED.get(name) or SKIPPED[op.name]
    if op.name in RANDOM and name not in NOT_RANDOM:
        return "random result"
    if getattr(op, "has_nondeterministic_output", False):
        return "nondeterministic result"
    if torch.float32 not in op.supported_dtypes(DEVICE):
        return f"no float32 on {DEVICE}"
    return None


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, list):
        return [_clone(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _first_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:200] if text else type(e).__name__


@dataclass
class SampleResult:
    status: str
    detail: str = ""
    imported: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)


def run_sample(op: Any, sample: Any, tol: dict[str, float]) -> SampleResult:
    import torch._dynamo
    from fir.frontend.dynamo import COMPILED
    from torch._dynamo.utils import counters

    args = (sample.input, *sample.args)
    kwargs = dict(sample.kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation notes of the op itself
            expected = op.op(*_clone(args), **_clone(kwargs))
    except Exception as e:  # the sample does not run in eager either: not FIR's business
        return SampleResult("skipped", f"eager raised {_first_line(e)}")

    torch._dynamo.reset()
    counters.clear()
    start = len(COMPILED)
    fn = op.op
    compiled = torch.compile(
        lambda *a, **k: fn(*a, **k),
        backend="fir",
        dynamic=False,
        options={"backend": BACKEND} if BACKEND else None,
    )
    res = SampleResult("covered")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            actual = compiled(*_clone(args), **_clone(kwargs))
        except Exception as e:
            del COMPILED[start:]
            return SampleResult("failed", f"raised {_first_line(e)}")
    graphs = COMPILED[start:]
    del COMPILED[start:]  # keep the process's list from growing over thousands of samples
    for g in graphs:
        res.imported.update(g.report.imported)
        res.fallbacks.update(g.report.fallbacks)
        for name, why in g.report.reasons.items():
            res.reasons.setdefault(name, why)
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True, **tol)
    except Exception as e:
        res.status, res.detail = "failed", f"mismatch {_first_line(e)}"
        return res
    notes = []
    backend = [str(w.message) for w in caught if "back end could not compile" in str(w.message)]
    if backend:  # imported and transformed, then the code generator failed: FIR's fault
        res.status, res.detail = "failed", backend[0][:200]
        return res
    whole = [str(w.message) for w in caught if "fir: running this graph" in str(w.message)]
    if whole:
        notes.append(whole[0][:160])
    breaks = sum(counters["graph_break"].values())
    if breaks:
        why = next(iter(counters["graph_break"])).split("Explanation:")[0].strip()
        notes.append(f"{breaks} graph break(s): {why[:100]}")
    elif not graphs and not whole:
        notes.append("Dynamo produced no graph (ran in eager)")
    if res.fallbacks:
        notes.append("extern " + ", ".join(sorted(res.fallbacks)))
    if notes:
        res.status, res.detail = "fallback", "; ".join(notes)
    return res


def run_opinfo(op: Any, max_samples: int = MAX_SAMPLES) -> Outcome:
    name = _full_name(op)
    t0 = time.perf_counter()
    reason = _skip_reason(op)
    if reason:
        return Outcome(name, "skipped", reason)
    out = Outcome(name, "covered")
    results: list[SampleResult] = []
    torch.manual_seed(0)  # sample inputs are random; make every run see the same ones
    tol = _tolerance(op)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation notes from the sample generators
        try:
            samples = iter(op.sample_inputs(DEVICE, torch.float32))
            while len(results) < max_samples:
                sample = next(samples, None)
                if sample is None:
                    break
                r = run_sample(op, sample, tol)  # catches the errors of compiling and running
                if r.status != "skipped":
                    results.append(r)
        except Exception as e:  # so this one comes from the sample generator
            detail = f"sample inputs raised {_first_line(e)}"
            return Outcome(name, "skipped", detail, seconds=time.perf_counter() - t0)
    for r in results:
        out.imported.update(r.imported)
        out.fallbacks.update(r.fallbacks)
        for a, why in r.reasons.items():
            out.reasons.setdefault(a, why)
    out.samples = len(results)
    out.seconds = time.perf_counter() - t0
    if not results:
        out.status, out.detail = "skipped", "no float32 sample runs in eager"
        return out
    for wanted in ("failed", "fallback"):
        hits = [r.detail for r in results if r.status == wanted]
        if hits:
            out.status, out.detail = wanted, hits[0]
            return out
    return out


# ---------------------------------------------------------------------------------------------
# reporting


def covered_aten_ops(outcomes: list[Outcome]) -> set[str]:
    return {a for o in outcomes if o.status == "covered" for a in o.imported}


def summary_line(outcomes: list[Outcome]) -> str:
    by = Counter(o.status for o in outcomes)
    return (
        f"opinfo: {by['covered']} covered ({len(covered_aten_ops(outcomes))} distinct aten ops), "
        f"{by['fallback']} fallback, {by['skipped']} skipped, {by['failed']} failed"
    )


def aten_table(outcomes: list[Outcome]) -> dict[str, tuple[str, list[str], str]]:
    """aten op -> (status, OpInfos it came from, why it fell back). ``covered``: FIR mapped it
    in an OpInfo whose results all matched; ``failed``: mapped in a failing OpInfo;
    ``partly extern``: mapped, but some calls (argument combinations) ran as extern calls;
    ``fallback``: only ever ran as an extern call of PyTorch."""
    ok: dict[str, list[str]] = {}
    bad: dict[str, list[str]] = {}
    extern: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    for o in outcomes:
        for a in o.imported:
            (bad if o.status == "failed" else ok).setdefault(a, []).append(o.name)
        for a in o.fallbacks:
            extern.setdefault(a, []).append(o.name)
            why.setdefault(a, o.reasons.get(a, ""))
    table: dict[str, tuple[str, list[str], str]] = {}
    for a in sorted(set(ok) | set(bad) | set(extern)):
        if a in bad:
            table[a] = ("failed", bad[a], "")
        elif a in ok:
            status = "covered" if a not in extern else "partly extern"
            table[a] = (status, ok[a] + extern.get(a, []), why.get(a, ""))
        else:
            table[a] = ("fallback", extern[a], why.get(a, ""))
    return table


def format_table(outcomes: list[Outcome]) -> str:
    width = max((len(o.name) for o in outcomes), default=10)
    lines = [f"{'OpInfo':<{width}}  {'status':<8}  samples  detail"]
    for o in sorted(outcomes, key=lambda o: o.name):
        lines.append(f"{o.name:<{width}}  {o.status:<8}  {o.samples:>7}  {o.detail}")
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_docs(
    outcomes: list[Outcome], path: Path, seconds: float | None, ci_seconds: float | None = None
) -> None:
    table = aten_table(outcomes)
    by = Counter(s for s, _, _ in table.values())
    selected = {id(op) for op in select_ops(_load_op_db(), "")}
    names = {_full_name(op) for op in _load_op_db() if id(op) in selected}
    ci = [o for o in outcomes if o.name in names]
    everything = len(outcomes) == len(_load_op_db())
    lines = [
        "# OpInfo conformance",
        "",
        "PyTorch's OpInfo database (`torch.testing._internal.common_methods_invocations.op_db`)",
        'run through `torch.compile(backend="fir")` '
        f"(the `{'cuda' if DEVICE == 'cuda' and not BACKEND else 'fusion'}` pipeline, "
        f"{ {'llvm': 'llvmlite'}.get(BACKEND or '', 'C++' if DEVICE == 'cpu' else 'Triton') } "
        "kernels) and compared with",
        f"eager PyTorch on float32 {DEVICE.upper()} sample inputs (at most {MAX_SAMPLES} per "
        "OpInfo), within each",
        "OpInfo's float32 tolerance overrides. This page is written by `tests/frontend/test_opinfo.py`, whose",
        "docstring gives the selection rule and the classes:",
        "",
        "- **covered**: every sample ran through FIR, every aten op was mapped to FIR ops, results matched;",
        "- **fallback**: results matched, but some aten op ran as an extern call of PyTorch, Dynamo broke",
        "  the graph, or the fir backend handed the whole graph back to PyTorch;",
        f"- **skipped**: no float32 {DEVICE.upper()} samples, random or uninitialized results;",
        "- **failed**: a mismatch, an exception, or a graph the back end could not compile (the",
        "  suite fails on any).",
        "",
        "## Re-running",
        "",
        "```",
        "pip install expecttest                                  # torch.testing._internal needs it",
        "pytest tests/frontend/test_opinfo.py -s                          # CI selection: table + summary line",
        "python tests/frontend/test_opinfo.py                             # the same, as a script",
        "python tests/frontend/test_opinfo.py --ops all --write-docs      # whole database, rewrites this page",
        "FIR_OPINFO=addcmul,flip pytest tests/frontend/test_opinfo.py -s  # a few OpInfos",
        "```",
        "",
        "## Summary",
        "",
    ]
    if everything:
        lines += [
            "Whole database"
            + (
                f" ({len(outcomes)} OpInfos, {seconds:.0f} s"
                f"{' on a 2-core machine' if DEVICE == 'cpu' else ' on an H100 machine'}):"
                if seconds
                else ":"
            ),
            "",
            "```",
            summary_line(outcomes),
            "```",
            "",
            f"CI selection ({len(ci)} OpInfos"
            + (f", {ci_seconds:.0f} s" if ci_seconds else "")
            + "), what `pytest tests/frontend/test_opinfo.py` prints:",
            "",
            "```",
            summary_line(ci),
            "```",
            "",
        ]
    else:
        lines += ["```", summary_line(outcomes), "```", ""]
    lines += [
        f"aten ops seen: {len(table)}; {by['covered']} covered by FIR, {by['partly extern']} mapped but",
        f"with some argument combinations run as extern calls, {by['fallback']} only run as extern",
        f"calls of PyTorch, {by['failed']} failed.",
        "",
        "## How aten ops map",
        "",
        "Most aten ops map 1:1 onto a FIR op. Those with no FIR op of their own are written as",
        "compositions of FIR tensor ops that follow the formula of ATen's CPU kernel, NaN and",
        "infinity cases included (`addcmul`, `lerp`, `xlogy`, `logaddexp`, `nan_to_num`, `sinc`,",
        "`softshrink`, `fmax`, the losses, the norms, training-mode batch norm …). Data movement",
        "becomes views, `cat` and `index_select` with index vectors built from `arange` (`flip`,",
        "`roll`, `repeat`, `tril`, `diagonal`, reflect/replicate padding, advanced indexing).",
        "Compositions that round more than once fall back for f16/bf16, which ATen computes in f32.",
        "What stays a fallback has no FIR op to express it: scans (`cumsum`), sorting (`sort`,",
        "`topk`, `median`), scatter, convolution and pooling with overlapping windows, linear",
        "algebra, FFT, complex dtypes and most special functions.",
        "",
        "## aten ops",
        "",
        "| aten op | status | OpInfos | why it falls back |",
        "| --- | --- | --- | --- |",
    ]
    for a, (status, srcs, why) in table.items():
        uniq = sorted(set(srcs))
        shown = ", ".join(uniq[:3]) + (f" (+{len(uniq) - 3})" if len(uniq) > 3 else "")
        lines.append(f"| `{a}` | {status} | {_md(shown)} | {_md(why[:120])} |")
    lines += [
        "",
        "## OpInfos",
        "",
        "| OpInfo | status | samples | detail |",
        "| --- | --- | --- | --- |",
    ]
    for o in sorted(outcomes, key=lambda o: o.name):
        lines.append(f"| `{o.name}` | {o.status} | {o.samples} | {_md(o.detail)} |")
    path.write_text("\n".join(lines) + "\n")


def run_suite(ops: list[Any], progress: bool = False) -> list[Outcome]:
    import logging

    import fir.frontend.dynamo  # noqa: F401  (the fir backend and COMPILED)
    import torch._dynamo

    config = torch._dynamo.config
    saved = (config.cache_size_limit, config.suppress_errors)
    config.cache_size_limit = 64
    config.suppress_errors = False  # an exception in the backend must reach the test
    # Dynamo logs a warning with a stack for every graph break; the table says it in one line
    loggers = [logging.getLogger(n) for n in ("torch._dynamo", "torch._subclasses.fake_tensor")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    outcomes = []
    try:
        for op in ops:
            o = run_opinfo(op)
            outcomes.append(o)
            if progress:
                print(f"{o.seconds:6.2f}s {o.status:<8} {o.name} {o.detail}", flush=True)
    finally:
        torch._dynamo.reset()
        config.cache_size_limit, config.suppress_errors = saved
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
    return outcomes


# ---------------------------------------------------------------------------------------------
# pytest


def test_opinfo_conformance(request: Any) -> None:
    t0 = time.perf_counter()
    outcomes = run_suite(select_ops(_load_op_db()))
    seconds = time.perf_counter() - t0
    line = summary_line(outcomes) + f"  ({seconds:.0f} s)"
    print(format_table(outcomes) + "\n" + line)
    # the table is in the captured output (-s, or a failure, shows it); the line always shows
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            sys.stdout.write("\n" + line + "\n")
    failed = [o for o in outcomes if o.status == "failed" and o.name not in EXPECTED_FAILURES]
    assert not failed, "OpInfos that fail under FIR:\n" + "\n".join(
        f"  {o.name}: {o.detail}" for o in failed
    )


# Argument combinations the OpInfo samples leave out, for the converters written as compositions
# (non-adjacent advanced indices, dims other than the last two, strided scatters, ...). Each must
# run through FIR without an extern call and match eager.
def _extra_cases() -> dict[str, Any]:
    i1, i2, i3 = torch.tensor([[0, -1], [2, 1]]), torch.tensor([1, -2]), torch.tensor([[4], [0]])
    F = torch.nn.functional
    return {
        "index_non_adjacent": lambda x: x[i1, :, i2],
        "index_adjacent_middle": lambda x: x[:, i2, i3],
        "index_last": lambda x: x[..., i2],
        "index_three": lambda x: x[i1, i2, i3],
        "diag_embed_dims": lambda x: torch.diag_embed(x, offset=-2, dim1=0, dim2=3),
        "diag_embed_swapped": lambda x: torch.diag_embed(x, offset=1, dim1=-1, dim2=1),
        "diagonal_of_view": lambda x: torch.diagonal(x.transpose(0, 2) * 2, 2, 0, 1),
        "diagonal_negative": lambda x: torch.diagonal(x, offset=-1, dim1=3, dim2=1),
        "slice_scatter_step": lambda x: torch.slice_scatter(
            x, torch.ones(3, 4, 2, 6), 2, -4, None, 2
        ),
        "select_scatter": lambda x: torch.select_scatter(x, torch.zeros(3, 5, 6), 1, -1),
        "roll_two_dims": lambda x: torch.roll(x, shifts=(1, -7), dims=(0, 3)),
        "roll_flat": lambda x: torch.roll(x, 5),
        "repeat_new_dims": lambda x: x[0].repeat(2, 1, 3, 2),
        "tril_triu_batched": lambda x: torch.tril(x, -1) + torch.triu(x, 2),
        "flip_two_dims": lambda x: torch.flip(x, (0, -1)),
        "rot90_k3": lambda x: torch.rot90(x, 3, (1, 3)),
        "unfold_of_view": lambda x: (x * 1).transpose(1, 2).unfold(2, 2, 1),
        "pixel_shuffle_roundtrip": lambda x: F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2),
        "take_negative": lambda x: torch.take(x, torch.tensor([[0, -1, 5]])),
        "lerp_tensor_weight": lambda x: torch.lerp(x, x * 2, x[0, 0, 0].sigmoid() * 2 - 0.5),
        "addr_beta_alpha": lambda x: torch.addr(
            x[0, 0], x[0, 0, :, 0], x[0, 0, 0], beta=0.5, alpha=2
        ),
        "addmv_beta0": lambda x: torch.addmv(
            x[0, 0, :, 0] * float("nan"), x[0, 0], x[0, 0, 0], beta=0
        ),
        "cross_broadcast": lambda x: torch.linalg.cross(x[:, :3, 0, :1], x[:1, 1:4, 0, :1], dim=1),
        "reflect_pad_2d": lambda x: F.pad(x, (2, 3, 1, 2), mode="reflect"),
        "replicate_pad_3d": lambda x: F.pad(x, (2, 3, 1, 2, 4, 0), mode="replicate"),
        "nan_to_num_args": lambda x: torch.nan_to_num(torch.log(x), nan=1.5, neginf=-3.0),
        "logaddexp_inf": lambda x: torch.logaddexp(x.exp().log(), torch.full_like(x, float("inf"))),
        "fmax_nan": lambda x: torch.fmax(torch.log(x), x),
        "xlogy_zero_nan": lambda x: torch.xlogy(torch.relu(x), torch.log(x)),
        "clamp_tensor_bounds": lambda x: torch.clamp(x, x[0], x[1]),
        "avg_pool_tiles": lambda x: F.avg_pool2d(x[:, :, :4], 2),
        "adaptive_avg_pool_tiles": lambda x: F.adaptive_avg_pool2d(x, (5, 3)),
        "batch_norm_train": lambda x: F.batch_norm(x, torch.zeros(4), torch.ones(4), training=True),
        "bce_logits_pos_weight": lambda x: F.binary_cross_entropy_with_logits(
            x, x.sigmoid(), pos_weight=x[0, 0, 0].sigmoid() + 0.5
        ),
    }


@pytest.mark.parametrize("case", sorted(_extra_cases()))
def test_composite_converter(case: str) -> None:
    import torch._dynamo
    from fir.frontend.dynamo import COMPILED

    fn = _extra_cases()[case]
    torch.manual_seed(0)
    x = torch.randn(3, 4, 5, 6)
    torch._dynamo.reset()
    start = len(COMPILED)
    actual = torch.compile(fn, backend="fir", dynamic=False)(x.clone())
    graphs = COMPILED[start:]
    expected = fn(x.clone())
    torch.testing.assert_close(actual, expected, equal_nan=True)
    assert graphs, "Dynamo produced no graph"
    fallbacks = {k: v for g in graphs for k, v in g.report.reasons.items()}
    assert not fallbacks, f"ran as extern calls: {fallbacks}"


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Run FIR's OpInfo conformance suite.")
    parser.add_argument(
        "--ops",
        default=None,
        help="'all', or comma-separated OpInfo names (default: the CI selection)",
    )
    parser.add_argument(
        "--write-docs", nargs="?", const="docs/opinfo.md", default=None, metavar="PATH"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-OpInfo progress lines")
    parser.add_argument("--device", default=None, help="where samples live (cpu, cuda)")
    opts = parser.parse_args(argv)
    global DEVICE
    if opts.device:  # (FIR_OPINFO_SAMPLES sets the samples per OpInfo)
        DEVICE = opts.device
    db = _load_op_db()
    ops = select_ops(db, opts.ops)
    t0 = time.perf_counter()
    outcomes = []
    ci_seconds = 0.0
    selected = {id(op) for op in select_ops(db, "")}
    for op in ops:  # one at a time, to time the CI selection inside a whole-database run
        t1 = time.perf_counter()
        outcomes += run_suite([op], progress=not opts.quiet)
        if id(op) in selected:
            ci_seconds += time.perf_counter() - t1
    seconds = time.perf_counter() - t0
    print(format_table(outcomes))
    print(summary_line(outcomes) + f"  ({seconds:.0f} s)")
    if opts.write_docs:
        write_docs(outcomes, Path(opts.write_docs), seconds, ci_seconds)
    return (
        1 if any(o.status == "failed" and o.name not in EXPECTED_FAILURES for o in outcomes) else 0
    )


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception:
        traceback.print_exc()
        sys.exit(2)
