"""Functional collectives, effectful ops and assertions (issue 14, point 3).

* IR level: ``deps`` chains effectful extern calls in program order, ``fuse`` never fuses loop
  nodes across a collective, ``plan-memory`` never hands a collective's input to another buffer.
* Import: ``with_effects`` (``aten._print``) and assertions no longer make a graph fall back.
* End to end: a tensor-parallel MLP block (column-parallel linear, gelu, row-parallel linear,
  functional all_reduce, residual, rms_norm) on two CPU processes with gloo compiles to one
  graph with no break, matches eager, and its final FIR has the collectives in program order
  between fused kernels. Skipped only where torch.distributed or gloo is missing.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from fir.frontend import dynamo as fir_backend
from fir.frontend.fx_import import import_graph_module
from fir.ir.graph import ExternNode, LoopNode, Module
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_module
from fir.passes.pipeline import parse_pipeline

HAVE_GLOO = dist.is_available() and dist.is_gloo_available()


def _run(text: str, pipeline: str) -> Module:
    return parse_pipeline(pipeline).run(parse_module(text))


# ---------------------------------------------------------------------------------------------
# passes


# %a and %b both read %x: horizontal fusion would join them but for the collective between
_TWO_SIDES = """
func @f(%x: f32[64]) -> (f32[64], f32[64], f32[64]) {
  %a = exp %x : f32[64]
  %c = extern "lib.all_reduce"(%a) {effect = "collective"} : f32[64]
  %w = extern "lib.wait"(%c) {effect = "collective", mutates = [0]} : f32[64]
  %b = sin %x : f32[64]
  return %a, %b, %c
}
"""


def test_deps_chain_effectful_calls_in_program_order() -> None:
    text = _TWO_SIDES.replace("  return %a, %b, %c", "  %d = add %c, %b : f32[64]\n  return %a, %d")
    m = _run(text.replace("(f32[64], f32[64], f32[64])", "(f32[64], f32[64])"), "lower,deps")
    nodes = {n.results[0].name: n for n in m.funcs[0].nodes}
    # the wait follows its collective through %c, which it reads; it is not on the effect chain
    assert nodes["w"].deps.weak == []
    # the reader of the collective's result runs after the wait (a mutation of %c)
    assert ("w", "c") in [(w.buffer, w.mutated) for w in nodes["d"].deps.weak]


def test_collectives_chain_among_themselves_not_through_their_waits() -> None:
    text = """
func @f(%x: f32[8], %y: f32[8]) -> (f32[8], f32[8]) {
  %c1 = extern "lib.all_reduce"(%x) {effect = "collective"} : f32[8]
  %w1 = extern "lib.wait"(%c1) {effect = "collective", mutates = [0]} : f32[8]
  %c2 = extern "lib.all_reduce"(%y) {effect = "collective"} : f32[8]
  %w2 = extern "lib.wait"(%c2) {effect = "collective", mutates = [0]} : f32[8]
  return %c1, %c2
}
"""
    g = _run(text, "deps,dce").funcs[0]
    nodes = {n.results[0].name: n for n in g.nodes}
    assert [(w.buffer, w.mutated) for w in nodes["c2"].deps.weak] == [("c1", "c1")]
    # both communications start before either wait
    assert [n.results[0].name for n in g.nodes] == ["c1", "c2", "w1", "w2"]


# %e is returned too, so it is realized (not inlined into %d, after the wait)
_OVERLAP = """
func @f(%x: f32[64], %y: f32[64]) -> (f32[64], f32[64]) {
  %c = extern "lib.all_reduce"(%x) {effect = "collective"} : f32[64]
  %w = extern "lib.wait"(%c) {effect = "collective", mutates = [0]} : f32[64]
  %b = sin %y : f32[64]
  %e = exp %b : f32[64]
  %d = add %c, %e : f32[64]
  return %d, %e
}
"""


def test_a_wait_goes_as_late_as_its_readers_allow() -> None:
    """The work that does not need the collective's data runs between the collective and its
    wait (it overlaps the communication); the reader comes after the wait; the values match."""
    from fir.frontend.explain import wait_placement

    g = _run(_OVERLAP, "decompose,lower,inline,deps,dce,fuse,reorder,plan-memory").funcs[0]
    names = [n.results[0].name for n in g.nodes]
    assert names.index("c") < names.index("e") < names.index("w") < names.index("d"), names
    (line,) = wait_placement(g)
    assert line == "lib.all_reduce %c: wait before %d, which reads the data; overlapped by 1: %e"
    # a wait whose reader comes at once: nothing overlaps it
    direct = (
        _OVERLAP.replace("  %b = sin %y : f32[64]\n  %e = exp %b : f32[64]\n", "")
        .replace("%d = add %c, %e", "%d = add %c, %y")
        .replace("return %d, %e", "return %d")
        .replace("(f32[64], f32[64]) {", "(f32[64]) {")
    )
    g = _run(direct, "decompose,lower,inline,deps,dce,fuse").funcs[0]
    (line,) = wait_placement(g)
    assert line.endswith("nothing overlaps it (everything after the collective needs its data)")


def test_fuse_keeps_the_work_on_each_side_of_a_collective_apart() -> None:
    m = _run(_TWO_SIDES, "decompose,lower,inline,deps,dce,fuse")
    g = m.funcs[0]
    names = [n.results[0].name for n in g.nodes]
    assert names.index("c") < names.index("w")
    for k in g.kernels:
        members = {n.results[0].name for n in k.nodes}
        assert not {"a", "b"} <= members, members
    # without the collective between them, %a and %b (both read %x) fuse
    plain = _TWO_SIDES.replace(' {effect = "collective"}', "").replace(
        ' {effect = "collective", mutates = [0]}', " {mutates = [0]}"
    )
    g = _run(plain, "decompose,lower,inline,deps,dce,fuse").funcs[0]
    assert any({"a", "b"} <= {n.results[0].name for n in k.nodes} for k in g.kernels)


def test_dce_does_not_reorder_collectives() -> None:
    text = """
func @f(%x: f32[8], %y: f32[8]) -> (f32[8], f32[8]) {
  %c1 = extern "lib.all_reduce"(%x) {effect = "collective"} : f32[8]
  %c2 = extern "lib.all_reduce"(%y) {effect = "collective"} : f32[8]
  %w2 = extern "lib.wait"(%c2) {effect = "collective", mutates = [0]} : f32[8]
  %w1 = extern "lib.wait"(%c1) {effect = "collective", mutates = [0]} : f32[8]
  return %c1, %c2
}
"""
    g = _run(text, "deps,dce").funcs[0]
    assert [n.results[0].name for n in g.nodes] == ["c1", "c2", "w2", "w1"]


def test_plan_memory_never_recycles_what_a_collective_reads() -> None:
    text = """
func @f(%x: f32[64]) -> (f32[64], f32[64]) {
  %a = exp %x : f32[64]
  %c = extern "lib.all_gather"(%a) {effect = "collective"} : f32[64]
  %b = sin %x : f32[64]
  %e = cos %b : f32[64]
  %w = extern "lib.wait"(%c) {effect = "collective", mutates = [0]} : f32[64]
  return %c, %e
}
"""
    pipeline = "decompose,lower,inline{disable},deps,dce,plan-memory"
    g = _run(text, pipeline).funcs[0]
    for n in g.nodes:
        for key in ("reuses", "inplace"):
            v = n.attrs.get(key)
            assert getattr(v, "name", None) not in ("a", "w"), (n.results[0].name, key)
    # without the collective, %b takes over %a's storage
    g = _run(text.replace('"lib.all_gather"(%a) {effect = "collective"}', '"lib.g"(%a)'), pipeline)
    assert any(getattr(n.attrs.get("reuses"), "name", None) == "a" for n in g.funcs[0].nodes)


_ALL_REDUCE = """
func @f(%x: f32[64]) -> (f32[64]) {
  %a = exp %x : f32[64]
  %c = extern "_c10d_functional.all_reduce.default"(SOURCE, "sum", "0") {effect = "collective"} : f32[64]
  %w = extern "_c10d_functional.wait_tensor.default"(%c) {effect = "collective", mutates = [0]} : f32[64]
  %d = add %c, READ : f32[64]
  return %d
}
"""


@pytest.mark.parametrize(
    ("source", "read", "in_place"),
    [
        ("%a", "%x", True),  # %a dies at the all-reduce: it is summed where it lies
        ("%a", "%a", False),  # %a is read after it
        ("%x", "%x", False),  # the caller's tensor is never written
    ],
)
def test_an_all_reduce_whose_input_dies_there_runs_in_place(
    source: str, read: str, in_place: bool
) -> None:
    """The functional all-reduce clones its input (a copy of the whole tensor per call, 40 us
    a step of the two-GPU block); Inductor re-inplaces it, and so does FIR's plan."""
    from fir.backends.plan import plan_program

    text = _ALL_REDUCE.replace("SOURCE", source).replace("READ", read)
    g = _run(text, "fusion").funcs[0]
    (step,) = [s for s in plan_program(g).steps if getattr(s, "node", None) is not None
               and s.node.callee.startswith("_c10d_functional.all_reduce")]  # fmt: skip
    assert (step.in_place == "_c10d_functional.all_reduce_.default") is in_place
    assert ("(in place: " in plan_program(g).text()) is in_place


# ---------------------------------------------------------------------------------------------
# import: with_effects and assertions


def _printing(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    torch._assert_async((y < 2).all(), "sin is at most 1")
    torch.ops.aten._print("fir collectives test")
    return y * 2


def test_with_effects_and_assert_compile_in_one_graph(capfd: pytest.CaptureFixture[str]) -> None:
    torch._dynamo.reset()
    start = len(fir_backend.COMPILED)
    x = torch.randn(8)
    out = torch.compile(_printing, backend="fir", options={"fallback": False})(x)
    torch.testing.assert_close(out, x.sin() * 2)
    assert "fir collectives test" in capfd.readouterr().out
    (graph,) = fir_backend.COMPILED[start:]
    externs = [n for n in graph.module.funcs[0].nodes if isinstance(n, ExternNode)]
    effects = [(n.callee, n.attrs.get("effect")) for n in externs if "effect" in n.attrs]
    assert effects == [("aten._assert_async.msg", "assert"), ("aten._print.default", "ordered")]
    assert not graph.report.fallbacks


def _asserting(x: torch.Tensor) -> torch.Tensor:
    torch._assert_async((x.sum() < -1e6), "the sum is too large")
    return x + 1


def test_a_failing_assertion_raises_when_the_program_runs() -> None:
    torch._dynamo.reset()
    with pytest.raises(RuntimeError):
        torch.compile(_asserting, backend="fir", options={"fallback": False})(torch.ones(4))


def test_assertions_known_at_import_are_dropped_and_the_rest_run() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        torch.ops.aten._assert_scalar.default(True, "always")
        torch.ops.aten._assert_async.msg(torch.tensor(True), "constant")
        token = torch.ops.aten._make_dep_token.default()
        token = torch.ops.aten._functional_assert_async.msg(x.sum() > -1e9, "data", token)
        return x + 1, token

    gm = make_fx(f, tracing_mode="fake")(torch.randn(4))
    module, report, _ = import_graph_module(gm)
    assert report.imported["aten._assert_scalar.default (holds at import)"] == 1
    assert report.imported["aten._assert_async.msg (holds at import)"] == 1
    (kept,) = [n for n in module.funcs[0].nodes if n.attrs.get("effect") == "assert"]
    assert kept.callee == "aten._functional_assert_async.msg"
    x = torch.randn(4)
    out, _token = run_graph(module.funcs[0], [x])
    torch.testing.assert_close(out, x + 1)


def test_an_assertion_known_to_fail_fails_the_import() -> None:
    from fir.frontend.emitter import UnsupportedError
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: torch.Tensor) -> torch.Tensor:
        torch.ops.aten._assert_scalar.default(True, "never holds")
        return x + 1

    gm = make_fx(f, tracing_mode="fake")(torch.randn(4))
    for n in gm.graph.nodes:  # tracing would raise on False: make it false afterwards
        if n.target is torch.ops.aten._assert_scalar.default:
            n.args = (False, n.args[1])
    # under torch.compile the graph then runs with PyTorch, which raises the assertion's error
    with pytest.raises(UnsupportedError, match="always fails"):
        import_graph_module(gm)


# ---------------------------------------------------------------------------------------------
# end to end: a tensor-parallel MLP block on two gloo processes

D, HIDDEN, TOKENS, WORLD = 16, 64, 8, 2


def _full_weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "w1": torch.randn(HIDDEN, D, generator=g) / D**0.5,
        "b1": torch.randn(HIDDEN, generator=g) * 0.1,
        "w2": torch.randn(D, HIDDEN, generator=g) / HIDDEN**0.5,
        "b2": torch.randn(D, generator=g) * 0.1,
        "norm": 1 + 0.1 * torch.randn(D, generator=g),
        "x": torch.randn(TOKENS, D, generator=g),
    }


class TensorParallelMLP(torch.nn.Module):
    """Megatron's MLP on one rank: w1 split by output features (column-parallel), w2 by input
    features (row-parallel); the partial sums meet in one all_reduce."""

    def __init__(self, full: dict[str, torch.Tensor], rank: int, world: int) -> None:
        super().__init__()
        cols = slice(rank * HIDDEN // world, (rank + 1) * HIDDEN // world)
        self.w1 = torch.nn.Parameter(full["w1"][cols].clone())
        self.b1 = torch.nn.Parameter(full["b1"][cols].clone())
        self.w2 = torch.nn.Parameter(full["w2"][:, cols].clone())
        self.b2 = torch.nn.Parameter(full["b2"].clone())
        self.norm = torch.nn.Parameter(full["norm"].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed._functional_collectives as fc

        h = F.gelu(F.linear(x, self.w1, self.b1))
        partial = F.linear(h, self.w2)
        y = fc.all_reduce(partial, "sum", dist.group.WORLD)
        return F.rms_norm(x + y + self.b2, (D,), self.norm, eps=1e-6)


def _unsharded(full: dict[str, torch.Tensor]) -> torch.Tensor:
    h = F.gelu(F.linear(full["x"], full["w1"], full["b1"]))
    y = F.linear(h, full["w2"], full["b2"])
    return F.rms_norm(full["x"] + y, (D,), full["norm"], eps=1e-6)


def _tp_worker(rank: int, init: str, out_dir: str, pipeline: str | None = None) -> None:
    """One rank: explain, compile and run the block (with ``pipeline``, else the default);
    write what the test checks as JSON."""
    from fir.frontend.explain import explain_call, wait_placement

    dist.init_process_group(
        "gloo", init_method=init, rank=rank, world_size=WORLD, timeout=timedelta(seconds=60)
    )
    try:
        full = _full_weights()
        block = TensorParallelMLP(full, rank, WORLD).eval()
        x = full["x"]
        with torch.no_grad():
            eager = block(x)
            ex = explain_call(block, (x,))
            torch._dynamo.reset()
            start = len(fir_backend.COMPILED)
            dump = Path(out_dir) / f"dump{rank}"
            options: dict[str, Any] = {"dump_dir": str(dump), "fallback": False}
            if pipeline is not None:
                options["pipeline"] = pipeline
            compiled = torch.compile(block, backend="fir", options=options)
            out = compiled(x)
            again = compiled(x)
        graphs = fir_backend.COMPILED[start:]
        final = sorted(dump.glob("*.fir"))[-1]
        result = {
            "eager_error": (out - eager).abs().max().item(),
            "again_error": (again - eager).abs().max().item(),
            "unsharded_error": (out - _unsharded(full)).abs().max().item(),
            "graph_count": ex.graph_count,
            "graph_breaks": [str(b) for b in ex.graph_breaks],
            "compiled_graphs": len(graphs),
            "kernel_count": ex.kernel_count,
            "collectives": ex.collectives,
            "fallbacks": dict(ex.fallbacks),
            "summary": ex.summary(),
            "steps": _steps(graphs[0].module) if graphs else [],
            "final_fir": final.read_text(),
            "final_name": final.name,
            "plan": graphs[0].program.plan.text() if graphs else "",
            "waits": wait_placement(graphs[0].module.funcs[0]) if graphs else [],
        }
        (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def _steps(module: Module) -> list[str]:
    """What runs, in order: ``kernel N`` (N loop nodes), ``loop``, or the extern's callee."""
    g = module.funcs[0]
    kernel_of = g.kernel_of()
    out: list[str] = []
    seen: set[int] = set()
    for n in g.nodes:
        k = kernel_of.get(id(n))
        if k is not None:
            if id(k) not in seen:
                seen.add(id(k))
                out.append(f"kernel {len(k.nodes)}")
        elif isinstance(n, LoopNode):
            out.append("loop")
        elif isinstance(n, ExternNode):
            out.append(n.callee)
    return out


def _run_ranks(tmp_path: Path, pipeline: str | None = None) -> list[dict[str, Any]]:
    import torch.multiprocessing as mp

    init = f"file://{tempfile.mkdtemp(dir=tmp_path)}/store"
    begin = time.monotonic()
    ctx = mp.spawn(_tp_worker, args=(init, str(tmp_path), pipeline), nprocs=WORLD, join=False)
    while not ctx.join(timeout=5):
        if time.monotonic() - begin > 240:
            for p in ctx.processes:
                if p.is_alive():
                    os.kill(p.pid, 9)
            pytest.fail("the two ranks did not finish in 240 s")
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]


@pytest.mark.skipif(not HAVE_GLOO, reason="torch.distributed with the gloo backend is unavailable")
def test_tensor_parallel_mlp_on_two_gloo_processes(tmp_path: Path) -> None:
    results = _run_ranks(tmp_path)
    for r in results:
        summary = r["summary"]
        assert r["graph_count"] == 1 and r["graph_breaks"] == [], summary
        assert r["compiled_graphs"] == 1 and r["fallbacks"] == {}, summary
        assert r["eager_error"] < 1e-5 and r["again_error"] < 1e-5, r
        assert r["unsharded_error"] < 1e-4, r
        assert r["collectives"] == ["all_reduce", "wait_tensor"], summary
        assert "collectives: 2 in program order: all_reduce, wait_tensor" in summary
        # the residual and rms_norm need the sum: nothing can overlap the all_reduce here
        assert "which reads the data; nothing overlaps it" in summary, summary
        steps: list[Any] = r["steps"]
        ar = steps.index("_c10d_functional.all_reduce.default")
        assert steps[ar + 1] == "_c10d_functional.wait_tensor.default", steps
        # before: the column-parallel matmul, its bias and gelu in one loop node, the row-parallel
        # matmul; after the wait: the bias, residual and rms_norm fused into one kernel
        before, after = steps[:ar], steps[ar + 2 :]
        assert sum(s.startswith(("kernel", "loop")) for s in before) == 1, steps
        (fused,) = after
        assert fused.startswith("kernel") and int(fused.split()[1]) >= 2, steps
        assert r["kernel_count"] == 2, summary
        # the row-parallel matmul's output is summed where it lies, not cloned first
        assert "(in place: _c10d_functional.all_reduce_.default)" in r["plan"], r["plan"]
    text = results[0]["final_fir"]
    assert results[0]["final_name"].endswith("plan-memory.fir")
    assert text.index('extern "_c10d_functional.all_reduce.default"') < text.index(
        'extern "_c10d_functional.wait_tensor.default"'
    )


@pytest.mark.skipif(not HAVE_GLOO, reason="torch.distributed with the gloo backend is unavailable")
def test_chunked_all_reduce_overlaps_the_next_chunks_matmul(tmp_path: Path) -> None:
    """``chunk-collectives`` on the same block: the row-parallel matmul in two halves of the
    tokens, each half all-reduced as soon as it is computed, so the first half's communication
    runs during the second half's matmul; the waits come last and the halves are read in place
    by the fused residual and rms_norm. Same numbers as eager and as the unsharded block."""
    pipeline = "chunk-collectives{min-bytes=0 min-rows=2},fusion"
    for r in _run_ranks(tmp_path, pipeline):
        assert r["compiled_graphs"] == 1 and r["fallbacks"] == {}, r["summary"]
        assert r["eager_error"] < 1e-5 and r["again_error"] < 1e-5, r
        assert r["unsharded_error"] < 1e-4, r
        ar, wait, mm = (
            "_c10d_functional.all_reduce.default",
            "_c10d_functional.wait_tensor.default",
            "aten.mm.default",
        )
        steps = [s for s in r["steps"] if s in (ar, wait, mm)]
        assert steps == [mm, mm, ar, mm, ar, wait, wait], r["steps"]
        first, second = r["waits"]
        # the first half's sum runs during the second half's matmul (and its all-reduce, which
        # queues behind it); the second half's overlaps nothing: the residual needs it
        assert re.search(
            r"\.c0: wait before kernel @k\d+, which reads the data; overlapped by 2: "
            r"mm %\S+\.c1, all_reduce %\S+\.c1$",
            first,
        ), r["waits"]
        assert second.endswith(
            "which reads the data; nothing overlaps it (everything after the "
            "collective needs its data)"
        ), r["waits"]
        # each half is summed where its matmul wrote it; no cat is materialized
        assert r["plan"].count("(in place: _c10d_functional.all_reduce_.default)") == 2
        assert " cat " not in r["final_fir"], r["final_fir"]
