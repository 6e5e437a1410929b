"""The PyTorch frontend: FX import (:mod:`.fx_import`), the aten → FIR converter tables, one
module per op family (:mod:`.aten`), the emitter they write FIR ops with (:mod:`.emitter`), the
``torch.compile`` backend and ``torch.export`` capture (:mod:`.dynamo`), ``fir-import``'s library
(:mod:`.targets`) and :mod:`.explain`. Nothing is imported here, so ``import fir.frontend`` does
not import torch."""
