"""The on-disk cache (backends/cache.py) and the C++ back end's use of it: atomic entries,
checksums (a corruption check only), a cache that cannot be written, two processes building the
same library at once. What the cache refuses to trust (planted entries, links, folders that are
not private) is tested in test_hostile_cache.py."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fir.backends.cache import Cache, cache_key, cache_root

SOURCE = textwrap.dedent(
    """
    func @f(%x: f32[64, 48]) -> (f32[64, 48]) {
      %y = softmax %x {dim = 1} : f32[64, 48]
      return %y
    }
    """
)


def _plan(text: str = SOURCE):  # type: ignore[no-untyped-def]
    from fir.backends.plan import plan_module
    from fir.ir.parser import parse_module
    from fir.passes.pipeline import parse_pipeline

    return plan_module(parse_pipeline("fusion").run(parse_module(text, "<test>")))[0]


def _run_softmax(kernels) -> None:  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 48)
    y = torch.empty_like(x)
    (name,) = kernels.names()
    assert kernels.call(name, [x.data_ptr(), y.data_ptr()], []) == (0, 0)
    torch.testing.assert_close(y, torch.softmax(x, -1))


# ---------------------------------------------------------------------------------------------
# the cache on its own


def test_root_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FIR_CACHE_DIR", str(tmp_path / "here"))
    assert cache_root() == tmp_path / "here"
    monkeypatch.delenv("FIR_CACHE_DIR")
    assert cache_root() == Path.home() / ".cache" / "fir"


def test_keys_separate_their_parts() -> None:
    assert cache_key("ab", "c") != cache_key("a", "bc")
    assert cache_key("ab", "c") == cache_key("ab", "c")
    assert cache_key("x", b"y") == cache_key("x", "y")


def test_entries_are_complete_or_missing(tmp_path: Path) -> None:
    cache = Cache("t", tmp_path)
    assert cache.lookup("e.bin") is None
    path = cache.store("e.bin", lambda p: p.write_bytes(b"\x7fELF" + bytes(1000)))
    assert cache.lookup("e.bin") == path
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    with open(path, "r+b") as f:  # truncated after the fact
        f.truncate(10)
    assert cache.lookup("e.bin") is None
    path.with_name("e.bin.sha256").unlink()  # entry without its checksum (a crash between)
    cache.store("e.bin", lambda p: p.write_bytes(b"new"))
    assert cache.lookup("e.bin") == path and path.read_bytes() == b"new"


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    cache = Cache("t", tmp_path)

    def produce(p: Path) -> None:
        p.write_bytes(b"partial")
        raise RuntimeError("the compiler died")

    with pytest.raises(RuntimeError):
        cache.store("e.bin", produce)
    assert list((tmp_path / "t").iterdir()) == []


def test_a_folder_that_cannot_exist_falls_back(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = Cache("t", blocker / "cache")  # mkdir fails: NotADirectoryError (even as root)
    with pytest.warns(RuntimeWarning, match="not writable"):
        path = cache.store("e.bin", lambda p: p.write_bytes(b"data"))
    assert cache.fell_back and not str(path).startswith(str(blocker))
    assert cache.lookup("e.bin") == path


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_full_or_read_only_folder_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    cache = Cache("t", tmp_path)
    real = os.replace

    def replace(src: str | Path, dst: str | Path) -> None:
        if str(dst).startswith(str(tmp_path)):
            raise OSError(code, os.strerror(code))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.warns(RuntimeWarning, match="temporary folder"):
        path = cache.store("e.bin", lambda p: p.write_bytes(b"data"))
    assert path.read_bytes() == b"data" and not str(path).startswith(str(tmp_path))
    assert not [p for p in (tmp_path / "t").iterdir()]  # no temporary file left behind


# ---------------------------------------------------------------------------------------------
# the C++ back end through the cache


def test_a_build_is_reused(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from fir.backends.cpp import build_program

    cache = Cache("cpp", tmp_path)
    first = build_program(_plan(), cache)
    libraries = list((tmp_path / "cpp").glob("*.so"))
    second = build_program(_plan(), cache)
    assert first.path == second.path and list((tmp_path / "cpp").glob("*.so")) == libraries
    assert list((tmp_path / "cpp").glob("*.cpp"))  # the source stays beside it
    _run_softmax(second)


def test_a_truncated_library_is_rebuilt_not_loaded(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from fir.backends.cpp import build_program, compile_source, render_program

    cache = Cache("cpp", tmp_path)
    path = compile_source(render_program(_plan()), cache)  # built, not loaded here
    size = path.stat().st_size
    with open(path, "r+b") as f:  # as if the disk lost its end
        f.truncate(size // 3)
    again = build_program(_plan(), cache)  # dlopen of the stump would crash the process
    assert again.path == path and path.stat().st_size == size
    _run_softmax(again)


def test_a_library_rebuilt_in_this_process_is_loaded_afresh(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from fir.backends.cpp import build_program

    cache = Cache("cpp", tmp_path)
    first = build_program(_plan(), cache)
    first.path.with_name(first.path.name + ".sha256").write_text("0\n")  # a bad checksum
    again = build_program(_plan(), cache)  # rebuilt: a new file under the same name
    assert again.lib is not first.lib
    _run_softmax(again)


def test_an_unwritable_cache_still_builds(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from fir.backends.cpp import build_program

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.warns(RuntimeWarning, match="not writable"):
        kernels = build_program(_plan(), Cache("cpp", blocker / "cache"))
    _run_softmax(kernels)


def test_the_compiler_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import shutil

    from fir.backends.cpp import build_program

    gxx = shutil.which("c++") or shutil.which("g++")
    if gxx is None:
        pytest.skip("no C++ compiler")
    wrapper = tmp_path / "my-c++"
    wrapper.write_text(f'#!/bin/sh\nexec {gxx} "$@"\n')
    wrapper.chmod(0o755)
    cache = Cache("cpp", tmp_path / "cache")
    a = build_program(_plan(), cache)
    monkeypatch.setenv("CXX", str(wrapper))
    b = build_program(_plan(), cache)
    assert a.path != b.path


_WORKER = """
import sys, time
from pathlib import Path
sys.path[:0] = [{here!r}, {tests!r}]
from test_cache import _plan, _run_softmax
from fir.backends.cache import Cache
from fir.backends.cpp import build_program
go = Path({go!r})
while not go.exists():
    time.sleep(0.001)
kernels = build_program(_plan(), Cache("cpp", {root!r}))
_run_softmax(kernels)
print(kernels.path)
"""


def test_two_processes_build_the_same_library_at_once(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    go = tmp_path / "go"
    script = _WORKER.format(
        here=str(Path(__file__).parent),
        tests=str(Path(__file__).parents[1]),
        go=str(go),
        root=str(tmp_path),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    go.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
    paths = {out.decode().strip() for out, _ in outs}
    assert len(paths) == 1
    (path,) = paths
    assert Cache("cpp", tmp_path).lookup(Path(path).name) == Path(path)
    leftovers = [p for p in (tmp_path / "cpp").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
