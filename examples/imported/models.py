"""The PyTorch programs behind the imported examples (``regenerate.sh`` runs ``fir-import`` on
each; ``tests/frontend/test_frontend.py`` rebuilds them with the same seed and checks the interpreter
against eager PyTorch).

Three kinds of target: plain functions (``rms_norm`` …), an ``nn.Module`` subclass built with no
arguments (``GeluMLP``), and a zero-argument factory (``transformer_encoder_layer``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


class GeluMLP(nn.Module):
    def __init__(self, d_model: int = 64, hidden: int = 256) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, hidden)
        self.fc2 = nn.Linear(hidden, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, target)


def transformer_encoder_layer() -> nn.Module:
    return nn.TransformerEncoderLayer(d_model=64, nhead=4, batch_first=True).eval()
