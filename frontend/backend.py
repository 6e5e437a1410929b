"""The former name of :mod:`fir.frontend.dynamo` (the ``torch.compile`` entry), kept for code
outside FIR that imports it (PyTorch's Inductor tests under ``shared/conformance``): importing
it gives that module itself, so its state (``COMPILED``, ``FALLBACKS``) is the same."""

import sys

from fir.frontend import dynamo

sys.modules[__name__] = dynamo
