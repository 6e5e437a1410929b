"""``split-reductions``: which reductions split, into how many chunks, and that the program
computes the same values (the reference interpreter before and after, random inputs)."""

from __future__ import annotations

import pytest
import test_cpp_render as cpp
import torch
from fir.ir.graph import LoopNode
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_module
from fir.ir.printer import print_module
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline

LOOP = "decompose,lower,inline"


def _loop_nodes(text: str, split: str = "split-reductions") -> list[LoopNode]:
    module = parse_pipeline(f"{LOOP},{split}").run(parse_module(text, "<test>"))
    verify_module(module)
    return [n for n in module.funcs[0].nodes if isinstance(n, LoopNode)]


def _reduce(op: str, dtype: str, shape: str, out: str, dims: str = "") -> str:
    attrs = f" {{dims = [{dims}]}}" if dims else ""
    return (
        f"func @f(%x: {dtype}[{shape}]) -> ({dtype}[{out}]) {{\n"
        f"  %y = {op} %x{attrs} : {dtype}[{out}]\n  return %y\n}}\n"
    )


def _summary(nodes: list[LoopNode]) -> list[tuple[str, str, list, list]]:
    return [
        (
            n.results[0].name,
            n.reduction or "",
            [s for _, s in n.ranges],
            [s for _, s in n.reduction_ranges],
        )
        for n in nodes
    ]


def test_a_whole_tensor_sum_splits_its_outer_loop() -> None:
    nodes = _loop_nodes(_reduce("sum", "f32", "16384, 8", ""))
    assert _summary(nodes) == [
        ("y.part", "sum", [64], [256, 8]),
        ("y", "sum", [], [64]),
    ]
    assert nodes[0].attrs["realized"] == "split reduction: 64 chunks of %y"


def test_few_outputs_split_and_the_partials_stay_below_the_cap() -> None:
    # 512 row outputs: 8192 // 512 = 16 chunks at most
    assert _summary(_loop_nodes(_reduce("max", "f32", "512, 8192", "512", "1"))) == [
        ("y.part", "max", [16, 512], [512]),
        ("y", "max", [512], [16]),
    ]


def test_a_column_reduction_counts_its_programs_not_its_outputs() -> None:
    """A column reduction runs 32 contiguous outputs per program: 2,048 columns of 2,048 rows
    (Llama's RMS-norm weight gradient) ran on 64 programs, 58 us on an H200 against 12 for
    Inductor's split kernels. It splits into chunks of at least 256 rows."""
    assert _summary(_loop_nodes(_reduce("sum", "f32", "2048, 2048", "2048", "0"))) == [
        ("y.part", "sum", [8, 2048], [256]),
        ("y", "sum", [2048], [8]),
    ]
    # 512 columns: 16 programs, at most 8192 // 16 chunks, 256 rows each at least
    assert _summary(_loop_nodes(_reduce("max", "f32", "8192, 512", "512", "0"))) == [
        ("y.part", "max", [32, 512], [256]),
        ("y", "max", [512], [32]),
    ]


@pytest.mark.parametrize(
    "text",
    [
        _reduce("sum", "f32", "4095", ""),  # too few elements
        _reduce("sum", "f32", "1024, 4096", "1024", "1"),  # too many outputs (rows)
        _reduce("sum", "f32", "256, 32768", "32768", "0"),  # too many column programs
        _reduce("prod", "bf16", "16384", ""),  # the partials would round
        _reduce("sum", "f32", "4099", ""),  # a prime: no chunk count divides it
        _reduce("argmax", "f32", "16384", "")
        .replace("(f32[])", "(i64[])")
        .replace(": f32[]", ": i64[]"),
    ],
    ids=["small", "outputs", "columns", "bf16 prod", "prime", "argmax (pairs to combine)"],
)
def test_what_stays_whole(text: str) -> None:
    nodes = _loop_nodes(text)
    assert not any(n.results[0].name.endswith(".part") for n in nodes)


def test_a_bf16_sum_splits_into_f32_partials_and_rounds_once() -> None:
    """A bf16 sum accumulates in f32 and rounds once: its partials are f32, their sum too, and
    a pointwise node rounds that to bf16 (Llama's bf16 RMS-norm weight gradients, one a layer
    in the backward, ran unsplit on 64 programs)."""
    nodes = _loop_nodes(_reduce("sum", "bf16", "2048, 2048", "2048", "0"))
    assert _summary(nodes) == [
        ("y.part", "sum", [8, 2048], [256]),
        ("y.f32", "sum", [2048], [8]),
        ("y", "", [2048], []),
    ]
    assert [n.results[0].type.dtype.name for n in nodes] == ["F32", "F32", "BF16"]


def test_symbolic_sizes_stay_whole() -> None:
    text = "func @f(%x: f32[s0, 4096]) -> (f32[]) {\n  %y = sum %x : f32[]\n  return %y\n}\n"
    assert len(_loop_nodes(text)) == 1


def test_options_choose_the_chunks() -> None:
    text = _reduce("sum", "f32", "16384", "")
    nodes = _loop_nodes(text, "split-reductions{parts=8}")
    assert _summary(nodes)[0] == ("y.part", "sum", [8], [2048])
    assert len(_loop_nodes(text, "split-reductions{min-size=100000}")) == 1


def test_the_split_text_parses_back() -> None:
    module = parse_pipeline("cuda").run(parse_module(_reduce("min", "f32", "8192, 8", ""), "<t>"))
    text = print_module(module)
    assert "%y.part" in text and print_module(parse_module(text, "<again>")) == text


PROGRAMS = {
    "bf16_columns": _reduce("sum", "bf16", "4096, 64", "64", "0"),
    "reduce_all": cpp.REDUCE_ALL.replace("R", "1024").replace("C", "24"),
    "int_sum_prod_any": """
func @f(%x: i32[8192, 2], %b: bool[8192]) -> (i32[], i32[2], bool[]) {
  %s = sum %x : i32[]
  %p = prod %x {dims = [0]} : i32[2]
  %a = any %b : bool[]
  return %s, %p, %a
}""",
    "cross_entropy": """
func @f(%logits: f32[8192, 5], %target: i64[8192]) -> (f32[]) {
  %loss = cross_entropy %logits, %target {reduction = "mean"} : f32[]
  return %loss
}""",
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_cuda_pipeline_keeps_the_values(name: str) -> None:
    text = PROGRAMS[name]
    reference = parse_module(text, "<ref>").funcs[0]
    split = parse_pipeline("cuda").run(parse_module(text, "<split>")).funcs[0]
    assert any(n.results[0].name.endswith(".part") for n in split.nodes), name
    gen = torch.Generator().manual_seed(11)
    inputs = []
    for v in reference.args:
        dt = v.type.dtype.to_torch()
        shape = [int(s) for s in v.type.shape]
        if dt == torch.bool:
            inputs.append(torch.rand(shape, generator=gen) < 0.001)
        elif dt == torch.int64:
            inputs.append(torch.randint(0, 5, shape, generator=gen))
        elif dt == torch.int32:
            inputs.append(torch.randint(-3, 4, shape, generator=gen, dtype=torch.int32))
        else:
            inputs.append(torch.randn(shape, generator=gen).to(dt))
    want = run_graph(reference, [x.clone() for x in inputs])
    got = run_graph(split, [x.clone() for x in inputs])
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
