"""The PyTorch frontend: FX import (:mod:`.fx_import`), the aten → FIR table (:mod:`.aten_ops`),
the ``torch.compile`` backend and ``torch.export`` capture (:mod:`.backend`), and
:mod:`.explain`. Nothing is imported here, so ``import fir.frontend`` does not import torch."""
