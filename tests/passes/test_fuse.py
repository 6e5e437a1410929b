"""The ``fuse`` pass: semantics, the rules, the switches, user control and the reports.

Semantics are checked with the reference interpreter running every kernel *tiled*, as a fused
kernel would run (``run_graph(..., kernels="tiled")``): a kernel whose nodes read what another of
its nodes computes for other output elements raises there, so the oracle catches an illegal
fusion, not only a wrong value. The golden tests under tests/lit/fuse pin what the pass prints.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest
import strategies as S
import torch
from fir.ir.errors import FirError, InterpreterError
from fir.ir.graph import ExternNode, Kernel, LoopNode, Module
from fir.ir.interpreter import run_graph
from fir.ir.kernels import (
    Space,
    SpaceInfo,
    join_spaces,
    kernel_count,
    loops_split,
    node_space_info,
)
from fir.ir.memory_plan import plan_problems
from fir.ir.parser import parse_file, parse_module
from fir.ir.printer import print_module
from fir.ir.verifier import verify_module
from fir.passes.fusion.fuse import fuse_function
from fir.passes.fusion.fusion_graph import FusionGraph
from fir.passes.fusion.report import module_dot, reports_json
from fir.passes.pipeline import parse_pipeline
from fir.passes.verify import check_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensor_programs import random_program
from test_plan_memory import random_inputs, random_loop_program, run_in_planned_storage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.fir"), recursive=True))


def run(text_or_module: str | Module, pipeline: str) -> Module:
    m = parse_module(text_or_module) if isinstance(text_or_module, str) else text_or_module
    verify_module(m)
    m = parse_pipeline(pipeline).run(m)
    verify_module(m)
    return m


def round_trip(m: Module) -> Module:
    """Print, parse, verify, check the kernels' legality; the text parsed back prints the
    same again. (Printing once first: a module built in Python, as the property generators
    build them, may hold index expressions that parsing simplifies.)"""
    parsed = parse_module(print_module(m))
    text = print_module(parsed)
    again = parse_module(text)
    verify_module(again)
    assert print_module(again) == text, "the fused program does not print back the same"
    check_kernels(again)
    return again


def assert_same(actual: list[torch.Tensor], expected: list[torch.Tensor], where: str) -> None:
    assert len(actual) == len(expected), where
    for k, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(
            a, e, rtol=1e-4, atol=1e-5, equal_nan=True, msg=lambda m, k=k: f"{where} #{k}: {m}"
        )


# ---------------------------------------------------------------------------------------------
# Semantics: the interpreter gives the same results before and after fuse


def example_inputs(m: Module) -> list[torch.Tensor]:
    g = m.funcs[0]
    gen = torch.Generator().manual_seed(0)
    sizes = [d for a in g.args for d in a.type.shape if isinstance(d, int) and d > 1]
    high = min(sizes) if sizes else 2
    out = []
    for a in g.args:
        shape = [d if isinstance(d, int) else 6 for d in a.type.shape]
        dt = a.type.dtype
        if dt.is_float:
            out.append(torch.randn(shape, generator=gen).to(dt.to_torch()))
        elif dt.is_bool:
            out.append(torch.randint(0, 2, shape, generator=gen).bool())
        else:
            out.append(torch.randint(0, high, shape, generator=gen).to(dt.to_torch()))
    return out


@pytest.mark.parametrize("inline", ["inline", "inline{disable}"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_examples_keep_their_results(path: str, inline: str) -> None:
    original = parse_file(path)
    inputs = example_inputs(original)
    expected = run_graph(original.funcs[0], inputs)
    lowered = run(parse_file(path), f"decompose,lower,{inline},deps,dce")
    fused = round_trip(run(lowered, "fuse"))
    assert_same(run_graph(fused.funcs[0], inputs, kernels="tiled"), expected, f"{path} fused")
    planned = round_trip(run(fused, "plan-memory"))
    for g in planned.funcs:
        assert plan_problems(g) == []
    assert_same(run_in_planned_storage(planned.funcs[0], inputs), expected, f"{path} planned")
    # fusion only makes fewer kernels
    assert kernel_count(fused.funcs[0]) <= kernel_count(lowered.funcs[0])


SETTINGS = settings(
    max_examples=S.examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(st.data())
def test_random_tensor_programs_match_eager(data: st.DataObject) -> None:
    """Random tensor programs (views, broadcasts, reductions, cat, pad, gather, composites) with
    their eager PyTorch results, lowered one op per node so that fuse has the most to do."""
    p = random_program(S.HypothesisChooser(data.draw), num_ops=data.draw(st.integers(1, 10)))
    inline = data.draw(st.sampled_from(["inline", "inline{disable}"]))
    options = data.draw(
        st.sampled_from(
            ["", "{aggressive}", "{horizontal=false}", "{max-size=3}", "{small-kernels=4096}"]
        )
    )
    m = round_trip(run(p.text, f"decompose,lower,{inline},deps,dce,fuse{options},plan-memory"))
    assert_same(run_graph(m.funcs[0], p.inputs, kernels="tiled"), p.expected, p.text)
    assert plan_problems(m.funcs[0]) == []


@settings(max_examples=S.examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(
        [
            "",
            "{aggressive}",
            "{vertical-only}",
            "{max-size=2}",
            "{rounds=1}",
            "{small-kernels=4096}",
        ]
    ),
)
def test_random_loop_programs_keep_their_results(seed: int, options: str) -> None:
    """Random loop-level programs built to tempt fusion into mistakes: transposed, reversed,
    masked and indirect reads of what a neighbour writes, reductions, extern calls, strided
    results, several outputs."""
    text = random_loop_program(seed)
    original = parse_module(text)
    inputs = random_inputs(original.funcs[0], seed)
    expected = run_graph(original.funcs[0], inputs)
    fused = round_trip(run(text, f"fuse{options}"))
    assert_same(run_graph(fused.funcs[0], inputs, kernels="tiled"), expected, text)
    planned = run(fused, "plan-memory")
    assert plan_problems(planned.funcs[0]) == []
    assert_same(run_in_planned_storage(planned.funcs[0], inputs), expected, text)


def test_random_loop_programs_do_fuse() -> None:
    """The generator above is not vacuous: most programs get kernels, some with several nodes."""
    kernels = nodes_in_kernels = 0
    for seed in range(40):
        g = run(random_loop_program(seed), "fuse").funcs[0]
        kernels += len(g.kernels)
        nodes_in_kernels += sum(len(k.nodes) for k in g.kernels)
    assert kernels >= 20 and nodes_in_kernels >= 2 * kernels


@settings(max_examples=S.examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.any_modules())
def test_generated_modules_fuse_and_round_trip(m: Module) -> None:
    """Any program the property generators make (tensor level, loop level, symbolic sizes, not
    all runnable): fuse leaves it verifying, legal and printable, and a second run changes
    nothing; a function with tensor-level ops and no loop node is refused (run 'lower' first)."""
    try:
        fused = round_trip(parse_pipeline("fuse").run(m))
    except FirError as e:
        assert "works on loop-level programs" in e.message, e.message
        return
    text = print_module(fused)
    assert print_module(parse_pipeline("fuse").run(fused)) == text


# ---------------------------------------------------------------------------------------------
# The tiled interpreter is an oracle for legality


ILLEGAL = """
func @f(%x: f32[16, 16]) -> (f32[16, 16]) {
  kernel @k {
    %p = pointwise : f32[16, 16] over (i0 < 16, i1 < 16) {
      %0 = load %x[16*i0 + i1]
      %1 = exp %0
      yield %1
    }
    %t = pointwise : f32[16, 16] over (i0 < 16, i1 < 16) {
      %0 = load %p[i0 + 16*i1]
      yield %0
    }
  }
  return %t
}
"""


def test_tiled_run_catches_an_illegal_kernel() -> None:
    m = parse_module(ILLEGAL)  # well formed: the verifier accepts it
    verify_module(m)
    x = torch.randn(16, 16)
    expected = torch.exp(x).t()
    torch.testing.assert_close(run_graph(m.funcs[0], [x])[0], expected)  # sequential: fine
    with pytest.raises(InterpreterError, match="which the kernel computes for other output"):
        run_graph(m.funcs[0], [x], kernels="tiled")
    with pytest.raises(FirError, match="memory deps did not match"):
        check_kernels(m)


def test_tiled_run_drops_local_buffers() -> None:
    m = run(
        parse_file(os.path.join(ROOT, "examples", "rms_norm.fir")),
        "decompose,lower,inline{disable},deps,dce,fuse",
    )
    g = m.funcs[0]
    assert len(g.kernels) == 1 and len(g.kernels[0].local) == 6
    inputs = example_inputs(m)
    for mode in ("sequential", "tiled"):
        run_graph(g, inputs, kernels=mode)  # runs; a local buffer read later would raise
    with pytest.raises(ValueError):
        run_graph(g, inputs, kernels="interleaved")


# ---------------------------------------------------------------------------------------------
# Iteration spaces


def info(numel: int, rnumel: int = 1, loops: tuple[int, ...] | None = None) -> SpaceInfo:
    reduction = rnumel != 1
    space = Space(numel, rnumel, reduction)
    return SpaceInfo(space, [] if reduction else [loops or (numel,)])


@pytest.mark.parametrize(
    "a, b, ok",
    [
        (info(32, 64), info(32, 64), True),  # equal reductions
        (info(32, 64), info(32, 32), False),  # reductions of different groups
        (info(2048), info(2048, loops=(32, 64)), True),  # pointwise of equal size
        (info(32), info(2048), False),  # pointwise of different sizes
        (info(32, 64), info(32), True),  # pointwise over the reduction's output
        (info(2048, loops=(32, 64)), info(32, 64), True),  # over the whole domain
        (info(2048, loops=(64, 32)), info(32, 64), True),  # 64 splits into 32 x 2
        (info(24, loops=(4, 6)), info(6, 4), False),  # 4 x 6 cannot split into 6 then 4
        (info(12), info(6, 4), False),  # neither the output nor the domain
    ],
)
def test_join_spaces(a: SpaceInfo, b: SpaceInfo, ok: bool) -> None:
    joined, why = join_spaces(a, b)
    assert (joined is not None) == ok, why
    if not ok:
        assert why
    joined_back, _ = join_spaces(b, a)
    assert (joined_back is not None) == ok  # the rule is symmetric


def test_loops_split() -> None:
    assert loops_split((32, 64), 32, 64)
    assert loops_split((2048,), 32, 64)
    assert loops_split((8, 16), 16, 8)
    assert not loops_split((4, 6), 6, 4)
    assert loops_split((), 1, 1)


def test_reduction_space_wins() -> None:
    m = parse_module(
        """
func @f(%x: f32[4, 8]) -> (f32[4]) {
  %s = reduction sum : f32[4] over (i0 < 4; r0 < 8) {
    %0 = load %x[8*i0 + r0]
    yield %0
  }
  return %s
}
"""
    )
    n = m.funcs[0].nodes[0]
    assert isinstance(n, LoopNode)
    assert str(node_space_info(n).space) == "(4; 8)"


# ---------------------------------------------------------------------------------------------
# Switches


def lowered_example(name: str, inline: str = "inline{disable}") -> Module:
    return run(
        parse_file(os.path.join(ROOT, "examples", name)), f"decompose,lower,{inline},deps,dce"
    )


@pytest.mark.parametrize("name", ["rms_norm.fir", "softmax.fir", "layer_norm.fir", "gelu_mlp.fir"])
def test_disable_gives_one_kernel_per_loop_node(name: str) -> None:
    m = run(lowered_example(name), "fuse{disable}")
    g = m.funcs[0]
    assert not g.kernels
    assert kernel_count(g) == sum(isinstance(n, LoopNode) for n in g.nodes)


def test_one_kernel_per_op_with_inline_and_fuse_disabled() -> None:
    text = """
func @f(%x: f32[8, 16], %b: f32[16]) -> (f32[8, 16]) {
  %m = max %x {dims = [1], keepdim = true} : f32[8, 1]
  %d = sub %x, %m : f32[8, 16]
  %e = exp %d : f32[8, 16]
  %h = add %e, %b : f32[8, 16]
  %s = sum %h {dims = [1], keepdim = true} : f32[8, 1]
  %y = div %h, %s : f32[8, 16]
  return %y
}
"""
    ops = sum(1 for line in text.splitlines() if " = " in line)
    m = run(text, "lower,inline{disable},deps,dce,fuse{disable}")
    assert kernel_count(m.funcs[0]) == ops == 6
    assert kernel_count(run(text, "lower,inline{disable},deps,dce,fuse").funcs[0]) == 1


def fused_pairs(g_text: str, options: str) -> list[dict]:
    m = parse_module(g_text)
    report = fuse_function(m.funcs[0], collect=True, **options_kwargs(options))
    return [c.to_json() for r in report.rounds for c in r.candidates]


def options_kwargs(options: str) -> dict:
    out: dict = {}
    for part in options.split():
        key, _, value = part.partition("=")
        out[key.replace("-", "_")] = int(value) if value.isdigit() else (value != "false")
    return out


@pytest.mark.parametrize("seed", range(12))
def test_horizontal_false_fuses_only_dependent_pairs(seed: int) -> None:
    text = random_loop_program(seed)
    for c in fused_pairs(text, "horizontal=false"):
        if c["decision"] == "fused":
            assert c["kind"] == "vertical", c


@pytest.mark.parametrize("size", [1, 2, 3])
def test_max_size_bounds_every_kernel(size: int) -> None:
    for seed in range(10):
        g = run(random_loop_program(seed), f"fuse{{max-size={size}}}").funcs[0]
        assert all(len(k.nodes) <= size for k in g.kernels)


def test_aggressive_fuses_unrelated_pointwise_nodes() -> None:
    text = """
func @f(%x: f32[64], %y: f32[64]) -> (f32[64], f32[64]) {
  %a = pointwise : f32[64] over (i0 < 64) {
    %0 = load %x[i0]
    yield %0
  }
  %b = pointwise : f32[64] over (i0 < 64) {
    %0 = load %y[i0]
    %1 = neg %0
    yield %1
  }
  return %a, %b
}
"""
    assert not run(text, "fuse").funcs[0].kernels
    assert len(run(text, "fuse{aggressive}").funcs[0].kernels) == 1


def _column_sums(n: int, rows: int, cols: int) -> str:
    """``n`` column sums of separate inputs: reductions of one space that share nothing."""
    args = ", ".join(f"%x{k}: f32[{rows}, {cols}]" for k in range(n))
    results = ", ".join(f"f32[{cols}]" for _ in range(n))
    body = "".join(
        f"  %s{k} = reduction sum : f32[{cols}] over (i0 < {cols}; r0 < {rows}) {{\n"
        f"    %0 = load %x{k}[{cols}*r0 + i0]\n    yield %0\n  }}\n"
        for k in range(n)
    )
    outs = ", ".join(f"%s{k}" for k in range(n))
    return f"func @f({args}) -> ({results}) {{\n{body}  return {outs}\n}}\n"


def test_small_kernels_joins_launch_bound_nodes_of_one_space() -> None:
    # three column sums of 8 x 768 (a split sum's finals): one kernel with small-kernels
    # (6,144 elements each), three without it or past its limit
    text = _column_sums(3, 8, 768)
    assert not run(text, "fuse").funcs[0].kernels
    (k,) = run(text, "fuse{small-kernels=6144}").funcs[0].kernels
    assert len(k.nodes) == 3
    assert not run(text, "fuse{small-kernels=6143}").funcs[0].kernels
    # differing spaces never join
    other = _column_sums(2, 8, 768).replace("f32[8, 768]) ->", "f32[16, 768]) ->", 1)
    other = other.replace(
        "(i0 < 768; r0 < 8) {\n    %0 = load %x1", "(i0 < 768; r0 < 16) {\n    %0 = load %x1"
    )
    assert not run(other, "fuse{small-kernels=65536}").funcs[0].kernels


def test_small_kernels_groups_stay_small() -> None:
    # twenty finals of one space: nearest first, at most SMALL_KERNEL_MEMBERS nodes a kernel
    from fir.passes.fusion.rules import SMALL_KERNEL_MEMBERS

    g = run(_column_sums(20, 8, 64), "fuse{small-kernels=65536}").funcs[0]
    sizes = sorted(len(k.nodes) for k in g.kernels)
    assert sizes and max(sizes) <= SMALL_KERNEL_MEMBERS and sum(sizes) == 20, sizes


def test_fuse_is_idempotent_on_examples() -> None:
    for path in EXAMPLES:
        once = run(lowered_example(os.path.relpath(path, os.path.join(ROOT, "examples"))), "fuse")
        text = print_module(once)
        assert print_module(run(once, "fuse")) == text, path


# ---------------------------------------------------------------------------------------------
# User control


HAND = """
func @f(%x: f32[64]) -> (f32[64]) {
  kernel @mine attributes {tile = 16} {
    %a = pointwise : f32[64] over (i0 < 64) {
      %0 = load %x[i0]
      %1 = exp %0
      yield %1
    }
  }
  %b = pointwise : f32[64] over (i0 < 64) {
    %0 = load %a[i0]
    %1 = neg %0
    yield %1
  }
  %c = pointwise {nofuse = true} : f32[64] over (i0 < 64) {
    %0 = load %b[i0]
    %1 = sin %0
    yield %1
  }
  return %c
}
"""


def test_hand_written_kernel_grows_keeps_name_and_attributes() -> None:
    g = run(HAND, "fuse").funcs[0]
    assert [k.name for k in g.kernels] == ["mine"]
    k = g.kernels[0]
    assert [n.results[0].name for n in k.nodes] == ["a", "b"]
    assert k.attrs == {"tile": 16}
    assert [v.name for v in k.local] == ["a"]
    c = g.nodes[-1]
    assert c.attrs["nofuse"] is True  # %c stays alone


def test_disable_keeps_hand_written_kernels() -> None:
    g = run(HAND, "fuse{disable}").funcs[0]
    assert [(k.name, len(k.nodes)) for k in g.kernels] == [("mine", 1)]


def test_illegal_hand_written_kernel_is_a_located_error() -> None:
    m = parse_module(ILLEGAL, "illegal.fir")
    with pytest.raises(FirError) as e:
        parse_pipeline("fuse").run(m)
    assert e.value.loc is not None and e.value.loc.line == 9
    assert "kernel @k is not legal: %t cannot run in one kernel with %p" in e.value.message


def test_nofuse_pairs_are_symmetric() -> None:
    text = """
func @f(%x: f32[64]) -> (f32[64]) {
  %a = pointwise {nofuse = [%x]} : f32[64] over (i0 < 64) {
    %0 = load %x[i0]
    yield %0
  }
  return %a
}
"""
    with pytest.raises(FirError, match="function argument"):
        verify_module(parse_module(text))


# ---------------------------------------------------------------------------------------------
# Passes after fuse keep kernels


def test_dce_orders_kernels_as_units() -> None:
    m = run(lowered_example("cross_entropy.fir"), "fuse")
    g = m.funcs[0]
    before = [[n.results[0].name for n in k.nodes] for k in g.kernels]
    m = run(m, "dce")
    g = m.funcs[0]
    assert [[n.results[0].name for n in k.nodes] for k in g.kernels] == before
    positions = {id(n): p for p, n in enumerate(g.nodes)}
    for k in g.kernels:
        ps = [positions[id(n)] for n in k.nodes]
        assert ps == list(range(ps[0], ps[0] + len(ps)))


def test_inline_after_fuse_forgets_kernels() -> None:
    m = run(lowered_example("rms_norm.fir"), "fuse")
    assert m.funcs[0].kernels
    m = run(m, "inline")
    assert not m.funcs[0].kernels  # inlining changes what members read: fuse again


# ---------------------------------------------------------------------------------------------
# Scale: the candidate search is linear


def test_candidate_search_is_bounded_by_the_window() -> None:
    """A buffer read by 400 nodes gives at most 64 pairs per node, not 400 * 399 / 2."""
    lines = ["func @wide(%x: f32[64]) -> (" + ", ".join(["f32[64]"] * 400) + ") {"]
    for k in range(400):
        lines += [
            f"  %v{k} = pointwise : f32[64] over (i0 < 64) {{",
            "    %0 = load %x[i0]",
            f"    %1 = mul %0, {k}.0",
            "    yield %1",
            "  }",
        ]
    lines += ["  return " + ", ".join(f"%v{k}" for k in range(400)), "}"]
    m = parse_module("\n".join(lines))
    report = fuse_function(m.funcs[0], collect=True, max_size=1000)
    first = report.rounds[0]
    assert len(first.candidates) <= 64 * 400
    assert len(first.candidates) == sum(min(64, 399 - k) for k in range(400))


def test_a_thousand_node_graph() -> None:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from fuse_programs import NODES_PER_BLOCK, transformer_blocks

    blocks = 80
    m = run(transformer_blocks(blocks), "decompose,lower,inline,deps,dce")
    g = m.funcs[0]
    assert len(g.nodes) == blocks * NODES_PER_BLOCK + 1  # and the last residual add
    fuse_function(g)
    # per block: 4 extern matmuls, 2 views of the query (aliases: no kernel), and 4 kernels
    # (layer_norm's statistics and normalisation fused with the previous block's row sum; the
    # query's bias add, which the views read; softmax; the residual add, which feeds a matmul
    # that the row sum reads); one more for the last block's tail
    assert sum(isinstance(n, ExternNode) for n in g.nodes) == blocks * 4
    assert kernel_count(g) == blocks * 4 + 1
    verify_module(m)


# ---------------------------------------------------------------------------------------------
# Reports


def test_report_json_and_dot() -> None:
    m = lowered_example("softmax.fir")
    report = fuse_function(m.funcs[0], collect=True)
    data = json.loads(reports_json([report]))
    f = data["functions"][0]
    assert f["summary"]["kernels_after"] == 1
    assert f["rounds"][0]["candidates"][0]["decision"] in ("fused", "rejected")
    decisions = [c for r in f["rounds"] for c in r["candidates"]]
    assert all(c["reason_code"] is None for c in decisions if c["decision"] == "fused")
    assert all(c["reason"] for c in decisions if c["decision"] == "rejected")
    dot = module_dot(m)
    assert 'subgraph "cluster_softmax_k0"' in dot
    assert dot.count("->") >= 4 and 'style="dashed"' in dot


def test_fir_opt_fusion_report_file(tmp_path: object) -> None:
    out = os.path.join(str(tmp_path), "r.json")
    src = os.path.join(ROOT, "examples", "layer_norm.fir")
    cmd = [sys.executable, "-m", "fir.tools.fir_opt", src, "-p", "fusion", "--fusion-report", out]
    subprocess.run(cmd, check=True, capture_output=True)
    with open(out) as f:
        data = json.load(f)
    assert data["functions"][0]["summary"]["kernels_after"] == 1


def test_kernel_built_by_hand_in_python_verifies() -> None:
    m = lowered_example("rms_norm.fir", "inline")
    g = m.funcs[0]
    g.kernels = [Kernel("k", list(g.nodes))]
    verify_module(m)
    check_kernels(m)
    assert "kernel @k over (32; 64) {" in print_module(m)
    fg = FusionGraph(g)
    assert len(fg.fnodes) == 2


# ---------------------------------------------------------------------------------------------
# The docs' examples


@pytest.mark.parametrize("doc", ["docs/passes/fuse.md", "docs/language.md"])
def test_doc_kernel_examples_parse_and_are_legal(doc: str) -> None:
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = f.read()
    blocks = [b.split("```")[0] for b in text.split("```fir\n")[1:]]
    with_kernels = [b for b in blocks if "kernel @" in b]
    assert with_kernels, f"{doc} shows no kernel"
    for block in with_kernels:
        m = parse_module(block)
        verify_module(m)
        check_kernels(m)
        assert print_module(m) == block, "the example is not in canonical form"
        run_graph(m.funcs[0], example_inputs(m), kernels="tiled")


def test_kernel_space_does_not_depend_on_member_order() -> None:
    """A kernel whose first nodes are pointwise nodes of different sizes, which only the
    reduction written after them reconciles (found by the property tests)."""
    text = """
func @k(%x: f32[3]) -> (f32[1], f32[]) {
  kernel @k0 local (%b) {
    %a = pointwise : f32[1] over (i0 < 1) {
      %0 = load %x[0]
      %1 = neg %0
      yield %1
    }
    %b = pointwise : f32[3] over (i0 < 3) {
      %0 = load %x[i0]
      %1 = tanh %0
      yield %1
    }
    %s = reduction prod : f32[] over (; r0 < 3) {
      %0 = load %b[r0]
      yield %0
    }
  }
  return %a, %s
}
"""
    m = parse_module(text)
    verify_module(m)
    check_kernels(m)
    assert "kernel @k0 over (1; 3) local (%b) {" in print_module(m)
    x = torch.randn(3)
    a, s = run_graph(m.funcs[0], [x], kernels="tiled")
    torch.testing.assert_close(s, torch.tanh(x).prod())
    round_trip(run(m, "fuse,reorder"))
