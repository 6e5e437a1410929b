"""The runtime every back end shares: what runs a compiled program on torch tensors.

* :mod:`.program`: :class:`CompiledProgram`, the general call (inputs checked and laid out,
  steps walked, storages allocated as the memory plan says, outputs returned as eager would);
* :mod:`.fast_call` and :mod:`.call_source`: a static program's call resolved once and written
  out as a Python function (kernel launches, extern calls, allocations);
* :mod:`.buffers`: allocation (a pool for large buffers); :mod:`.layouts`: storages and views;
* :mod:`.cuda_graphs`: a CUDA program captured in a CUDA graph.

The back ends' own parts (``cpp``, ``llvm``, ``triton``) build kernels; this package calls them.
"""

from .compiled_program import (
    CompiledProgram,
    Kernels,
    RuntimeInputError,
    element_count,
    size_function,
)

__all__ = ["CompiledProgram", "Kernels", "RuntimeInputError", "element_count", "size_function"]
