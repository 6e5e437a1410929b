"""The kernel cache never loads code it did not make: a library, an object or a Triton module
planted in the cache folder (with a matching ``.sha256`` beside it, under the very key a program
uses) is not loaded when it is owned by another user, writable by others, reached through a
symbolic link, or sits in a folder that is not private; and the C++ compiler never reads its
source from the cache folder.

Each planted entry would show itself if it ran: the library has a constructor that creates a
file, the object computes ``neg`` where the program computes ``exp``, the module creates a file
at import."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
from fir.backends.cache import Cache

torch = pytest.importorskip("torch")

NOBODY = 65534
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a file to another uid (os.chown) needs root"
)


def _program(op: str) -> str:
    return f"func @f(%x: f32[16]) -> (f32[16]) {{\n  %y = {op} %x : f32[16]\n  return %y\n}}\n"


def _plan(op: str = "exp"):  # type: ignore[no-untyped-def]
    from fir.backends.plan import plan_module
    from fir.ir.parser import parse_module
    from fir.passes.pipeline import parse_pipeline

    return plan_module(parse_pipeline("fusion").run(parse_module(_program(op), "<test>")))[0]


def _runs_exp(kernels) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn(16)
    y = torch.empty_like(x)
    (name,) = kernels.names()
    assert kernels.call(name, [x.data_ptr(), y.data_ptr()], []) == (0, 0)
    torch.testing.assert_close(y, torch.exp(x))


def _plant(folder: Path, name: str, data: bytes, owner: int | None = None) -> Path:
    """Entry ``name`` with ``data`` and a checksum that agrees, as an attacker would leave it."""
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / name
    entry.write_bytes(data)
    marker = folder / (name + ".sha256")
    marker.write_text(hashlib.sha256(data).hexdigest() + "\n")
    if owner is not None:
        for p in (entry, marker):
            os.chown(p, owner, -1)
    return entry


# ---------------------------------------------------------------------------------------------
# a planted shared library (the C++ back end)


@pytest.fixture(scope="module")
def evil_so(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Path]:
    """The bytes of a library whose constructor creates a file (the returned path)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    where = tmp_path_factory.mktemp("evil")
    ran = where / "constructor-ran"
    (where / "evil.c").write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void planted(void) {\n"
        f'  FILE *f = fopen("{ran}", "w");\n'
        "  if (f) fclose(f);\n"
        "}\n"
    )
    subprocess.run(
        [cc, "-shared", "-fPIC", str(where / "evil.c"), "-o", str(where / "evil.so")], check=True
    )
    return (where / "evil.so").read_bytes(), ran


def _library_name() -> str:
    # the key as compile_source computes it (spelt out: the test runs on older code too)
    from fir.backends.cache import cache_key
    from fir.backends.cpp import render_program
    from fir.backends.cpp.build import compiler, compiler_identity, cpu_identity, flags

    cxx = tuple(compiler())
    identity = compiler_identity(cxx)
    flag_list = flags(identity)
    source = render_program(_plan())
    return cache_key(source, " ".join(cxx), identity, " ".join(flag_list), cpu_identity()) + ".so"


def _build_cpp(root: Path):  # type: ignore[no-untyped-def]
    from fir.backends.cpp import build_program

    return build_program(_plan(), Cache("cpp", root))


def test_the_planted_library_would_run_if_loaded(
    evil_so: tuple[bytes, Path], tmp_path: Path
) -> None:
    # the check the other tests rely on: loading the planted library leaves its mark
    import ctypes

    data, ran = evil_so
    (tmp_path / "copy.so").write_bytes(data)
    ctypes.CDLL(str(tmp_path / "copy.so"))
    assert ran.exists()
    ran.unlink()


@needs_root
def test_a_library_owned_by_another_user_is_not_loaded(
    evil_so: tuple[bytes, Path], tmp_path: Path
) -> None:
    data, ran = evil_so
    entry = _plant(tmp_path / "cpp", _library_name(), data, owner=NOBODY)
    os.chmod(tmp_path, 0o700)
    with pytest.warns(RuntimeWarning, match=f"owned by uid {NOBODY}"):
        kernels = _build_cpp(tmp_path)
    assert not ran.exists()
    assert kernels.path == entry and entry.lstat().st_uid == os.geteuid()  # replaced by ours
    _runs_exp(kernels)


def test_a_library_others_can_write_is_not_loaded(
    evil_so: tuple[bytes, Path], tmp_path: Path
) -> None:
    data, ran = evil_so
    entry = _plant(tmp_path / "cpp", _library_name(), data)
    entry.chmod(0o666)
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        kernels = _build_cpp(tmp_path)
    assert not ran.exists()
    _runs_exp(kernels)


def test_a_linked_library_is_not_followed(evil_so: tuple[bytes, Path], tmp_path: Path) -> None:
    data, ran = evil_so
    elsewhere = _plant(tmp_path / "elsewhere", _library_name(), data)
    folder = tmp_path / "cache" / "cpp"
    folder.mkdir(parents=True)
    (folder / elsewhere.name).symlink_to(elsewhere)
    (folder / (elsewhere.name + ".sha256")).symlink_to(
        elsewhere.with_name(elsewhere.name + ".sha256")
    )
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        kernels = _build_cpp(tmp_path / "cache")
    assert not ran.exists()
    assert not (folder / elsewhere.name).is_symlink()  # the link was replaced, not written through
    assert elsewhere.read_bytes() == data
    _runs_exp(kernels)


@pytest.mark.parametrize("folder", ["root", "cpp"])
@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o1777])
def test_a_folder_others_can_write_is_not_used(
    evil_so: tuple[bytes, Path], tmp_path: Path, folder: str, mode: int
) -> None:
    data, ran = evil_so
    root = tmp_path / "cache"
    _plant(root / "cpp", _library_name(), data)  # ours, but anyone could have put it there
    (root if folder == "root" else root / "cpp").chmod(mode)
    with pytest.warns(RuntimeWarning, match="not private: .* writable by group or others"):
        kernels = _build_cpp(root)
    assert not ran.exists()
    assert not str(kernels.path).startswith(str(root))  # a private temporary folder instead
    _runs_exp(kernels)


@needs_root
@pytest.mark.parametrize("folder", ["root", "cpp"])
def test_a_folder_owned_by_another_user_is_not_used(
    evil_so: tuple[bytes, Path], tmp_path: Path, folder: str
) -> None:
    data, ran = evil_so
    root = tmp_path / "cache"
    _plant(root / "cpp", _library_name(), data)
    os.chmod(root, 0o700)
    os.chmod(root / "cpp", 0o700)
    os.chown(root if folder == "root" else root / "cpp", NOBODY, -1)
    with pytest.warns(RuntimeWarning, match=f"not private: .* owned by uid {NOBODY}"):
        kernels = _build_cpp(root)
    assert not ran.exists()
    assert not str(kernels.path).startswith(str(root))
    _runs_exp(kernels)


@pytest.mark.parametrize("folder", ["root", "cpp"])
def test_a_linked_folder_is_not_followed(
    evil_so: tuple[bytes, Path], tmp_path: Path, folder: str
) -> None:
    data, ran = evil_so
    real = tmp_path / "real"
    _plant(real / "cpp", _library_name(), data)
    os.chmod(real, 0o700)
    os.chmod(real / "cpp", 0o700)
    if folder == "root":
        root = tmp_path / "link"
        root.symlink_to(real)
    else:
        root = tmp_path / "cache"
        root.mkdir(mode=0o700)
        (root / "cpp").symlink_to(real / "cpp")
    with pytest.warns(RuntimeWarning, match="not private: .* is a symbolic link"):
        kernels = _build_cpp(root)
    assert not ran.exists()
    assert not str(kernels.path).startswith(str(real))
    _runs_exp(kernels)


def test_a_folder_above_that_others_can_write_is_not_trusted(tmp_path: Path) -> None:
    # whoever can write the folder above the cache can rename the cache away and put another
    # in its place between a check and a load; a sticky folder (/tmp) does not let them
    above = tmp_path / "shared"
    above.mkdir()
    above.chmod(0o777)
    with pytest.warns(RuntimeWarning, match="not sticky"):
        Cache("cpp", above / "fir").dir  # noqa: B018
    above.chmod(0o1777)
    cache = Cache("cpp", above / "fir")
    assert cache.dir == above / "fir" / "cpp" and not cache.fell_back


def test_a_linked_folder_above_the_cache_is_resolved(tmp_path: Path) -> None:
    # ~/.cache may be a link to a scratch disk: the cache uses the real path from then on, so
    # the link cannot be turned elsewhere between a check and a load
    (tmp_path / "scratch").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "scratch")
    cache = Cache("cpp", tmp_path / "home" / "fir")
    assert cache.dir == tmp_path / "scratch" / "fir" / "cpp" and not cache.fell_back


def test_new_folders_are_private(tmp_path: Path) -> None:
    old = os.umask(0)  # even with a permissive umask
    try:
        cache = Cache("cpp", tmp_path / "a" / "b" / "fir")
        cache.store("e", lambda p: p.write_bytes(b"x"))
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "fir", cache.dir):
        st = folder.lstat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert stat.S_IMODE(cache.path("e").lstat().st_mode) & 0o077 == 0


def test_the_temporary_folder_is_private(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    with pytest.warns(RuntimeWarning, match="temporary folder"):
        folder = Cache("t", tmp_path).dir
    st = folder.lstat()
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    from fir.backends.cache import private_folder

    assert private_folder(folder) == folder


# ---------------------------------------------------------------------------------------------
# the C++ compiler's source


def test_the_compiler_reads_a_private_copy_of_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, evil_so: tuple[bytes, Path]
) -> None:
    # an attacker who swaps the cache's .cpp between its writing and the compilation gets
    # nothing: the compiler never reads it
    from fir.backends.cpp import compiler as cpp_compiler

    _, ran = evil_so
    real_run = subprocess.run
    seen: list[list[str]] = []
    folders: list[os.stat_result] = []  # of the source and the library, while g++ runs
    hostile = textwrap.dedent(
        f"""
        #include <cstdio>
        __attribute__((constructor)) static void planted() {{
          if (FILE *f = std::fopen("{ran}", "w")) std::fclose(f);
        }}
        """
    )

    def run(cmd, *args, **kwargs):  # type: ignore[no-untyped-def]
        if "-o" in cmd:
            seen.append(list(cmd))
            folders.extend(Path(a).parent.lstat() for a in cmd if a.endswith((".cpp", ".so")))
            for cpp in (tmp_path / "cpp").glob("*.cpp"):
                cpp.write_text(hostile)  # the swap, at the last moment
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(cpp_compiler.subprocess, "run", run)
    kernels = _build_cpp(tmp_path)
    (cmd,) = seen
    (source,) = [a for a in cmd if a.endswith(".cpp")]
    output = cmd[cmd.index("-o") + 1]
    for path in (source, output):
        assert not Path(path).resolve().is_relative_to(tmp_path.resolve())
    assert len(folders) == 2
    for st in folders:
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert not Path(source).parent.exists()  # removed after the build
    assert not ran.exists()
    _runs_exp(kernels)


# ---------------------------------------------------------------------------------------------
# a planted object (the LLVM back end)


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, bytes]:
    """The object name the ``exp`` program looks up, and the object of the ``neg`` program
    (same kernel names, wrong results)."""
    pytest.importorskip("llvmlite")
    from fir.backends.llvm import build_program
    from fir.backends.llvm.build import object_key

    scratch = tmp_path_factory.mktemp("objects")
    wanted = build_program(_plan("exp"), Cache("llvm", scratch))
    neg = build_program(_plan("neg"), Cache("llvm", scratch))
    return object_key(wanted.ir) + ".o", neg.object


def _build_llvm(root: Path):  # type: ignore[no-untyped-def]
    from fir.backends.llvm import build_program

    return build_program(_plan("exp"), Cache("llvm", root))


def test_the_planted_object_would_compute_neg(tmp_path: Path, objects: tuple[str, bytes]) -> None:
    # the check the other tests rely on: an object planted by this user is used as it is
    name, neg = objects
    _plant(tmp_path / "llvm", name, neg)
    kernels = _build_llvm(tmp_path)
    x = torch.randn(16)
    y = torch.empty_like(x)
    kernels.call("y", [x.data_ptr(), y.data_ptr()], [])
    torch.testing.assert_close(y, -x)


@needs_root
def test_an_object_owned_by_another_user_is_not_loaded(
    tmp_path: Path, objects: tuple[str, bytes]
) -> None:
    from fir.backends.llvm.build import STATS

    name, neg = objects
    _plant(tmp_path / "llvm", name, neg, owner=NOBODY)
    before = STATS["codegen"]
    with pytest.warns(RuntimeWarning, match=f"owned by uid {NOBODY}"):
        kernels = _build_llvm(tmp_path)
    assert STATS["codegen"] == before + 1
    _runs_exp(kernels)


def test_a_linked_object_is_not_followed(tmp_path: Path, objects: tuple[str, bytes]) -> None:
    name, neg = objects
    elsewhere = _plant(tmp_path / "elsewhere", name, neg)
    folder = tmp_path / "cache" / "llvm"
    folder.mkdir(parents=True)
    (folder / name).symlink_to(elsewhere)
    (folder / (name + ".sha256")).symlink_to(elsewhere.with_name(name + ".sha256"))
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        kernels = _build_llvm(tmp_path / "cache")
    _runs_exp(kernels)
    assert elsewhere.read_bytes() == neg


def test_an_object_in_a_folder_others_can_write_is_not_loaded(
    tmp_path: Path, objects: tuple[str, bytes]
) -> None:
    name, neg = objects
    _plant(tmp_path / "llvm", name, neg)
    (tmp_path / "llvm").chmod(0o777)
    with pytest.warns(RuntimeWarning, match="not private"):
        kernels = _build_llvm(tmp_path)
    _runs_exp(kernels)


# ---------------------------------------------------------------------------------------------
# a planted Triton module


def _module_name(source: str) -> str:
    pytest.importorskip("triton")
    from fir.backends.cache import cache_key
    from fir.backends.triton.build import triton_version

    return f"fir_{cache_key(source, triton_version())[:32]}.py"


def _hostile_module(ran: Path) -> bytes:
    return f"open({str(ran)!r}, 'w').close()\nVALUE = 'planted'\n".encode()


@needs_root
def test_a_module_owned_by_another_user_is_not_imported(tmp_path: Path) -> None:
    from fir.backends.triton.build import load_module, module_path

    source = "VALUE = 'ours (owned)'\n"
    ran = tmp_path / "import-ran"
    _plant(tmp_path / "triton", _module_name(source), _hostile_module(ran), owner=NOBODY)
    with pytest.warns(RuntimeWarning, match=f"owned by uid {NOBODY}"):
        path = module_path(source, Cache("triton", tmp_path))
    assert load_module(path).VALUE == "ours (owned)"
    assert not ran.exists()


def test_a_linked_module_is_not_followed(tmp_path: Path) -> None:
    from fir.backends.triton.build import load_module, module_path

    source = "VALUE = 'ours (linked)'\n"
    ran = tmp_path / "import-ran"
    name = _module_name(source)
    elsewhere = _plant(tmp_path / "elsewhere", name, _hostile_module(ran))
    folder = tmp_path / "cache" / "triton"
    folder.mkdir(parents=True)
    (folder / name).symlink_to(elsewhere)
    (folder / (name + ".sha256")).symlink_to(elsewhere.with_name(name + ".sha256"))
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        path = module_path(source, Cache("triton", tmp_path / "cache"))
    assert load_module(path).VALUE == "ours (linked)"
    assert not ran.exists()


def test_a_module_in_a_folder_others_can_write_is_not_imported(tmp_path: Path) -> None:
    from fir.backends.triton.build import load_module, module_path

    source = "VALUE = 'ours (shared folder)'\n"
    ran = tmp_path / "import-ran"
    _plant(tmp_path / "triton", _module_name(source), _hostile_module(ran))
    (tmp_path / "triton").chmod(0o777)
    with pytest.warns(RuntimeWarning, match="not private"):
        path = module_path(source, Cache("triton", tmp_path))
    assert load_module(path).VALUE == "ours (shared folder)"
    assert not ran.exists()


def test_a_module_that_is_not_its_source_is_written_again(tmp_path: Path) -> None:
    # even an entry the cache trusts is imported only if it holds exactly the source it is
    # named for (its checksum agreeing proves nothing)
    from fir.backends.triton.build import load_module, module_path

    source = "VALUE = 'ours (content)'\n"
    ran = tmp_path / "import-ran"
    entry = _plant(tmp_path / "triton", _module_name(source), _hostile_module(ran))
    path = module_path(source, Cache("triton", tmp_path))
    assert path == entry and entry.read_text() == source
    assert load_module(path).VALUE == "ours (content)"
    assert not ran.exists()
