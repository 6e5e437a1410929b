"""The Hugging Face models FIR is judged on, built from configs with random weights (nothing is
downloaded): GPT-2 124M, a Llama-style decoder, BERT-base and the T5-small encoder. Shared by
the GPU tests (tests/frontend/test_models_gpu.py) and the model benchmarks. ``transformers`` is a
benchmark-only extra, never a runtime dependency of FIR."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

MODELS = ("gpt2", "llama", "bert", "t5")


def build(name: str, small: bool = False) -> tuple[torch.nn.Module, int]:
    """The model ``name`` (one of :data:`MODELS`) in eval mode, and its vocabulary size.
    ``small``: a few layers and narrow widths with the same structure (CPU smoke tests)."""
    import transformers as hf

    torch.manual_seed(0)
    if name == "gpt2":
        cfg = hf.GPT2Config(n_layer=2, n_embd=64, n_head=4) if small else hf.GPT2Config()
        model: Any = hf.GPT2LMHeadModel(cfg)
        vocab = cfg.vocab_size
    elif name == "llama":
        width = (
            dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2)
            if small
            else dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8)
        )
        cfg = hf.LlamaConfig(
            num_attention_heads=16 if not small else 4,
            num_key_value_heads=4 if not small else 2,
            vocab_size=32000,
            max_position_embeddings=2048,
            **width,
        )
        model = hf.LlamaForCausalLM(cfg)
        vocab = cfg.vocab_size
    elif name == "bert":
        cfg = (
            hf.BertConfig(
                num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128
            )
            if small
            else hf.BertConfig()
        )
        model = hf.BertModel(cfg)
        vocab = cfg.vocab_size
    elif name == "t5":
        cfg = hf.T5Config(
            d_model=64 if small else 512,
            d_kv=16 if small else 64,
            d_ff=128 if small else 2048,
            num_layers=2 if small else 6,
            num_heads=4 if small else 8,
            vocab_size=32128,
        )
        model = hf.T5EncoderModel(cfg)
        vocab = cfg.vocab_size
    else:
        raise ValueError(f"unknown model {name!r} (choose from {', '.join(MODELS)})")
    return model.eval(), vocab


def first_output(out: Any) -> torch.Tensor:
    """The tensor a model's output holds first (logits or the last hidden state)."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    return out[0]


def forward(model: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """``ids -> first output``, the function that is compiled."""

    def run(ids: torch.Tensor) -> torch.Tensor:
        return first_output(model(input_ids=ids))

    return run
