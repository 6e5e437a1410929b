"""A compiled CUDA program captured in a CUDA graph: one launch per call instead of one per
kernel (the host overhead of a graph of many small kernels is its launches).

The first call runs the program as it is (Triton compiles its kernels there). The second
captures a call on static copies of the inputs: the program's allocations during the capture
come from the graph's private memory pool and stay its own. Every later call copies the inputs
into the static ones, replays the graph and returns copies of the outputs (the graph writes
the same memory on every replay, so a returned tensor must not be that memory). Inputs of
another shape, dtype or device than the captured ones run the program without the graph.
Kernel errors (a checked index) are read after each replay, as without the graph.
"""

from __future__ import annotations

from typing import Any

import torch


class CudaGraphProgram:
    def __init__(self, program: Any) -> None:
        self.program = program
        self.plan = program.plan
        self.device = program.device
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_inputs: list[torch.Tensor] = []
        self.static_outputs: list[torch.Tensor] = []
        self.signature: list[tuple[Any, ...]] = []

    @staticmethod
    def _key(x: torch.Tensor) -> tuple[Any, ...]:
        return (x.shape, x.stride(), x.dtype, x.device)

    def __call__(
        self, *inputs: torch.Tensor, sizes: dict[str, int] | None = None
    ) -> list[torch.Tensor]:
        if sizes:  # sizes the inputs' shapes do not show: a captured graph could not tell
            return self.program(*inputs, sizes=sizes)
        self.calls += 1
        if self.calls == 1:
            return self.program(*inputs)
        if self.graph is None:
            self._capture(inputs)
        if [self._key(x) for x in inputs] != self.signature:
            return self.program(*inputs)
        for s, x in zip(self.static_inputs, inputs):
            s.copy_(x)
        assert self.graph is not None
        self.graph.replay()
        self.program._finish()
        return [o.clone() for o in self.static_outputs]

    def _capture(self, inputs: tuple[torch.Tensor, ...]) -> None:
        self.signature = [self._key(x) for x in inputs]
        self.static_inputs = [
            torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)
            for x in inputs
        ]
        finish = self.program.finish
        self.program.finish = None  # no device read while capturing
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(stream):  # warm the allocator on the side stream
                self.program(*self.static_inputs)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.static_outputs = list(self.program(*self.static_inputs))
        finally:
            self.program.finish = finish
        self.graph = graph
