"""Random tensor-level programs built together with their eager PyTorch results.

Each program is FIR text plus concrete inputs plus the outputs eager PyTorch computes for them,
so a test can check any stage of the compiler against eager PyTorch itself (not only against the
tensor-level interpreter). Families: elementwise chains with broadcasting, views (reshape,
permute, transpose, expand, slice with steps, select, squeeze, unsqueeze), reductions (sum, max,
min, mean, prod, argmax, var_mean), cat, pad, gather, index_select, and composite ops that
``decompose`` rewrites (softmax, log_softmax, logsumexp, layer_norm, gelu, silu).

Values stay in a moderate range (tanh/sigmoid squash before exp) so that rewritten forms agree
with eager up to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from strategies import Chooser

FAMILIES = ("unary", "binary", "view", "reduction", "cat", "pad", "gather", "composite")


@dataclass
class Program:
    text: str
    inputs: list[torch.Tensor]
    expected: list[torch.Tensor]
    families: set[str] = field(default_factory=set)


def _ty(t: torch.Tensor) -> str:
    dt = {torch.float32: "f32", torch.int64: "i64", torch.bool: "bool"}[t.dtype]
    return f"{dt}[{', '.join(str(d) for d in t.shape)}]"


def _lit(v: float) -> str:
    return repr(float(v))


class _Gen:
    def __init__(self, c: Chooser, families: tuple[str, ...]) -> None:
        self.c = c
        self.families = families
        self.gen = torch.Generator().manual_seed(c.integer(0, 2**31 - 1))
        self.args: list[tuple[str, torch.Tensor]] = []
        self.lines: list[str] = []
        self.pool: list[tuple[str, torch.Tensor]] = []  # float values usable as operands
        self.others: list[tuple[str, torch.Tensor]] = []  # non-float results (argmax ...)
        self.count = 0
        self.used: set[str] = set()

    # -- helpers

    def shape(self, max_rank: int = 3) -> list[int]:
        return [self.c.integer(1, 5) for _ in range(self.c.integer(1, max_rank))]

    def arg(self, t: torch.Tensor, prefix: str = "x") -> str:
        name = f"{prefix}{len(self.args)}"
        self.args.append((name, t))
        return name

    def float_arg(self, shape: list[int]) -> tuple[str, torch.Tensor]:
        t = torch.randn(shape, generator=self.gen)
        name = self.arg(t)
        self.pool.append((name, t))
        return name, t

    def emit(self, rhs: str, value: torch.Tensor, family: str, pool: bool = True) -> str:
        name = f"v{self.count}"
        self.count += 1
        self.lines.append(f"  %{name} = {rhs} : {_ty(value)}")
        self.used.add(family)
        if pool and value.dtype == torch.float32:
            self.pool.append((name, value))
        else:
            self.others.append((name, value))
        return name

    def pick(self) -> tuple[str, torch.Tensor]:
        # prefer recent values so that ops chain
        k = len(self.pool)
        n, x = self.pool[max(0, k - 1 - self.c.integer(0, min(k - 1, 4)))]
        if x.dim() == 0:  # every family below wants at least one dimension
            n = self.emit(f"unsqueeze %{n} {{dim = 0}}", x.unsqueeze(0), "view")
            x = x.unsqueeze(0)
        return n, x

    # -- families

    def unary(self) -> None:
        n, x = self.pick()
        op, fn = self.c.choice(
            [
                ("neg", torch.neg),
                ("abs", torch.abs),
                ("relu", torch.relu),
                ("tanh", torch.tanh),
                ("sigmoid", torch.sigmoid),
                ("sin", torch.sin),
                ("exp", lambda t: torch.exp(torch.tanh(t))),
            ]
        )
        if op == "exp":
            n = self.emit(f"tanh %{n}", torch.tanh(x), "unary")
        self.emit(f"{op} %{n}", fn(x), "unary")

    def binary(self) -> None:
        n, x = self.pick()
        op, fn = self.c.choice(
            [
                ("add", torch.add),
                ("sub", torch.sub),
                ("mul", torch.mul),
                ("maximum", torch.maximum),
                ("minimum", torch.minimum),
            ]
        )
        partners = []
        for m, y in self.pool:
            try:
                torch.broadcast_shapes(x.shape, y.shape)
            except RuntimeError:
                continue
            partners.append((m, y))
        if self.c.chance(20) or not partners:
            v = self.c.choice([0.5, -1.5, 2.0, 3])
            self.emit(f"{op} %{n}, {v}", fn(x, torch.tensor(float(v))), "binary")
            return
        if self.c.chance(40):
            # a fresh broadcastable argument: some dims of x set to 1, maybe fewer dims
            shape = [1 if self.c.chance(50) else d for d in x.shape]
            shape = shape[self.c.integer(0, len(shape) - 1) :]
            m, y = self.float_arg(shape)
        else:
            m, y = self.c.choice(partners)
        if self.c.chance(50):
            (n, x), (m, y) = (m, y), (n, x)
        if self.c.chance(15):
            cond = self.emit(f"gt %{n}, %{m}", x > y, "binary", pool=False)
            self.emit(f"where %{cond}, %{n}, %{m}", torch.where(x > y, x, y), "binary")
            return
        self.emit(f"{op} %{n}, %{m}", fn(x, y), "binary")

    def view(self) -> None:
        n, x = self.pick()
        kind = self.c.choice(
            ["reshape", "permute", "transpose", "expand", "slice", "select", "squeeze", "unsqueeze"]
        )
        r = x.dim()
        if kind == "reshape":
            numel = x.numel()
            dims: list[int] = []
            rest = numel
            for _ in range(self.c.integer(0, 2)):
                divs = [d for d in range(1, rest + 1) if rest % d == 0]
                d = self.c.choice(divs)
                dims.append(d)
                rest //= d
            dims.append(rest)
            dims = self.c.permutation(dims)
            self.emit(f"reshape %{n}", x.reshape(dims), "view")
        elif kind == "permute" and r > 1:
            p = self.c.permutation(range(r))
            self.emit(f"permute %{n} {{dims = {p}}}", x.permute(p), "view")
        elif kind == "transpose" and r > 1:
            a, b = self.c.integer(0, r - 1), self.c.integer(0, r - 1)
            self.emit(f"transpose %{n} {{dim0 = {a}, dim1 = {b}}}", x.transpose(a, b), "view")
        elif kind == "expand":
            shape = [self.c.integer(2, 3) if d == 1 else d for d in x.shape]
            if self.c.chance(30):
                shape = [self.c.integer(1, 3)] + shape
            self.emit(f"expand %{n}", x.expand(shape), "view")
        elif kind == "slice":
            d = self.c.integer(0, r - 1)
            size = x.shape[d]
            start = self.c.integer(0, size - 1)
            end = self.c.integer(start + 1, size)
            step = self.c.integer(1, 3)
            idx = [slice(None)] * r
            idx[d] = slice(start, end, step)
            self.emit(
                f"slice %{n} {{dim = {d}, start = {start}, end = {end}, step = {step}}}",
                x[tuple(idx)],
                "view",
            )
        elif kind == "select" and r > 1:
            d = self.c.integer(0, r - 1)
            i = self.c.integer(-x.shape[d], x.shape[d] - 1)
            self.emit(f"select %{n} {{dim = {d}, index = {i}}}", x.select(d, i), "view")
        elif kind == "squeeze" and 1 in x.shape and r > 1:
            d = list(x.shape).index(1)
            self.emit(f"squeeze %{n} {{dims = [{d}]}}", x.squeeze(d), "view")
        else:
            d = self.c.integer(0, r)
            self.emit(f"unsqueeze %{n} {{dim = {d}}}", x.unsqueeze(d), "view")

    def reduction(self) -> None:
        n, x = self.pick()
        r = x.dim()
        dims = sorted(self.c.subset(range(r))) or [r - 1]
        keep = self.c.chance(50)
        attrs = f"{{dims = {dims}, keepdim = {'true' if keep else 'false'}}}"
        kind = self.c.choice(["sum", "max", "min", "mean", "prod", "argmax", "var_mean"])
        if kind == "sum":
            self.emit(f"sum %{n} {attrs}", x.sum(dims, keepdim=keep), "reduction")
        elif kind == "max":
            self.emit(f"max %{n} {attrs}", x.amax(dims, keepdim=keep), "reduction")
        elif kind == "min":
            self.emit(f"min %{n} {attrs}", x.amin(dims, keepdim=keep), "reduction")
        elif kind == "mean":
            self.emit(f"mean %{n} {attrs}", x.mean(dims, keepdim=keep), "reduction")
        elif kind == "prod":
            t = self.emit(f"tanh %{n}", torch.tanh(x), "unary")
            y = torch.tanh(x).prod(dims[0], keepdim=keep)
            a = f"{{dims = [{dims[0]}], keepdim = {'true' if keep else 'false'}}}"
            self.emit(f"prod %{t} {a}", y, "reduction")
        elif kind == "argmax":
            d = dims[0]
            a = f"{{dim = {d}, keepdim = {'true' if keep else 'false'}}}"
            self.emit(f"argmax %{n} {a}", x.argmax(d, keepdim=keep), "reduction")
        else:
            corr = self.c.choice([0, 1])
            if math.prod(x.shape[d] for d in dims) <= corr:
                corr = 0  # eager warns and gives inf/nan there; not what this test is about
            var, mean = torch.var_mean(x, dims, correction=corr, keepdim=keep)
            va, mu = f"v{self.count}", f"v{self.count + 1}"
            self.count += 2
            a = f"{{dims = {dims}, keepdim = {'true' if keep else 'false'}, correction = {corr}}}"
            self.lines.append(f"  %{va}, %{mu} = var_mean %{n} {a} : {_ty(var)}, {_ty(mean)}")
            self.pool += [(va, var), (mu, mean)]
            self.used.add("reduction")

    def cat(self) -> None:
        n, x = self.pick()
        d = self.c.integer(0, x.dim() - 1)
        same = [
            (m, y)
            for m, y in self.pool
            if y.dim() == x.dim()
            and all(y.shape[k] == x.shape[k] for k in range(x.dim()) if k != d)
        ]
        parts = [(n, x)] + [self.c.choice(same) for _ in range(self.c.integer(1, 2))]
        names = ", ".join(f"%{m}" for m, _ in parts)
        self.emit(f"cat {names} {{dim = {d}}}", torch.cat([y for _, y in parts], d), "cat")

    def pad(self) -> None:
        n, x = self.pick()
        k = self.c.integer(1, min(2, x.dim()))
        pad = [self.c.integer(0, 2) for _ in range(2 * k)]
        value = self.c.choice([0.0, -1.0, 2.5])
        self.emit(
            f"pad %{n} {{pad = {pad}, value = {_lit(value)}}}",
            F.pad(x, pad, value=value),
            "pad",
        )

    def gather(self) -> None:
        n, x = self.pick()
        d = self.c.integer(0, x.dim() - 1)
        if self.c.chance(50):
            shape = list(x.shape)
            shape[d] = self.c.integer(1, 4)
            idx = torch.randint(0, x.shape[d], shape, generator=self.gen)
            i = self.arg(idx, "idx")
            self.emit(f"gather %{n}, %{i} {{dim = {d}}}", torch.gather(x, d, idx), "gather")
        else:
            idx = torch.randint(0, x.shape[d], (self.c.integer(1, 4),), generator=self.gen)
            i = self.arg(idx, "idx")
            self.emit(
                f"index_select %{n}, %{i} {{dim = {d}}}", torch.index_select(x, d, idx), "gather"
            )

    def composite(self) -> None:
        n, x = self.pick()
        d = x.dim() - 1
        kind = self.c.choice(["softmax", "log_softmax", "logsumexp", "layer_norm", "gelu", "silu"])
        if kind == "softmax":
            self.emit(f"softmax %{n} {{dim = {d}}}", torch.softmax(x, d), "composite")
        elif kind == "log_softmax":
            self.emit(f"log_softmax %{n} {{dim = {d}}}", torch.log_softmax(x, d), "composite")
        elif kind == "logsumexp":
            self.emit(
                f"logsumexp %{n} {{dims = [{d}], keepdim = true}}",
                torch.logsumexp(x, [d], keepdim=True),
                "composite",
            )
        elif kind == "layer_norm":
            self.emit(
                f"layer_norm %{n}, none, none {{normalized_shape = [{x.shape[-1]}]}}",
                F.layer_norm(x, [x.shape[-1]]),
                "composite",
            )
        elif kind == "gelu":
            approx = self.c.choice(["none", "tanh"])
            self.emit(
                f'gelu %{n} {{approximate = "{approx}"}}',
                F.gelu(x, approximate=approx),
                "composite",
            )
        else:
            self.emit(f"silu %{n}", F.silu(x), "composite")

    # -- program

    def build(self, num_ops: int) -> Program:
        for _ in range(self.c.integer(1, 2)):
            self.float_arg(self.shape())
        steps: dict[str, Callable[[], None]] = {f: getattr(self, f) for f in self.families}
        while self.count < num_ops:
            steps[self.c.choice(self.families)]()
        outs = [self.pool[-1]]
        extra = [v for v in self.pool[:-1] + self.others if v[0].startswith("v")]
        if extra and self.c.chance(60):
            outs.append(self.c.choice(extra))
        args = ", ".join(f"%{n}: {_ty(t)}" for n, t in self.args)
        results = ", ".join(_ty(t) for _, t in outs)
        text = "\n".join(
            [f"func @prog({args}) -> ({results}) {{"]
            + self.lines
            + [f"  return {', '.join('%' + n for n, _ in outs)}", "}", ""]
        )
        return Program(text, [t for _, t in self.args], [t for _, t in outs], self.used)


def random_program(c: Chooser, num_ops: int = 8, families: tuple[str, ...] = FAMILIES) -> Program:
    return _Gen(c, families).build(num_ops)
