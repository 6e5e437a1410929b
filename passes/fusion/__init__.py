"""Stage 3, deciding what runs together: ``inline`` (which buffers are realized; the rest are
inlined into their readers by the body inliner), ``fuse`` (nodes → kernels: the fusion graph, the
legality rules and the explanation report) and ``reorder`` (loop orders and tiling hints)."""
