"""plan-memory and the memory analysis: plans are safe, results unchanged, peaks only go down.

A plan is checked two ways:

* statically, by :func:`fir.ir.memory_plan.plan_problems` (storage simulated per value: no read of
  a value whose storage was freed or taken over, reuse only of free storage of the same device,
  dtype and size, in-place writes element for element);
* numerically, by :func:`run_in_planned_storage`, which runs the reference interpreter node by
  node with every buffer held in the storage the plan gives it: a reuse or in-place write shares
  one byte buffer, a freed storage is poisoned (every byte inverted), so a plan that clobbers a
  value still needed changes the results. For each in-place node it also evaluates, on the real
  loop grid, the index of every load of the overwritten input and checks that iteration ``p``
  reads exactly the element it writes (the interpreter evaluates a node at once, so this is what
  catches a hazard inside one node).
"""

from __future__ import annotations

import importlib.util
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import strategies as S
import torch
from fir.ir.errors import FirError
from fir.ir.graph import Graph, LoopNode, Module, Value
from fir.ir.interpreter import _Run, eval_index, run_graph
from fir.ir.memory_plan import (
    MemoryPlanError,
    buffer_bytes,
    footprint,
    memory_report,
    node_plan,
    plan_problems,
    storage_assignment,
)
from fir.ir.parser import parse_module
from fir.ir.printer import attr_value_str, print_module
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]


def _load_bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "bench_memory", ROOT / "benchmarks" / "bench_memory.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_memory"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


bench = _load_bench()


# ---------------------------------------------------------------------------------------------
# Running a program in the storage its plan gives it


def _poison(flat: torch.Tensor) -> None:
    """Make every element of a released storage differ from what it held."""
    if flat.dtype == torch.bool:
        flat.logical_not_()
    else:
        flat.view(torch.uint8).bitwise_not_()


class _PlannedStorageRun(_Run):
    """The interpreter with one byte buffer per storage of the plan."""

    def __init__(self, graph: Graph, numbers: dict[int, int] | None = None) -> None:
        super().__init__(graph)
        # id(value) -> storage number; the plan's unless a test forces its own
        self.number = storage_assignment(graph) if numbers is None else numbers
        self.bytes: dict[int, torch.Tensor] = {}
        self.written: set[int] = set()

    def flat(self, v: Value) -> torch.Tensor:
        n = self.dim(v.type.storage_size())
        k = self.number[id(v)]
        nbytes = n * v.type.dtype.itemsize
        buf = self.bytes.get(k)
        if buf is None or buf.numel() < nbytes:
            fresh = torch.full((max(nbytes, 1),), 0xA5, dtype=torch.uint8)
            if buf is not None:
                fresh[: buf.numel()] = buf
            self.bytes[k] = buf = fresh
        return buf[:nbytes].view(v.type.dtype.to_torch())

    def storage(self, v: Value) -> torch.Tensor:
        if id(v) not in self.written:
            return super().storage(v)
        return self.flat(v)

    def get(self, v: Value) -> torch.Tensor:
        if id(v) not in self.written:
            return super().get(v)
        flat = self.flat(v)
        shape = self.shape(v.type)
        strides = [self.dim(s) for s in v.type.strides]
        return torch.as_strided(flat, shape, strides, self.dim(v.type.offset)).clone()

    def store(self, v: Value, x: torch.Tensor) -> None:
        flat = self.flat(v)
        if x.numel():
            idx = self.layout_index(v.type, x.shape).reshape(-1)
            flat[idx] = x.reshape(-1)
        self.written.add(id(v))
        self.values.pop(v, None)

    def release(self, v: Value) -> None:
        if id(v) in self.written and self.dim(v.type.storage_size()):
            _poison(self.flat(v))

    def check_elementwise(self, node: LoopNode, v: Value) -> None:
        """Iteration p of an in-place node reads element linear(p) of ``v`` and nothing else."""
        sizes = [self.dim(s) for _, s in node.ranges]
        env: dict[Any, Any] = dict(self.sizes)
        for k, (var, _) in enumerate(node.ranges):
            view = [1] * len(sizes)
            view[k] = sizes[k]
            env[var] = torch.arange(sizes[k]).view(view)
        linear = torch.arange(math.prod(sizes)).view(sizes) if sizes else torch.tensor(0)
        assert node.body is not None
        for op in node.body.loads():
            if op.buffer is v:
                assert op.mask is None, f"in-place node %{node.result.name} has a masked load"
                idx = torch.as_tensor(eval_index(op.index, env)).expand(linear.shape)
                assert torch.equal(idx, linear), (
                    f"in-place node %{node.result.name} reads %{v.name} at elements it does not write"
                )

    def run(self, inputs: Any) -> list[torch.Tensor]:
        self.bind_inputs(inputs)
        for a in self.graph.args:  # a copy: an in-place write may take an argument's storage
            self.store(a, self.values[a])
        outputs = {id(v) for v in self.graph.outputs}
        readers: set[int] = {id(v) for n in self.graph.nodes for v in n.operand_values()}
        # a kernel's local buffers have no storage: they stay values of the interpreter
        local = {id(v) for k in self.graph.kernels for v in k.local}
        for n in self.graph.nodes:
            plan = node_plan(n)
            if plan.inplace is not None:
                assert isinstance(n, LoopNode)
                self.check_elementwise(n, plan.inplace)
            self.run_node(n)
            for r in n.results:
                if id(r) not in local:
                    self.store(r, self.values[r])
            for v in plan.frees:
                self.release(v)
            for r in n.results:
                if id(r) not in readers and id(r) not in outputs and id(r) not in local:
                    self.release(r)
        return [self.get(v) for v in self.graph.outputs]


def run_in_planned_storage(g: Graph, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return _PlannedStorageRun(g).run(inputs)


def random_inputs(g: Graph, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for a in g.args:
        shape = [d if isinstance(d, int) else 5 for d in a.type.shape]
        dt = a.type.dtype
        if dt.is_float:
            out.append(torch.randn(shape, generator=gen).to(dt.to_torch()))
        elif dt.is_bool:
            out.append(torch.randint(0, 2, shape, generator=gen).bool())
        else:  # index arguments: the programs below index with bound 4
            out.append(torch.randint(0, 4, shape, generator=gen).to(dt.to_torch()))
    return out


def plan(text: str, options: str = "") -> Module:
    m = parse_module(text)
    verify_module(m)
    m = parse_pipeline(f"plan-memory{options}").run(m)
    verify_module(m)
    return m


def assert_plan_safe(m: Module, seed: int = 0) -> None:
    for g in m.funcs:
        assert plan_problems(g) == []
        inputs = random_inputs(g, seed)
        expected = run_graph(g, inputs)
        got = run_in_planned_storage(g, inputs)
        for e, x in zip(expected, got):
            torch.testing.assert_close(x, e, equal_nan=True)
        after = footprint(g, "planned")
        before = footprint(g, "last-use")
        keep = footprint(g, "keep")
        if isinstance(after.peak, int):
            assert after.peak <= before.peak <= keep.peak
            assert after.allocated <= before.allocated


# ---------------------------------------------------------------------------------------------
# Hand-written programs

PROGRAM = """
func @f(%x: f32[4, 8], %w: f32[8]) -> (f32[4, 8], f32[4]) {
  %a = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %x[8*i0 + i1]
    %1 = exp %0
    yield %1
  }
  %b = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %a[8*i0 + i1]
    %1 = load %w[i1]
    %2 = mul %0, %1
    yield %2
  }
  %s = reduction sum : f32[4] over (i0 < 4; r0 < 8) {
    %0 = load %b[8*i0 + r0]
    yield %0
  }
  %c = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %b[i0 + 4*i1]
    %1 = load %s[i0]
    %2 = div %0, %1
    yield %2
  }
  %d = pointwise : f32[32] over (i0 < 32) {
    %0 = load %c[31 - i0]
    yield %0
  }
  %e = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %d[8*i0 + i1]
    %1 = load %x[8*i0 + i1]
    %2 = add %0, %1
    yield %2
  }
  %m, %v, %n = reduction welford : f32[4], f32[4], f32[4] over (i0 < 4; r0 < 8) {
    %0 = load %e[8*i0 + r0]
    yield %0
  }
  %y = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %e[8*i0 + i1]
    %1 = load %m[i0]
    %2 = sub %0, %1
    yield %2
  }
  %z = pointwise : f32[4] over (i0 < 4) {
    %0 = load %v[i0]
    %1 = load %n[i0]
    %2 = add %0, %1
    yield %2
  }
  return %y, %z
}
"""


def _attrs(m: Module) -> dict[str, dict[str, str]]:
    """The plan annotations of each node, printed, by the node's first result."""
    return {
        n.results[0].name: {
            k: attr_value_str(n.attrs[k]) for k in ("inplace", "reuses", "frees") if k in n.attrs
        }
        for n in m.funcs[0].nodes
    }


def test_hand_written_program_plan() -> None:
    m = plan(PROGRAM)
    assert _attrs(m) == {
        "a": {},
        "b": {"inplace": "%a"},
        "s": {},
        "c": {"frees": "[%b, %s]"},  # transposed read: not in place
        "d": {"reuses": "%b", "frees": "[%c]"},  # reversed read: not in place; f32[32] = f32[4, 8]
        "e": {"inplace": "%d"},  # also reads the argument %x, never freed
        "m": {"reuses": "[%s, none, none]"},  # welford: one entry per result
        "y": {"inplace": "%e", "frees": "[%m]"},
        "z": {"inplace": "%v", "frees": "[%n]"},
    }
    assert_plan_safe(m)


def test_plan_is_idempotent_and_round_trips() -> None:
    once = print_module(plan(PROGRAM))
    twice = print_module(plan(once))
    assert once == twice
    assert print_module(parse_module(once)) == once


def test_options_turn_rules_off() -> None:
    no_inplace = plan(PROGRAM, "{inplace=false}")
    assert not any("inplace" in n.attrs for n in no_inplace.funcs[0].nodes)
    assert any("reuses" in n.attrs for n in no_inplace.funcs[0].nodes)
    assert_plan_safe(no_inplace)
    no_reuse = plan(PROGRAM, "{reuse=false}")
    assert not any("reuses" in n.attrs for n in no_reuse.funcs[0].nodes)
    assert_plan_safe(no_reuse)
    frees_only = plan(PROGRAM, "{reuse=false inplace=false}")
    g = frees_only.funcs[0]
    assert footprint(g, "planned") == footprint(g, "last-use")
    assert_plan_safe(frees_only)


ARG_INPLACE = """
func @g(%x: f32[16], %y: f32[16]) -> (f32[16], f32[16]) {
  %a = pointwise : f32[16] over (i0 < 16) {
    %0 = load %x[i0]
    %1 = load %y[i0]
    %2 = mul %0, %1
    yield %2
  }
  %b = pointwise : f32[16] over (i0 < 16) {
    %0 = load %a[i0]
    %1 = load %y[15 - i0]
    %2 = add %0, %1
    yield %2
  }
  return %b, %y
}
"""


def test_inplace_args_option() -> None:
    default = plan(ARG_INPLACE)
    assert "inplace" not in default.funcs[0].nodes[0].attrs  # arguments belong to the caller
    m = plan(ARG_INPLACE, "{inplace-args}")
    a, b = m.funcs[0].nodes
    assert a.attrs["inplace"].name == "x"  # %y is returned: never overwritten
    assert b.attrs["inplace"].name == "a"
    assert_plan_safe(m)
    g = m.funcs[0]
    assert footprint(g, "planned").peak == 0  # everything lives in the caller's storage
    inputs = random_inputs(g)
    copies = [t.clone() for t in inputs]
    run_in_planned_storage(g, inputs)
    assert all(torch.equal(a, b) for a, b in zip(inputs, copies))


def test_statistics() -> None:
    p = parse_pipeline("plan-memory").passes[0]
    m = parse_module(PROGRAM)
    p.apply(m)
    g = m.funcs[0]
    assert p.statistics == {
        "freed": 5,
        "reused": 2,
        "inplace": 4,
        "peak-bytes-before": footprint(g, "last-use").peak,
        "peak-bytes-after": footprint(g, "planned").peak,
    }
    assert p.statistics["peak-bytes-after"] < p.statistics["peak-bytes-before"]


def test_examples_stay_correct() -> None:
    for path in sorted((ROOT / "examples").glob("*.fir")):
        m = plan(path.read_text())
        for g in m.funcs:
            assert plan_problems(g) == []
    assert_plan_safe(plan((ROOT / "examples" / "loop_level.fir").read_text()))


LIT_INPUTS = sorted(
    p for p in (ROOT / "tests" / "lit" / "plan_memory").glob("*.fir") if p.name != "bad_plan.fir"
)


@pytest.mark.parametrize("path", LIT_INPUTS, ids=lambda p: p.name)
@pytest.mark.parametrize("options", ["", "{inplace-args}"])
def test_lit_inputs_plans_are_safe(path: Path, options: str) -> None:
    assert_plan_safe(plan(path.read_text(), options))


SYMBOLIC = """
func @s(%x: f32[s0, 8]) -> (f32[s0]) {
  %a = pointwise : f32[s0, 8] over (i0 < s0, i1 < 8) {
    %0 = load %x[8*i0 + i1]
    %1 = exp %0
    yield %1
  }
  %b = pointwise : f32[s0, 8] over (i0 < s0, i1 < 8) {
    %0 = load %a[i0 + s0*i1]
    yield %0
  }
  %c = pointwise : f32[s0, 8] over (i0 < s0, i1 < 8) {
    %0 = load %b[8*i0 + i1]
    %1 = neg %0
    yield %1
  }
  %d = pointwise : f32[s0, 8] over (i0 < s0, i1 < 8) {
    %0 = load %c[8*i0 + i1]
    %1 = load %x[8*i0 + i1]
    %2 = mul %0, %1
    yield %2
  }
  %e = reduction sum : f32[s0] over (i0 < s0; r0 < 8) {
    %0 = load %d[i0 + s0*r0]
    yield %0
  }
  return %e
}
"""


def test_symbolic_sizes() -> None:
    m = plan(SYMBOLIC)
    g = m.funcs[0]
    names = {n.results[0].name: n for n in g.nodes}
    assert "inplace" not in names["b"].attrs  # transposed
    assert names["c"].attrs["inplace"].name == "b"
    assert names["d"].attrs["inplace"].name == "c"
    import sympy

    s0 = sympy.Symbol("s0", integer=True, positive=True)
    assert sympy.expand(footprint(g, "last-use").peak - 64 * s0) == 0
    assert sympy.expand(footprint(g, "planned").peak - 64 * s0) == 0
    assert sympy.expand(footprint(g, "keep").peak - 132 * s0) == 0
    assert_plan_safe(m)


def test_extern_and_tensor_ops() -> None:
    text = """
func @h(%x: f32[4, 4], %w: f32[4, 4]) -> (f32[4, 4]) {
  %a = exp %x : f32[4, 4]
  %m = extern "aten.mm.default"(%a, %w) : f32[4, 4]
  %b = pointwise : f32[4, 4] over (i0 < 4, i1 < 4) {
    %0 = load %m[4*i0 + i1]
    %1 = tanh %0
    yield %1
  }
  %c = extern "aten.mm.default"(%b, %b) : f32[4, 4]
  %d = pointwise : f32[4, 4] over (i0 < 4, i1 < 4) {
    %0 = load %c[4*i1 + i0]
    yield %0
  }
  return %d
}
"""
    m = plan(text)
    a, mm, b, c, d = m.funcs[0].nodes
    assert a.attrs == {}
    assert [v.name for v in mm.attrs["frees"]] == ["a"]
    assert b.attrs["inplace"].name == "m"  # over an extern's result
    assert "reuses" not in c.attrs  # an extern call allocates its own result
    assert [v.name for v in c.attrs["frees"]] == ["b"]
    assert d.attrs["reuses"].name == "b"
    assert_plan_safe(m)


def test_dead_results_are_released_after_their_node() -> None:
    text = """
func @k(%x: f32[8]) -> (f32[8]) {
  %dead = pointwise : f32[8] over (i0 < 8) {
    %0 = load %x[i0]
    yield %0
  }
  %a = pointwise : f32[8] over (i0 < 8) {
    %0 = load %x[i0]
    %1 = exp %0
    yield %1
  }
  return %a
}
"""
    m = plan(text)
    dead, a = m.funcs[0].nodes
    assert dead.attrs == {}
    assert a.attrs["reuses"].name == "dead"
    assert footprint(m.funcs[0], "last-use").peak == 32
    assert_plan_safe(m)


def test_device_separates_storage() -> None:
    text = """
func @dev(%x: f32[8]) -> (f32[8]) attributes {device = "cuda"} {
  %a = pointwise : f32[8] over (i0 < 8) {
    %0 = load %x[i0]
    yield %0
  }
  %b = pointwise : f32[8] over (i0 < 8) {
    %0 = load %a[7 - i0]
    yield %0
  }
  %c = pointwise {device = "cpu"} : f32[8] over (i0 < 8) {
    %0 = load %b[7 - i0]
    yield %0
  }
  %d = pointwise : f32[8] over (i0 < 8) {
    %0 = load %c[7 - i0]
    yield %0
  }
  return %d
}
"""
    a, b, c, d = plan(text).funcs[0].nodes
    assert "reuses" not in c.attrs  # %a's storage is on cuda
    assert d.attrs["reuses"].name == "b"  # on cuda again; the most recently freed first


# ---------------------------------------------------------------------------------------------
# The checkers fail on bad plans


BAD_PLANS = [
    # a reuse of storage that is still live
    ("%c = pointwise : f32[4, 8]", "%c = pointwise {reuses = %b} : f32[4, 8]", "still live"),
    # an in-place write over an input read at other elements (transposed)
    ("%c = pointwise : f32[4, 8]", "%c = pointwise {inplace = %b} : f32[4, 8]", "another element"),
    # freed before its last reader
    ("%s = reduction sum : f32[4]", "%s = reduction sum {frees = [%b]} : f32[4]", "was freed"),
    # an output freed
    ("%z = pointwise : f32[4]", "%z = pointwise {frees = [%y]} : f32[4]", "returns"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD_PLANS)
def test_checkers_catch_bad_plans(old: str, new: str, message: str) -> None:
    text = PROGRAM.replace(old, new)
    assert text != PROGRAM
    g = parse_module(text).funcs[0]
    problems = plan_problems(g)
    assert any(message in p for p in problems), problems
    with pytest.raises(MemoryPlanError):
        footprint(g, "planned")


def _own_storage(g: Graph) -> dict[int, int]:
    return {id(v): k for k, v in enumerate(g.values())}


def _value(g: Graph, name: str) -> Value:
    return next(v for v in g.values() if v.name == name)


def test_numeric_replay_catches_clobbering() -> None:
    g = parse_module(PROGRAM).funcs[0]
    inputs = random_inputs(g)
    expected = run_graph(g, inputs)
    numbers = _own_storage(g)
    torch.testing.assert_close(_PlannedStorageRun(g, numbers).run(inputs), expected)
    numbers[id(_value(g, "c"))] = numbers[id(_value(g, "x"))]  # %e reads %x after %c wrote it
    got = _PlannedStorageRun(g, numbers).run(inputs)
    assert not torch.allclose(got[0], expected[0])


def test_numeric_replay_catches_early_free() -> None:
    g = parse_module(PROGRAM.replace(*BAD_PLANS[2][:2])).funcs[0]
    inputs = random_inputs(g)
    got = _PlannedStorageRun(g, _own_storage(g)).run(inputs)
    assert not torch.allclose(got[0], run_graph(g, inputs)[0], equal_nan=True)


def test_numeric_replay_catches_inplace_hazard() -> None:
    g = parse_module(PROGRAM.replace(*BAD_PLANS[1][:2])).funcs[0]
    with pytest.raises(AssertionError, match="does not write"):
        _PlannedStorageRun(g, _own_storage(g)).run(random_inputs(g))


# ---------------------------------------------------------------------------------------------
# Random runnable loop-level programs


def random_loop_program(seed: int, max_nodes: int = 8) -> str:
    """A random runnable loop-level program over 24-element buffers, built to offer in-place
    writes (same index, last reader), reuse (same dtype and size, also across shapes) and their
    spoilers (transposed, reversed, masked and indirect loads, other dtypes and sizes, strided
    results, outputs, arguments)."""
    rng = random.Random(seed)
    args = [("x", "f32", "full"), ("y", "f32", "full"), ("z", "f64", "full"), ("ids", "i64", "ids")]
    values: list[tuple[str, str, str]] = [v for v in args if v[2] != "ids"]
    lines: list[str] = []
    for k in range(rng.randint(2, max_nodes)):
        name = f"v{k}"
        kind = rng.choice(["pw2", "pw2", "pw2", "pw1", "red", "extern"])
        dt = rng.choice(["f32", "f32", "f64"])
        fulls = [v for v in values if v[2] in ("full", "flat")]
        if kind == "extern":
            same = [v for v in values if v[1] == dt and v[2] == "full"]
            if not same:
                kind = "pw2"
            else:
                a, b = rng.choice(same), rng.choice(same)
                lines.append(f'  %{name} = extern "aten.mul.Tensor"(%{a[0]}, %{b[0]}) : {dt}[4, 6]')
                values.append((name, dt, "full"))
                continue
        if kind == "red":
            src = rng.choice(fulls)
            red = rng.choice(["sum", "max"])
            lines.append(f"  %{name} = reduction {red} : {dt}[4] over (i0 < 4; r0 < 6) {{")
            lines.append(f"    %0 = load %{src[0]}[6*i0 + r0]")
            y = "%0"
            if src[1] != dt:
                lines.append(f"    %1 = cast %0 : {dt}")
                y = "%1"
            lines.append(f"    yield {y}")
            lines.append("  }")
            values.append((name, dt, "row"))
            continue
        two_d = kind == "pw2"
        ty = f"{dt}[4, 6]" if two_d else f"{dt}[24]"
        if two_d and rng.random() < 0.15:
            ty += " strided [1, 4]"
        ranges = "i0 < 4, i1 < 6" if two_d else "i0 < 24"
        lin = "6*i0 + i1" if two_d else "i0"
        forms = {
            "same": lin,
            "transposed": "i0 + 4*i1" if two_d else "4*mod(i0, 6) + floordiv(i0, 6)",
            "reversed": "23 - 6*i0 - i1" if two_d else "23 - i0",
        }
        body: list[str] = []

        def add(text: str, body: list[str] = body) -> str:
            body.append(f"    %{len(body)} = {text}")
            return f"%{len(body) - 1}"

        loaded: list[str] = []
        for _ in range(rng.randint(1, 3)):
            src = rng.choice(values)
            if src[2] == "row":
                v = add(f"load %{src[0]}[{'i0' if two_d else 'floordiv(i0, 6)'}]")
            else:
                form = rng.choice(
                    ["same", "same", "same", "transposed", "reversed", "masked", "indirect"]
                )
                if form == "masked":
                    m = add(f"index {lin} + 1 : i64")
                    m = add(f"lt {m}, 24")
                    v = add(f"load %{src[0]}[{lin} + 1] if {m} else 0.0")
                elif form == "indirect" and two_d:
                    i = add("load %ids[i1]")
                    i = add(f"indirect {i} < 4")
                    v = add(f"load %{src[0]}[6*{i} + i1]")
                else:
                    v = add(f"load %{src[0]}[{forms.get(form, lin)}]")
            if src[1] != dt:
                v = add(f"cast {v} : {dt}")
            loaded.append(v)
        acc = loaded[0]
        for other in loaded[1:]:
            acc = add(f"{rng.choice(['add', 'mul', 'sub', 'maximum'])} {acc}, {other}")
        if rng.random() < 0.5:
            acc = add(f"{rng.choice(['tanh', 'neg', 'sigmoid'])} {acc}")
        lines.append(f"  %{name} = pointwise : {ty} over ({ranges}) {{")
        lines += body
        lines.append(f"    yield {acc}")
        lines.append("  }")
        values.append((name, dt, "full" if two_d else "flat"))
    produced = [v for v in values if v[0].startswith("v")]
    outs = [produced[-1]] + rng.sample(produced[:-1], min(len(produced) - 1, rng.randint(0, 2)))
    if rng.random() < 0.2:
        outs.append(("x", "f32", "full"))
    types = {"full": "[4, 6]", "flat": "[24]", "row": "[4]"}

    def out_type(v: tuple[str, str, str]) -> str:
        for line in lines:
            if line.startswith(f"  %{v[0]} = "):
                return line.split(" : ", 1)[1].split(" over ")[0].rstrip(" {")
        return f"{v[1]}{types[v[2]]}"

    header = (
        "func @r(%x: f32[4, 6], %y: f32[4, 6], %z: f64[4, 6], %ids: i64[6]) -> "
        f"({', '.join(out_type(v) for v in outs)}) {{"
    )
    return (
        "\n".join([header, *lines, f"  return {', '.join('%' + v[0] for v in outs)}", "}"]) + "\n"
    )


@settings(max_examples=S.examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(["", "{inplace-args}", "{inplace=false}", "{reuse=false}"]),
)
def test_random_programs_plans_are_safe(seed: int, options: str) -> None:
    m = plan(random_loop_program(seed), options)
    assert_plan_safe(m, seed)


def test_random_programs_exercise_every_rule() -> None:
    counts = {"inplace": 0, "reuses": 0, "frees": 0}
    for seed in range(40):
        m = plan(random_loop_program(seed))
        for n in m.funcs[0].nodes:
            for key in counts:
                counts[key] += key in n.attrs
    assert all(c >= 5 for c in counts.values()), counts


@settings(max_examples=S.examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.any_modules())
def test_generated_modules_plan_consistently(m: Module) -> None:
    """Any program the property generators make (not all runnable): the plan passes the static
    check, verifies, round-trips through text, and planning again changes nothing."""
    m = parse_pipeline("plan-memory{inplace-args}").run(m)
    verify_module(m)
    text = print_module(m)
    again = parse_module(text)
    assert print_module(again) == text
    for g in again.funcs:
        assert plan_problems(g) == []
        before, after = footprint(g, "last-use"), footprint(g, "planned")
        if isinstance(before.peak, int) and isinstance(after.peak, int):
            assert after.peak <= before.peak
    assert print_module(parse_pipeline("plan-memory{inplace-args}").run(again)) == text


# ---------------------------------------------------------------------------------------------
# The 50-op chain (benchmarks/bench_memory.py)


@pytest.mark.parametrize("disable", [False, True])
def test_chain_loop_level_matches_tensor_level(disable: bool) -> None:
    tensor = parse_module(bench.chain_text(50, (4, 8)))
    loops = plan(bench.loop_level_text(50, (4, 8), disable=disable))
    g = loops.funcs[0]
    assert len(g.nodes) == (50 if disable else 5)
    inputs = random_inputs(g)
    torch.testing.assert_close(run_graph(g, inputs), run_graph(tensor.funcs[0], inputs))
    assert_plan_safe(loops)


def test_chain_with_default_inlining_has_a_lower_peak_after_planning() -> None:
    g = plan(bench.loop_level_text(50, (1024, 1024))).funcs[0]
    buf = buffer_bytes(g.args[0].type)
    rep = memory_report(g)
    assert rep.keep.peak == 5 * buf
    assert rep.last_use.peak == 2 * buf
    assert rep.planned is not None and rep.planned.peak == buf


def test_real_pipeline_chain_has_a_lower_peak_after_planning() -> None:
    text = bench.real_pipeline_text(bench.chain_text(50, (4, 8)), bench.LOWERING + ",plan-memory")
    m = parse_module(text)
    assert_plan_safe(m)
    rep = memory_report(m.funcs[0])
    assert rep.planned is not None and rep.planned.peak < rep.last_use.peak < rep.keep.peak


# ---------------------------------------------------------------------------------------------
# fir-opt --stats


def test_stats_without_torch(tmp_path: Path) -> None:
    src = tmp_path / "p.fir"
    src.write_text(PROGRAM)
    code = (
        "import sys\n"
        "from fir.tools.fir_opt import main\n"
        f"rc = main([{str(src)!r}, '-p', 'plan-memory', '--stats', '-o', {str(tmp_path / 'o.fir')!r}])\n"
        "print(rc, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 False"
    assert "peak bytes after planning" in out.stderr


def test_stats_reports_a_bad_plan_as_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fir.tools import fir_opt

    src = tmp_path / "bad.fir"
    src.write_text(
        PROGRAM.replace("%c = pointwise : f32[4, 8]", "%c = pointwise {reuses = %b} : f32[4, 8]")
    )
    assert fir_opt.main([str(src), "--stats"]) == 1
    err = capsys.readouterr().err
    assert "error: memory plan of @f: %c: reuses the storage of %b, which is still live" in err
    assert "Traceback" not in err
    assert isinstance(MemoryPlanError("x"), FirError)


def test_doc_example_is_real_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from fir.tools import fir_opt

    doc = (ROOT / "docs" / "passes" / "plan-memory.md").read_text()
    blocks = re.findall(r"```(fir|text)\n(.*?)```", doc, re.S)
    start = next(k for k, (kind, _) in enumerate(blocks) if kind == "fir")
    source, printed, stats = (body for _, body in blocks[start : start + 3])
    src = tmp_path / "example.fir"
    src.write_text(source)
    assert fir_opt.main([str(src), "-p", "plan-memory", "--stats"]) == 0
    out, err = capsys.readouterr()
    assert out == printed, "docs/passes/plan-memory.md: the printed example is stale"
    assert err == stats, "docs/passes/plan-memory.md: the --stats example is stale"
