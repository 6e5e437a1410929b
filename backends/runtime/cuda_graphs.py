"""A compiled CUDA program captured in a CUDA graph: one launch per call instead of one per
kernel (the host overhead of a graph of many small kernels is its launches).

The first call runs the program as it is (Triton compiles its kernels there) and notes where
each input lies. The second captures a call:

* an input at the address it had on the first call (a parameter, a buffer, a saved
  activation, usually also the token ids a loop passes again) is read by the graph where it
  lies; nothing is copied for it. A later call that passes such an input at another address
  makes that input a copied one and captures again (at most :data:`RECAPTURES` times);
* any other input is copied into a static tensor of the graph before each replay;
* the program's allocations during the capture come from the graph's private memory pool.

A replay writes its outputs where the previous replay wrote them. They are returned as they
lie (no copy), and before the next replay the graph checks that no tensor of the previous
results is still alive (a reference to the output's storage: the tensor, a view, an autograd
gradient that kept it). If one is, that call runs the program without the graph, into fresh
memory, so that a result the caller holds is never overwritten: what eager PyTorch guarantees.
Inputs of another shape, dtype or device than the captured ones, and programs that write an
input or return a view of a copied input, also run without the graph. Kernel errors (a
checked index) are read after each replay, as without the graph.
"""

from __future__ import annotations

from typing import Any

import torch

RECAPTURES = 4  # captures after the first, when fixed inputs move; then the graph is dropped

_use_count = getattr(torch._C, "_storage_Use_Count", None)


def _storage_uses(t: torch.Tensor) -> int:
    assert _use_count is not None
    return int(_use_count(t.untyped_storage()._cdata))


def _key(x: torch.Tensor) -> tuple[Any, ...]:
    return (x.shape, x.stride(), x.dtype, x.device)


class CudaGraphProgram:
    def __init__(self, program: Any) -> None:
        self.program = program
        self.plan = program.plan
        self.device = program.device
        self.alloc_device = program.alloc_device
        self.calls = 0
        self.captures = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.disabled: str | None = None  # why this program runs without a graph
        self.first_pointers: list[int] = []
        self.copied: set[int] = set()  # input positions copied before each replay
        self.fixed: list[int] = []  # the others, read where they lie
        self.replays = 0
        self.held = 0  # calls run without the graph because a result of its last replay lived
        self.signature: list[tuple[Any, ...]] = []
        self.pointers: list[int] = []  # of the fixed inputs at capture (0 for copied ones)
        self.static_inputs: list[torch.Tensor] = []
        self.static_outputs: list[torch.Tensor] = []
        # one tensor per distinct output storage and its use count with only the graph's own
        # references alive: more uses mean a caller still holds a result of the last replay
        self.owned: list[tuple[torch.Tensor, int]] = []
        if program.writes_inputs():
            self.disabled = "it writes an input in place"

    def writes_inputs(self) -> bool:
        return bool(self.program.writes_inputs())

    def __call__(
        self, *inputs: torch.Tensor, sizes: dict[str, int] | None = None
    ) -> list[torch.Tensor]:
        if sizes or self.disabled:  # sizes the inputs' shapes do not show: no graph for them
            return self.program(*inputs, sizes=sizes)
        self.calls += 1
        if self.calls == 1:
            self.first_pointers = [x.data_ptr() for x in inputs]
            return self.program(*inputs)
        if self.graph is not None:
            # the fast path of a replay: only addresses (Dynamo's guards hold the fixed
            # inputs' shapes; the copied ones are checked, they are few)
            if any(_key(inputs[k]) != self.signature[k] for k in self.copied):
                return self.program(*inputs)
            moved = [k for k in self.fixed if inputs[k].data_ptr() != self.pointers[k]]
            if moved and any(_key(inputs[k]) != self.signature[k] for k in moved):
                return self.program(*inputs)
        else:
            moved = []
        if self.graph is None or moved:
            if not self._recapture(inputs, moved):
                return self.program(*inputs)
        elif self._results_alive():
            self.held += 1
            return self.program(*inputs)
        for k in self.copied:
            self.static_inputs[k].copy_(inputs[k])
        assert self.graph is not None
        self.graph.replay()
        self.replays += 1
        self.program._finish()
        return [o.detach() for o in self.static_outputs]

    # -- capture

    def _recapture(self, inputs: tuple[torch.Tensor, ...], moved: list[int]) -> bool:
        """Capture the graph (again, where fixed inputs moved); False: run without it."""
        if self.graph is None:  # the first capture: inputs that stayed put are read in place
            self.copied = {
                k for k, x in enumerate(inputs) if x.data_ptr() != self.first_pointers[k]
            }
        else:
            if self._results_alive():  # a new capture must not reuse memory a result holds
                return False
            self._drop()
            if self.captures > RECAPTURES:
                self.disabled = f"its inputs moved {RECAPTURES} times"
                return False
            self.copied |= set(moved)
        self._capture(inputs)
        outputs_at = {o.untyped_storage().data_ptr() for o in self.static_outputs}
        aliased = self._copied_storages() & outputs_at
        if aliased or _use_count is None:
            self._drop()
            self.disabled = (
                "it returns a view of a copied input" if aliased else "this torch cannot count uses"
            )
            return False
        return True

    def _copied_storages(self) -> set[int]:
        return {self.static_inputs[k].untyped_storage().data_ptr() for k in self.copied}

    def _drop(self) -> None:
        self.graph = None
        self.static_outputs = []
        self.owned = []
        self.static_inputs = []

    def _capture(self, inputs: tuple[torch.Tensor, ...]) -> None:
        self.captures += 1
        self.signature = [_key(x) for x in inputs]
        self.static_inputs = [
            torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)
            if k in self.copied
            else x
            for k, x in enumerate(inputs)
        ]
        self.pointers = [0 if k in self.copied else x.data_ptr() for k, x in enumerate(inputs)]
        self.fixed = [k for k in range(len(inputs)) if k not in self.copied]
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
        # inputs the graph reads in place are not the graph's: only its own memory is watched
        inputs_at = {x.untyped_storage().data_ptr() for x in inputs}
        seen: dict[int, torch.Tensor] = {}
        for o in self.static_outputs:
            at = o.untyped_storage().data_ptr()
            if at not in inputs_at:
                seen.setdefault(at, o)
        self.owned = [(o, _storage_uses(o)) for o in seen.values()] if _use_count else []

    def _results_alive(self) -> bool:
        return any(_storage_uses(o) > uses for o, uses in self.owned)
