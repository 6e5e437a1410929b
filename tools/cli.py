"""What every FIR command-line tool shares: usage errors and exits."""

from __future__ import annotations

import argparse
import codecs
import os
import re
import sys
import time
from collections.abc import Callable
from typing import NoReturn


class ArgParser(argparse.ArgumentParser):
    """Usage errors exit with status 1 (a user error), like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


# The largest program text a tool reads. Programs are small (a 10,000-op pipeline is about
# 2 MB); the limit is there so that an endless input (``/dev/zero``, a pipe that never closes)
# ends in an error instead of filling the memory.
MAX_INPUT_BYTES = 256 * 2**20
_CHUNK = 2**20
# Characters no FIR text holds: C0 controls other than tab, newline, carriage return and form
# feed, and DEL. A NUL says "binary file"; an escape sequence must never reach the terminal
# through an error message that quotes the source line.
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")


class InputError(Exception):
    """The input of a tool cannot be read as FIR text: ``message`` says why, ``loc``
    (``file:line:col``) where, when a place in the text is to blame."""

    def __init__(self, message: str, loc: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc

    def render(self, prog: str) -> str:
        """The one line a tool prints: ``file:line:col: error: …`` or ``prog: error: …``."""
        return f"{self.loc or prog}: error: {self.message}"


def read_input(path: str) -> str:
    """The text of ``path`` (``-``: standard input) as FIR source: UTF-8 without control
    characters, at most :data:`MAX_INPUT_BYTES`. Reads in chunks and stops at the first bad
    one, so an endless or binary input (``/dev/zero``, ``/dev/urandom``) fails at once.
    Raises :class:`InputError` (a directory, an unreadable file, binary data, too large)."""
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            return _read_stream(sys.stdin.buffer, name)
        with open(path, "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            if st.st_size > MAX_INPUT_BYTES:  # a regular file says its size: no need to read
                raise InputError(
                    f"cannot read {name}: {st.st_size} bytes, more than a FIR program may have "
                    f"({MAX_INPUT_BYTES})"
                )
            return _read_stream(f, name)
    except OSError as e:
        raise InputError(f"cannot read {name}: {e.strerror or e}") from None


def _read_stream(f: object, name: str) -> str:
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    consumed = 0
    while True:
        chunk: bytes = f.read(_CHUNK)  # type: ignore[attr-defined]
        if chunk is None:  # a non-blocking stream with nothing yet: read it as ended
            chunk = b""
        pending = len(decoder.getstate()[0])
        try:
            text = decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as e:
            at = consumed - pending + e.start
            raise InputError(f"cannot read {name}: not UTF-8 text (byte {at})") from None
        bad = _CONTROL.search(text)
        if bad is not None:
            before = "".join(parts) + text[: bad.start()]
            line = before.count("\n") + 1
            col = len(before) - (before.rfind("\n") + 1) + 1
            raise InputError(
                f"not FIR text: control character U+{ord(bad.group()):04X} (a binary file?)",
                f"{name}:{line}:{col}",
            )
        parts.append(text)
        consumed += len(chunk)
        if not chunk:
            return "".join(parts)
        if consumed > MAX_INPUT_BYTES:
            raise InputError(
                f"cannot read {name}: more than the {MAX_INPUT_BYTES} bytes a FIR program may "
                "have (an endless stream?)"
            )


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
