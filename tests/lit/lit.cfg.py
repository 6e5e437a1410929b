# lit configuration for FIR's FileCheck golden tests. Run: lit -v tests/lit
import os
import shutil
import sys

import lit.formats

config.name = "FIR"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".fir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["Inputs"]  # noqa: F821

# Tools come from the environment FIR is installed in; filecheck from the same place.
bindir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])  # noqa: F821
for var in ("HOME", "TMPDIR", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]  # noqa: F821
# the side of turned tiles is measured per machine (fir.backends.cpu_tuning): the golden
# tests fix it at the default, 64
config.environment["FIR_TURNED_SIDE"] = "64"  # noqa: F821
filecheck = shutil.which("filecheck", path=config.environment["PATH"])  # noqa: F821
if filecheck is None:
    lit_config.fatal("filecheck not found: pip install filecheck")  # noqa: F821
config.substitutions.append(("%python", sys.executable))  # noqa: F821
