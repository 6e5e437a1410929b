"""Transformer-like blocks at tensor level, for the benchmarks: ``bench_fuse`` lowers them with
``decompose,lower,inline,deps,dce`` and times ``fuse``; ``bench_pipeline`` times the whole middle end.

Each block is what a transformer layer does (layer_norm, matmul + bias, attention scores with
softmax, residual adds, gelu MLP, a row normalisation), 14 loop-level nodes of which 4 are
extern matmuls and 2 are views (the query's head layouts, aliases that the attention matmul
reads). ``shared=False`` gives every block its own weights, as a real model has;
``shared=True`` makes all blocks read the same six weight tensors, so each weight is read by
hundreds of nodes: the worst case for the candidate search, which pairs every node with the
next 64 readers of each buffer it touches.
"""

from __future__ import annotations

BLOCK = """\
  %ln{k} = layer_norm %h{j}, %g_{w}, %b_{w} {{normalized_shape = [256]}} : f32[128, 256]
  %q{k} = matmul %ln{k}, %wq_{w} : f32[128, 256]
  %qb{k} = add %q{k}, %bq_{w} : f32[128, 256]
  %qh{k} = reshape %qb{k} : f32[128, 4, 64]
  %qt{k} = transpose %qh{k} {{dim0 = 0, dim1 = 1}} : f32[4, 128, 64]
  %kt{k} = permute %qh{k} {{dims = [1, 2, 0]}} : f32[4, 64, 128]
  %s{k} = matmul %qt{k}, %kt{k} : f32[4, 128, 128]
  %ss{k} = mul %s{k}, 0.125 : f32[4, 128, 128]
  %p{k} = softmax %ss{k} {{dim = 2}} : f32[4, 128, 128]
  %o{k} = matmul %p{k}, %qt{k} : f32[4, 128, 64]
  %ot{k} = transpose %o{k} {{dim0 = 0, dim1 = 1}} : f32[128, 4, 64]
  %of{k} = reshape %ot{k} : f32[128, 256]
  %r{k} = add %h{j}, %of{k} : f32[128, 256]
  %m{k} = matmul %r{k}, %w1_{w} : f32[128, 256]
  %mb{k} = add %m{k}, %b1_{w} : f32[128, 256]
  %a{k} = gelu %mb{k} : f32[128, 256]
  %d{k} = mul %a{k}, %r{k} : f32[128, 256]
  %sc{k} = sum %d{k} {{dims = [1], keepdim = true}} : f32[128, 1]
  %n{k} = div %d{k}, %sc{k} : f32[128, 256]
  %h{k} = add %n{k}, %r{k} : f32[128, 256]
"""
BLOCK_OPS = BLOCK.count("\n")  # tensor-level ops per block
NODES_PER_BLOCK = 14  # loop-level nodes after decompose,lower,inline,deps,dce
WEIGHTS = "%g_{w}: f32[256], %b_{w}: f32[256], %wq_{w}: f32[256, 256], %bq_{w}: f32[256], %w1_{w}: f32[256, 256], %b1_{w}: f32[256]"


def transformer_blocks(blocks: int, shared: bool = False) -> str:
    """A tensor-level program of ``blocks`` blocks."""
    count = 1 if shared else blocks
    weights = ", ".join(WEIGHTS.format(w=w) for w in range(count))
    head = f"func @blocks(%h0: f32[128, 256], {weights}) -> (f32[128, 256]) {{"
    body = "".join(BLOCK.format(j=k, k=k + 1, w=0 if shared else k) for k in range(blocks))
    return f"{head}\n{body}  return %h{blocks}\n}}\n"


def blocks_for(nodes: int) -> int:
    return max(1, round(nodes / NODES_PER_BLOCK))
