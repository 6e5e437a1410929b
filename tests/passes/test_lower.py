"""``lower``: every tensor-level op becomes a loop-level node and the program computes the same.

Each program is run by the reference interpreter before and after the pass on random inputs
(exact for integers and bools, close for floats); the lowered program must verify, print and
parse back to the same text, and hold no tensor-level op. Programs: the golden lit inputs of
tests/lit/lower, the examples (alone and after ``decompose``), one program per op with an ATen
fallback, and random chains of views.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import sympy  # noqa: E402
from fir.ir.graph import AliasNode, ExternNode, Graph, LoopNode, Module, TensorOp  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.ops import OPS  # noqa: E402
from fir.ir.parser import parse_file, parse_module  # noqa: E402
from fir.ir.printer import print_module  # noqa: E402
from fir.ir.verifier import verify_module  # noqa: E402
from fir.passes.lowering import view_indexing as views  # noqa: E402
from fir.passes.lowering.library_calls import EXTERNS  # noqa: E402
from fir.passes.lowering.lower import LowerPass  # noqa: E402
from fir.passes.lowering.lowerings import LOWERINGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIT = sorted((ROOT / "tests" / "lit" / "lower").glob("*.fir"))
EXAMPLES = sorted((ROOT / "examples").glob("*.fir")) + sorted(
    (ROOT / "examples" / "imported").glob("*.fir")
)


def random_inputs(g: Graph, sizes: dict[str, int], seed: int = 0) -> list[torch.Tensor]:
    """Inputs for ``g``: normal floats, integers in [0, 3) (valid indices for every table the
    tests index), random bools; size symbols take ``sizes``."""
    gen = torch.Generator().manual_seed(seed)
    env = {sympy.Symbol(k, integer=True, positive=True): v for k, v in sizes.items()}
    out = []
    for a in g.args:
        shape = [d if isinstance(d, int) else int(d.subs(env)) for d in a.type.shape]
        dt = a.type.dtype.to_torch()
        if dt.is_floating_point:
            x = torch.randn(shape, generator=gen).to(dt)
        elif dt == torch.bool:
            x = torch.rand(shape, generator=gen) > 0.5
        else:
            x = torch.randint(0, 3, shape, generator=gen).to(dt)
        out.append(x)
    return out


LAST_STATISTICS: dict[str, int] = {}


def assert_same(got: list[torch.Tensor], want: list[torch.Tensor], where: str) -> None:
    assert len(got) == len(want), where
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: result #{k}"
        if a.dtype.is_floating_point:
            # an extern call (matmul) may sum in another order when its operand was a view
            # and is now a contiguous copy: allow rounding relative to the result's scale
            finite = b[b.isfinite()].abs()
            scale = max(1.0, float(finite.max())) if finite.numel() else 1.0
            tol = {"rtol": 1.3e-6, "atol": 1e-5 * scale}
            if a.dtype in (torch.float16, torch.bfloat16):
                tol = {"rtol": 1e-2, "atol": 1e-3 * scale}
            torch.testing.assert_close(
                a, b, equal_nan=True, **tol, msg=lambda m, k=k: f"{where} #{k}: {m}"
            )
        else:
            assert torch.equal(a, b), f"{where}: result #{k} differs"


def lower_and_compare(
    module: Module, sizes: dict[str, int] | None = None, **options: object
) -> Module:
    """Lower ``module`` and check it against the interpreter run of the original; the pass's
    statistics are left in ``LAST_STATISTICS``."""
    sizes = sizes or {"s0": 3, "s1": 5}
    verify_module(module)
    before = {}
    for g in module.funcs:
        inputs = random_inputs(g, sizes)
        before[g.name] = (inputs, run_graph(g, inputs))
    p = LowerPass(**options)
    p.apply(module)
    LAST_STATISTICS.clear()
    LAST_STATISTICS.update(p.statistics)
    verify_module(module)
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text, "the lowered program does not round-trip"
    for g in again.funcs:
        left = [n for n in g.nodes if isinstance(n, TensorOp)]
        assert not left, f"@{g.name}: tensor ops left: {[n.op for n in left]}"
        inputs, want = before[g.name]
        assert_same(run_graph(g, inputs), want, f"@{g.name}")
    return again


@pytest.mark.parametrize("path", LIT, ids=lambda p: p.stem)
def test_lit_programs(path: Path) -> None:
    lower_and_compare(parse_file(str(path)))


@pytest.mark.parametrize("path", LIT, ids=lambda p: p.stem)
def test_lit_programs_keep_views(path: Path) -> None:
    """With keep-views every view is a copy node (and symbolic sizes of 1 change nothing)."""
    lower_and_compare(parse_file(str(path)), {"s0": 1, "s1": 2}, **{"keep-views": True})
    assert LAST_STATISTICS["copies"] == LAST_STATISTICS["views-folded"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_examples(path: Path) -> None:
    lower_and_compare(parse_file(str(path)))


def _decompose(module: Module) -> Module:
    from fir.passes.lowering.decompose import DecomposePass

    return DecomposePass().apply(module)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_examples_after_decompose(path: Path) -> None:
    module = parse_file(str(path))
    verify_module(module)
    g = module.funcs[0]
    inputs = random_inputs(g, {})
    want = run_graph(g, inputs)
    module = _decompose(module)
    lowered = lower_and_compare(module)  # exact against the decomposed program
    # against the original, within what decomposing may change (sums in another order)
    for a, b in zip(run_graph(lowered.funcs[0], inputs), want):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# Corner cases: empty tensors, size-1 and 0-d shapes, views of 0-d tensors, bool reductions,
# chains of general (floordiv/mod) views

CORNERS = [
    """
func @ones(%x: f32[1, 1], %y: f32[1, 4], %z: f32[]) -> (f32[1, 1], f32[1, 4], f32[], f32[1]) {
  %a = exp %x : f32[1, 1]
  %b = add %y, %x : f32[1, 4]
  %c = exp %z : f32[]
  %d = sum %y {dims = [1]} : f32[1]
  return %a, %b, %c, %d
}
""",
    """
func @welford(%x: f32[4, 8], %h: f16[4, 8]) -> (f32[4], f32[4], f32[4], f16[4, 1], f16[4, 1], f16[4, 1]) {
  %m, %m2, %n = welford %x {dims = [1]} : f32[4], f32[4], f32[4]
  %hm, %hm2, %hn = welford %h {dims = [1], keepdim = true} : f16[4, 1], f16[4, 1], f16[4, 1]
  return %m, %m2, %n, %hm, %hm2, %hn
}
""",
    """
func @zero(%x: f32[4, 0], %y: f32[3]) -> (f32[4], f32[4, 0], f32[4], f32[4], f32[0, 3], f32[4], f32[4], f32[4]) {
  %s = sum %x {dims = [1]} : f32[4]
  %e = exp %x : f32[4, 0]
  %p = prod %x {dims = [1]} : f32[4]
  %m = mean %x {dims = [1]} : f32[4]
  %t = slice %y {dim = 0, start = 0, end = 0} : f32[0]
  %u = unsqueeze %t {dim = 0} : f32[1, 0]
  %ex = expand %y : f32[0, 3]
  %wm, %wm2, %wn = welford %x {dims = [1]} : f32[4], f32[4], f32[4]
  return %s, %e, %p, %m, %ex, %wm, %wm2, %wn
}
""",
    """
func @zero_view_out(%y: f32[3]) -> (f32[0], f32[3]) {
  %t = slice %y {dim = 0, start = 1, end = 1} : f32[0]
  %c = cat %y, %t {dim = 0} : f32[3]
  return %t, %c
}
""",
    """
func @zerod(%x: f32[], %y: f32[3]) -> (f32[1, 1], f32[3, 4], f32[], f32[2, 3], f32[]) {
  %a = reshape %x : f32[1, 1]
  %b = expand %x : f32[3, 4]
  %c = select %y {dim = 0, index = 1} : f32[]
  %d = unsqueeze %c {dim = 0} : f32[1]
  %e = expand %d : f32[2, 3]
  %f = reshape %a : f32[]
  %g = add %b, %c : f32[3, 4]
  return %a, %b, %c, %e, %f
}
""",
    """
func @bool_ops(%m: bool[4, 4], %x: f32[4, 4]) -> (bool[4], bool[4], bool[4, 4], f32[4, 8]) {
  %a = max %m {dims = [1]} : bool[4]
  %b = min %m {dims = [0]} : bool[4]
  %t = transpose %m {dim0 = 0, dim1 = 1} : bool[4, 4]
  %c = logical_xor %t, %m : bool[4, 4]
  %p = pad %x {pad = [2, 2], value = nan} : f32[4, 8]
  return %a, %b, %c, %p
}
""",
    """
func @chain_general(%x: f32[4, 6]) -> (f32[24], f32[2, 12], f32[12]) {
  %t = transpose %x {dim0 = 0, dim1 = 1} : f32[6, 4]
  %f = reshape %t : f32[24]
  %g = reshape %f : f32[2, 12]
  %s = slice %g {dim = 1, start = 1, step = 3} : f32[2, 4]
  %p = permute %s {dims = [1, 0]} : f32[4, 2]
  %q = reshape %p : f32[8]
  %e = exp %q : f32[8]
  %h = select %g {dim = 0, index = 1} : f32[12]
  return %f, %g, %h
}
""",
]


@pytest.mark.parametrize("text", CORNERS, ids=lambda t: t.split("(")[0].split("@")[1])
def test_corner_cases(text: str) -> None:
    lower_and_compare(parse_module(text))


# ---------------------------------------------------------------------------------------------
# Symbolic sizes


SYMBOLIC = """
func @f(%x: f32[s0, 8], %y: f32[8], %i: i64[s1]) -> (f32[8, s0], f32[8*s0], f32[s0], f32[s0, 8], f32[s0, s1], f32[s0 + s0, 8], f32[s0, 4]) {
  %t = transpose %x {dim0 = 0, dim1 = 1} : f32[8, s0]
  %a = exp %t : f32[8, s0]
  %f = reshape %t : f32[8*s0]
  %m = mean %x {dims = [1]} : f32[s0]
  %c = add %x, %y : f32[s0, 8]
  %g = index_select %x, %i {dim = 1} : f32[s0, s1]
  %k = cat %x, %c {dim = 0} : f32[s0 + s0, 8]
  %s = slice %x {dim = 1, start = 1, step = 2} : f32[s0, 4]
  return %a, %f, %m, %c, %g, %k, %s
}
"""


@pytest.mark.parametrize("s0", [1, 3, 4])
def test_symbolic_sizes(s0: int) -> None:
    lower_and_compare(parse_module(SYMBOLIC), {"s0": s0, "s1": 2})


def test_size_symbols_named_like_loop_variables() -> None:
    """A size symbol called i0 or r1 makes lower name its loop variables i_0, r_0."""
    text = """
func @f(%x: f32[i0, r1]) -> (f32[i0], f32[r1, i0]) {
  %y = sum %x {dims = [1]} : f32[i0]
  %t = transpose %x {dim0 = 0, dim1 = 1} : f32[r1, i0]
  return %y, %t
}
"""
    lowered = lower_and_compare(parse_module(text), {"i0": 3, "r1": 2})
    node = lowered.funcs[0].nodes[0]
    assert isinstance(node, LoopNode)
    assert [v.name for v, _ in node.ranges + node.reduction_ranges] == ["i_0", "r_0"]


# ---------------------------------------------------------------------------------------------
# Library fallbacks: every op has a lowering or an ATen call, and each call computes the op


def test_every_op_has_a_lowering_or_an_extern() -> None:
    missing = sorted(n for n in OPS if n not in LOWERINGS and n not in EXTERNS)
    assert not missing


EXTERN_PROGRAMS = {
    "matmul": "%y = matmul %x, %w : f32[4, 8]",
    "addmm": "%y = addmm %b, %x, %w {beta = 0.5, alpha = 2.0} : f32[4, 8]",
    "linear": "%y = linear %x, %wt, %b : f32[4, 8]",
    "softmax": "%y = softmax %x {dim = 0} : f32[4, 8]",
    "log_softmax": "%y = log_softmax %x {dim = 1} : f32[4, 8]",
    "logsumexp": "%y = logsumexp %x {dims = [1], keepdim = true} : f32[4, 1]",
    "logsumexp_all": "%y = logsumexp %x : f32[]",
    "var": "%y = var %x {dims = [1]} : f32[4]",
    "std": "%y = std %x {correction = 0} : f32[]",
    "var_mean": "%y, %z = var_mean %x {dims = [0], keepdim = true} : f32[1, 8], f32[1, 8]",
    "layer_norm": "%y = layer_norm %x, %g, %g {normalized_shape = [8], eps = 0.001} : f32[4, 8]",
    "rms_norm": "%y = rms_norm %x, none {normalized_shape = [8]} : f32[4, 8]",
    "batch_norm": "%y = batch_norm %x, %c, %c, %c, %v {eps = 0.01} : f32[4, 8]",
    "group_norm": "%y = group_norm %x, %c, none {num_groups = 2} : f32[4, 8]",
    "gelu": "%y = gelu %x : f32[4, 8]",
    "gelu_tanh": '%y = gelu %x {approximate = "tanh"} : f32[4, 8]',
    "silu": "%y = silu %x : f32[4, 8]",
    "mish": "%y = mish %x : f32[4, 8]",
    "softplus": "%y = softplus %x {beta = 2.0, threshold = 1.0} : f32[4, 8]",
    "hardswish": "%y = hardswish %x : f32[4, 8]",
    "hardsigmoid": "%y = hardsigmoid %x : f32[4, 8]",
    "leaky_relu": "%y = leaky_relu %x {negative_slope = 0.2} : f32[4, 8]",
    "elu": "%y = elu %x {alpha = 0.5} : f32[4, 8]",
    "hardtanh": "%y = hardtanh %x {min_val = -0.5, max_val = 0.25} : f32[4, 8]",
    "dropout": "%y = dropout %x {p = 0.3} : f32[4, 8]",
    "cross_entropy": '%y = cross_entropy %x, %t, %g {reduction = "sum", label_smoothing = 0.1} : f32[]',
    "cross_entropy_none": '%y = cross_entropy %x, %t {reduction = "none", ignore_index = 1} : f32[4]',
    "nll_loss": "%y = nll_loss %x, %t {ignore_index = 2} : f32[]",
}


@pytest.mark.parametrize("name", sorted(EXTERN_PROGRAMS))
def test_extern_fallbacks(name: str) -> None:
    stmt = EXTERN_PROGRAMS[name]
    results = stmt.split(" = ")[0]
    types = stmt.rsplit(" : ", 1)[1]
    text = (
        "func @f(%x: f32[4, 8], %w: f32[8, 8], %wt: f32[8, 8], %b: f32[8], %g: f32[8], "
        "%c: f32[8], %v: f32[8], %t: i64[4]) -> (" + types + ") {\n  " + stmt + "\n"
        "  return " + results + "\n}\n"
    )
    module = parse_module(text)
    if name == "batch_norm":  # running variance must be positive
        g = module.funcs[0]
        inputs = random_inputs(g, {})
        inputs[6] = inputs[6].abs() + 0.5
        want = run_graph(g, inputs)
        LowerPass().apply(module)
        verify_module(module)
        assert_same(run_graph(module.funcs[0], inputs), want, name)
        return
    lowered = lower_and_compare(module)
    node = lowered.funcs[0].nodes[-1]
    if name == "dropout":  # eval mode: the identity, returned as a view of its operand
        assert isinstance(node, AliasNode) and node.base is lowered.funcs[0].args[0]
    else:
        assert isinstance(node, ExternNode) and node.callee.startswith("aten.")


def test_unknown_op_becomes_a_named_extern() -> None:
    from fir.passes.lowering.library_calls import extern_call

    n = parse_module(
        "func @f(%x: f32[4]) -> (f32[4]) {\n  %y = gelu %x : f32[4]\n  return %y\n}\n"
    ).funcs[0]
    node = n.nodes[0]
    assert isinstance(node, TensorOp)
    node.op = "mystery"  # an op added to the table without a lowering or an ATen entry
    callee, args, kwargs = extern_call(node)
    assert callee == "fir.mystery" and args == [n.args[0]] and kwargs == {}


# ---------------------------------------------------------------------------------------------
# Random chains of views against the interpreter


def _view_chain(rng: random.Random, length: int) -> str:
    shape = [rng.choice([2, 3, 4]) for _ in range(rng.randint(1, 3))]
    args = f"%x: f32[{', '.join(map(str, shape))}]"
    lines: list[str] = []
    cur = "%x"
    for k in range(length):
        op, attrs, new = _random_view(rng, shape)
        name = f"%v{k}"
        ty = f"f32[{', '.join(map(str, new))}]"
        lines.append(f"  {name} = {op} {cur}{attrs} : {ty}")
        cur, shape = name, new
    ty = f"f32[{', '.join(map(str, shape))}]"
    lines.append(f"  %y = mul {cur}, 2.0 : {ty}")
    return (
        f"func @f({args}) -> ({ty}, {ty}) {{\n" + "\n".join(lines) + f"\n  return %y, {cur}\n}}\n"
    )


def _random_view(rng: random.Random, shape: list[int]) -> tuple[str, str, list[int]]:
    rank = len(shape)
    # reshapes after permutes and slices are where floordiv/mod appear: weigh them up
    kinds = ["reshape"] * 3 + ["permute", "transpose", "unsqueeze", "expand", "as_strided"]
    if rank:
        kinds += ["slice", "select"] if rank > 1 else ["slice"]
    if 1 in shape:
        kinds.append("squeeze")
    kind = rng.choice(kinds)
    if kind == "reshape":
        numel = 1
        for d in shape:
            numel *= d
        new: list[int] = []
        rest = numel
        for f in (2, 3, 2, 4, 3):
            if rest % f == 0 and rng.random() < 0.6:
                new.append(f)
                rest //= f
        new.append(rest)
        rng.shuffle(new)
        return "reshape", "", new
    if kind == "permute":
        dims = list(range(rank))
        rng.shuffle(dims)
        return "permute", f" {{dims = {dims}}}", [shape[d] for d in dims]
    if kind == "transpose" and rank >= 2:
        a, b = rng.sample(range(rank), 2)
        new = list(shape)
        new[a], new[b] = new[b], new[a]
        return "transpose", f" {{dim0 = {a}, dim1 = {b - rank}}}", new
    if kind == "slice":
        d = rng.randrange(rank)
        start = rng.randrange(shape[d])
        step = rng.choice([1, 2, 3])
        n = len(range(start, shape[d], step))
        new = list(shape)
        new[d] = n
        return "slice", f" {{dim = {d}, start = {start}, step = {step}}}", new
    if kind == "select":
        d = rng.randrange(rank)
        index = rng.randrange(-shape[d], shape[d])
        return "select", f" {{dim = {d}, index = {index}}}", shape[:d] + shape[d + 1 :]
    if kind == "squeeze":
        return "squeeze", "", [d for d in shape if d != 1]
    if kind == "expand":
        new = [rng.choice([2, 3]) if d == 1 else d for d in shape]
        if rng.random() < 0.5:
            new = [2] + new
        return "expand", "", new
    if kind == "as_strided":
        numel = 1
        for d in shape:
            numel *= d
        new = [rng.randint(1, 2) for _ in range(rng.randint(1, 2))]
        strides = [rng.randint(0, 2) for _ in new]
        span = sum((n - 1) * s for n, s in zip(new, strides))
        offset = rng.randint(0, max(0, numel - 1 - span))
        if span + offset >= numel:
            return "unsqueeze", " {dim = 0}", [1] + shape
        return "as_strided", f" {{strides = {strides}, offset = {offset}}}", new
    d = rng.randint(0, rank)
    return "unsqueeze", f" {{dim = {d}}}", shape[:d] + [1] + shape[d:]


@pytest.mark.parametrize("seed", range(60))
def test_random_view_chains(seed: int) -> None:
    rng = random.Random(seed)
    text = _view_chain(rng, rng.randint(1, 5))
    try:
        lower_and_compare(parse_module(text))
    except AssertionError as e:
        raise AssertionError(f"{e}\n{text}") from None


def _reshape_of_strided_view(rng: random.Random) -> str:
    """x → a strided view (permute, stepped slice or expand) → reshape → permute → reshape:
    merges across strides that do not line up, where the index needs floordiv/mod."""
    first = [rng.choice([2, 3, 4, 6]) for _ in range(rng.randint(2, 4))]
    shape = first
    lines: list[str] = []
    cur = "%x"
    for k, kind in enumerate(["permute", "slice", "expand", "reshape", "permute", "reshape"]):
        if kind == "slice":
            d = rng.randrange(len(shape))
            new = list(shape)
            new[d] = len(range(0, shape[d], 2))
            op, attrs = "slice", f" {{dim = {d}, start = 0, step = 2}}"
        elif kind == "expand":
            op, attrs, new = "expand", "", [2] + shape if rng.random() < 0.5 else shape
        else:
            while True:  # a random view of this kind
                op, attrs, new = _random_view(rng, shape)
                if op == kind:
                    break
        lines.append(f"  %v{k} = {op} {cur}{attrs} : f32[{', '.join(map(str, new))}]")
        cur, shape = f"%v{k}", new
    ty = f"f32[{', '.join(map(str, shape))}]"
    head = f"func @f(%x: f32[{', '.join(map(str, first))}]) -> ({ty}) {{\n"
    return head + "\n".join(lines) + f"\n  %y = neg {cur} : {ty}\n  return %y\n}}\n"


@pytest.mark.parametrize("seed", range(40))
def test_random_reshapes_of_strided_views(seed: int) -> None:
    text = _reshape_of_strided_view(random.Random(seed))
    try:
        lower_and_compare(parse_module(text))
    except AssertionError as e:
        raise AssertionError(f"{e}\n{text}") from None


# ---------------------------------------------------------------------------------------------
# The view algebra


@pytest.mark.parametrize(
    "old, strides, new, want",
    [
        ((8, 16), (16, 1), (128,), (1,)),
        ((8, 16), (16, 1), (2, 4, 16), (64, 16, 1)),
        ((16, 8), (1, 16), (128,), None),  # merge across a transpose
        ((16, 8), (1, 16), (4, 4, 8), (4, 1, 16)),  # a split always views
        ((4, 1, 8), (8, 100, 1), (32,), (1,)),  # size-1 dimensions do not matter
        ((4, 8), (0, 1), (2, 2, 8), (0, 0, 1)),  # an expanded dimension splits with stride 0
        ((6,), (1,), (1, 6, 1), (1, 1, 1)),  # a size-1 dimension takes any stride
    ],
)
def test_view_strides(old: tuple, strides: tuple, new: tuple, want: tuple | None) -> None:
    assert views.view_strides(old, strides, new) == want


def test_view_strides_symbolic() -> None:
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    assert views.view_strides((s0, 8), (8, 1), (8 * s0,)) == (1,)
    assert views.view_strides((s0, 8), (8, 1), (s0, 2, 4)) == (8, 4, 1)
    assert views.view_strides((8, s0), (1, 8), (8 * s0,)) is None


def test_lowering_imports_no_torch() -> None:
    """fir-opt lowers text without importing torch (it takes seconds to import)."""
    code = (
        "import sys\n"
        "from fir.ir.parser import parse_file\n"
        "from fir.passes.lowering.lower import LowerPass\n"
        f"for p in {[str(p) for p in LIT]!r}:\n"
        "    LowerPass().apply(parse_file(p))\n"
        "assert 'torch' not in sys.modules, 'lower imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_names_and_statistics() -> None:
    text = """
func @f(%x: f32[4, 8], %w: f32[8, 8]) -> (f32[8, 4], f32[4]) {
  %t = transpose %x {dim0 = 0, dim1 = 1} : f32[8, 4]
  %m = mean %x {dims = [1]} : f32[4]
  %p = matmul %x, %w : f32[4, 8]
  return %t, %m
}
"""
    module = parse_module(text)
    p = LowerPass()
    p.apply(module)
    names = [r.name for n in module.funcs[0].nodes for r in n.results]
    assert names == ["m.sum", "m", "p", "t"]
    # the returned transpose is an alias of %x's storage, not a copy
    assert p.statistics == {
        "loop-nodes": 2,
        "views-folded": 1,
        "externs": 1,
        "aliases": 1,
        "copies": 0,
    }


def test_docs_show_real_output() -> None:
    """Each ```fir block of docs/passes/lower.md followed by a ```text block is an input and
    what `fir-opt -p lower` prints for it; every ATen fallback is in the table."""
    import re

    doc = (ROOT / "docs" / "passes" / "lower.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", doc, re.S)
    pairs = [
        (src, out)
        for (kind, src), (next_kind, out) in zip(blocks, blocks[1:])
        if kind == "fir" and next_kind == "text"
    ]
    assert len(pairs) >= 6
    for src, out in pairs:
        module = parse_module(src)
        LowerPass().apply(module)
        assert print_module(module) == out, f"docs/passes/lower.md is stale for:\n{src}"
    for op in EXTERNS:
        assert f"| `{op}` |" in doc, f"{op} is missing from the extern table of the docs"


def test_lowering_twice_changes_nothing() -> None:
    module = parse_file(str(ROOT / "tests" / "lit" / "lower" / "externs.fir"))
    LowerPass().apply(module)
    once = print_module(module)
    LowerPass().apply(module)
    assert print_module(module) == once
