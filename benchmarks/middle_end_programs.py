"""PyTorch programs of a chosen number of aten ops, for timing FIR's middle end on what a new user
would feed it: ``fir-import`` of a function or model, then ``fir-opt -p fusion``.

* ``chain_mean``: a long chain of pointwise ops broken by a row mean every eight ops (``sin``,
  ``mul``, ``add``, ``relu``, ``sub``, ``mul`` by a weight, ``mean``, ``sub``). At 10,000 ops its
  loop-level result is about 40,000 lines; on main before issue 16 ``fir-opt -p fusion -o``
  took 3.2 s of wall time on this machine and ``--timing`` reported 1.3 s, the profile the
  issue describes for its 10,000-op program.
* ``gpt``: a stack of GPT-style blocks (layer_norm, a fused q/k/v linear, heads split with
  view/transpose, softmax attention, output projection, residuals, a tanh-gelu MLP), 25 aten ops
  per block, at small sizes (batch 2, 16 tokens, 64 features, 4 heads). Its loop-level result
  is about 11 lines per op (kernels, weight transposes before each matmul, dependency clauses),
  the heavy case.

``import_program(name, ops, directory)`` runs ``fir-import`` (in a subprocess, as a user would)
and returns the path of the tensor-level ``.fir`` file, cached in ``directory``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

CHAIN_OPS_PER_STEP = 8
GPT_OPS_PER_BLOCK = 25


def chain_mean(x: torch.Tensor, w: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        x = torch.sin(x) * 1.01 + 0.1
        x = torch.relu(x) - 0.05
        x = x * w
        x = x - x.mean(-1, keepdim=True)
    return x


class GPTBlock(torch.nn.Module):
    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.out = torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, self.heads, h).transpose(1, 2)
        k = k.view(b, t, self.heads, h).transpose(1, 2)
        v = v.view(b, t, self.heads, h).transpose(1, 2)
        att = torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / h**0.5), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class ChainMean(torch.nn.Module):
    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps
        self.w = torch.nn.Parameter(torch.ones(64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return chain_mean(x, self.w, self.steps)


def make_chain_mean(ops: int) -> torch.nn.Module:
    return ChainMean(max(1, ops // CHAIN_OPS_PER_STEP))


def make_gpt(ops: int) -> torch.nn.Module:
    return torch.nn.Sequential(*[GPTBlock() for _ in range(max(1, ops // GPT_OPS_PER_BLOCK))])


INPUTS = {"chain_mean": "f32[32,64]", "gpt": "f32[2,16,64]"}
PROGRAMS = tuple(INPUTS)


def import_program(name: str, ops: int, directory: Path) -> Path:
    """``fir-import`` of program ``name`` with about ``ops`` aten ops, cached in ``directory``."""
    path = directory / f"{name}_{ops}.fir"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    here = str(Path(__file__).parent)
    script = (
        f"import sys; sys.path.insert(0, {here!r})\n"
        "import middle_end_programs as p\n"
        "def factory():\n"
        f"    return p.make_{name}({ops})\n"
    )
    factory = directory / f"make_{name}_{ops}.py"
    factory.write_text(script)
    tmp = path.with_suffix(".tmp")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "fir.tools.fir_import",
            f"{factory}:factory",
            "--input",
            INPUTS[name],
            "-o",
            str(tmp),
        ],
        check=True,
    )
    tmp.rename(path)
    return path
