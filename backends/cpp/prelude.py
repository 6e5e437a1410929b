"""The C++ every translation unit starts with: the helpers that the op table names.

No C++ standard library headers beyond ``<stdint.h>``: the libm functions are declared here
(``<math.h>`` alone costs ~90 ms of every compile). Where glibc's vector math library is there
(``-DFIR_LIBMVEC``, see :mod:`.build`), the float and double functions carry
``simd("notinbranch")``, which lets GCC call their vector variants in vectorised loops; without it
a loop with ``exp`` runs one scalar call per element.

Semantics follow the reference interpreter (PyTorch's eager CPU kernels): NaN propagates through
``maximum``/``minimum``/``max``/``min``; integer arithmetic wraps; shifts by a negative amount or by the width or more give 0 (left)
or the sign (right); a float converts to a signed integer type saturating (NaN to 0) and to u8
through int64, as docs/ops.md says for ``cast``. f16 and bf16 round to
nearest even and keep NaN payloads, as torch's vectorised conversions do; the vectorised loops
convert f16 in blocks of 16 with F16C where the target has it (``fir_store_f16_block``).
"""

from pathlib import Path

# the header's text, as every generated translation unit starts (a file of its own, which a
# C++ compiler and editor read as C++; Inductor keeps its ``cpp_prefix.h`` so too)
PRELUDE = Path(__file__).with_name("prelude.h").read_text()
