"""Pass and named-pipeline registry. Pass modules are imported only when a pass is used, so the
driver starts fast whatever the passes import."""

from __future__ import annotations

import importlib

from .base import Pass

# kebab-case name -> "module:Class"
_PASSES: dict[str, str] = {
    "verify": "fir.passes.verify:VerifyPass",
    "canonicalize": "fir.passes.cleanup.canonicalize:CanonicalizePass",
    "cse": "fir.passes.cleanup.cse:CSEPass",
    "decompose": "fir.passes.lowering.decompose:DecomposePass",
    "lower": "fir.passes.lowering.lower:LowerPass",
    "inline": "fir.passes.fusion.inline:InlinePass",
    "deps": "fir.passes.analysis.deps:DepsPass",
    "dce": "fir.passes.cleanup.dce:DCEPass",
    "plan-memory": "fir.passes.memory.plan_memory:PlanMemoryPass",
    "fuse": "fir.passes.fusion.fuse:FusePass",
    "reorder": "fir.passes.fusion.reorder:ReorderPass",
    "split-reductions": "fir.passes.fusion.split_reductions:SplitReductionsPass",
    "unroll-reductions": "fir.passes.fusion.unroll_reductions:UnrollReductionsPass",
    "chunk-collectives": "fir.passes.collectives.chunk_collectives:ChunkCollectivesPass",
    "pad-matmul": "fir.passes.lowering.pad_matmul:PadMatmulPass",
}

# name -> pipeline text; expanded where the name appears in a pipeline
_PIPELINES: dict[str, str] = {
    "cleanup": "canonicalize,cse,canonicalize",
    "lowering": "decompose,lower,inline,deps,dce,plan-memory",
    "fusion": "decompose,cse,lower,unroll-reductions,inline,deps,dce,fuse,reorder,plan-memory",
    # the Triton back end's: large matmuls padded to aligned sizes for the GPU's matmul
    # library, reductions with few outputs split across programs, and launch-bound kernels of
    # one small iteration space joined (fuse{small-kernels}: at most 65536 elements, about
    # 2-3 us a kernel on an H200, most of it launch and tail; on an H200 it took the training
    # steps of GPT-2, Llama, BERT and T5 from 522/411/709/286 launches to 449/399/627/277 and
    # their device time down by 0.01-0.07 ms, docs/passes/fuse.md)
    "cuda": (
        "decompose,pad-matmul,cse,lower,unroll-reductions,inline,split-reductions,deps,dce,"
        "fuse{small-kernels=65536},reorder,plan-memory"
    ),
}

_SUMMARIES: dict[str, str] = {}


def register_pass(name: str, target: str) -> None:
    """Register ``name`` as the pass class at ``target`` ("package.module:Class")."""
    _PASSES[name] = target


def register_pipeline(name: str, text: str) -> None:
    if name in _PASSES:
        raise ValueError(f"'{name}' is already a pass name")
    _PIPELINES[name] = text


def pass_names() -> list[str]:
    return sorted(_PASSES)


def pipeline_names() -> dict[str, str]:
    return dict(sorted(_PIPELINES.items()))


def is_pass(name: str) -> bool:
    return name in _PASSES


def pipeline_text(name: str) -> str | None:
    return _PIPELINES.get(name)


def get_pass_class(name: str) -> type[Pass]:
    module_name, cls_name = _PASSES[name].split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    assert issubclass(cls, Pass) and cls.name == name, f"registry entry for {name} is wrong"
    return cls
