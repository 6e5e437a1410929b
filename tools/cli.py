"""What every FIR command-line tool shares: usage errors and exits."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import NoReturn


class ArgParser(argparse.ArgumentParser):
    """Usage errors exit with status 1 (a user error), like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def run_main(main: Callable[[], int]) -> NoReturn:
    """Exit with ``main()``'s status; Ctrl-C is 130, a closed output pipe is not an error."""
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = 0
    # Skip the interpreter's teardown: freeing a large program object by object takes seconds
    # (2 s after a 10,000-op pipeline) and there is nothing left to clean up.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


def seconds_since_process_start() -> float | None:
    """Wall time since this process started (the interpreter's own start-up included), from
    Linux's process table; None elsewhere. Its resolution is the kernel's clock tick (10 ms)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
        start_ticks = int(fields[19])  # field 22 of stat(5), counted after the command name
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
