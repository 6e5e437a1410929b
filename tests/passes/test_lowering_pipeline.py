"""The lowering pipeline ``decompose,lower,inline,deps,dce,plan-memory`` keeps program semantics.

Random tensor programs (elementwise chains, broadcasts, views, reductions, cat, pad, gather,
composites) come with their eager PyTorch outputs (tests/tensor_programs.py). After every pass
the program must verify, print and parse back to the same text, and the reference interpreter
must give eager PyTorch's results. The example programs go through the same pipeline and must
agree with the interpreter on the original program.
"""

from __future__ import annotations

import glob
import os

import pytest
import strategies as S
import torch
from fir.ir.graph import LoopNode, Module
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_file, parse_module
from fir.ir.printer import print_module
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensor_programs import FAMILIES, Program, random_program

PIPELINE = ["decompose", "lower", "inline", "deps", "dce", "plan-memory"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _close(actual: list[torch.Tensor], expected: list[torch.Tensor], where: str) -> None:
    assert len(actual) == len(expected), where
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, f"{where}: result #{k} dtype {a.dtype} != {e.dtype}"
        context = f"{where}, result #{k}"
        torch.testing.assert_close(
            a, e, rtol=1e-4, atol=1e-5, equal_nan=True, msg=lambda m, c=context: f"{c}: {m}"
        )


def _stages(module: Module, passes: list[str]) -> list[tuple[str, Module]]:
    """Run the passes one by one; after each, check verification and the text round trip."""
    out = []
    for name in passes:
        module = parse_pipeline(name).run(module)
        verify_module(module)
        text = print_module(module)
        again = parse_module(text, f"<after {name}>")
        assert print_module(again) == text, f"after {name}: the printed IR does not round-trip"
        out.append((name, again))
        module = again
    return out


def check_program(p: Program, passes: list[str] = PIPELINE) -> Module:
    module = parse_module(p.text)
    verify_module(module)
    _close(run_graph(module.funcs[0], p.inputs), p.expected, "tensor level")
    last = module
    for name, last in _stages(module, passes):
        _close(run_graph(last.funcs[0], p.inputs), p.expected, f"after {name}\n{p.text}")
    return last


SETTINGS = settings(
    max_examples=S.examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(st.data())
def test_random_programs_match_eager(data: st.DataObject) -> None:
    p = random_program(S.HypothesisChooser(data.draw), num_ops=data.draw(st.integers(1, 10)))
    check_program(p)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_matches_eager(family: str) -> None:
    # every family on its own, deterministic seeds: a failure names the family that broke
    for seed in range(6):
        p = random_program(S.RandomChooser(seed), num_ops=5, families=("unary", family))
        final = check_program(p)
        assert all(not hasattr(n, "op") for n in final.funcs[0].nodes), "a tensor op survived"


def test_many_random_programs() -> None:
    for seed in range(40):
        check_program(random_program(S.RandomChooser(1000 + seed), num_ops=12))


def _example_inputs(module: Module) -> list[torch.Tensor]:
    g = module.funcs[0]
    gen = torch.Generator().manual_seed(0)
    out = []
    for a in g.args:
        shape = [int(d) for d in a.type.shape]
        dt = a.type.dtype.to_torch()
        if dt.is_floating_point:
            out.append(torch.randn(shape, generator=gen).to(dt))
        else:
            # index-like inputs: small non-negative values within every dimension in the examples
            out.append(torch.randint(0, 4, shape, generator=gen).to(dt))
    return out


EXAMPLES = sorted(
    p
    for p in glob.glob(os.path.join(ROOT, "examples", "**", "*.fir"), recursive=True)
    if not p.endswith("loop_level.fir")
)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_examples_through_pipeline(path: str) -> None:
    module = parse_file(path)
    verify_module(module)
    inputs = _example_inputs(module)
    expected = run_graph(module.funcs[0], inputs)
    for name, stage in _stages(module, PIPELINE):
        _close(run_graph(stage.funcs[0], inputs), expected, f"{path} after {name}")
    assert all(
        isinstance(n, LoopNode) or type(n).__name__ in ("ExternNode", "AliasNode")
        for n in stage.funcs[0].nodes
    )


def test_loop_level_example_through_late_passes() -> None:
    # a program written at loop level goes through the passes that work at that level
    module = parse_file(os.path.join(ROOT, "examples", "loop_level.fir"))
    inputs = _example_inputs(module)
    expected = run_graph(module.funcs[0], inputs)
    for name, stage in _stages(module, ["inline", "deps", "dce", "plan-memory"]):
        _close(run_graph(stage.funcs[0], inputs), expected, f"loop_level.fir after {name}")
