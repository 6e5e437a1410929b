"""The command-line tools: exit codes, no tracebacks, no torch in fir-opt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fir.tools import fir_opt, fir_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.fir"))

RMS = """func @rms_norm(%x: f32[8, 16], %w: f32[16]) -> (f32[8, 16]) {
  %sq = mul %x, %x : f32[8, 16]
  %ms = mean %sq {dims = [1], keepdim = true} : f32[8, 1]
  %e = add %ms, 1e-06 : f32[8, 1]
  %r = rsqrt %e : f32[8, 1]
  %n = mul %x, %r : f32[8, 16]
  %y = mul %n, %w : f32[8, 16]
  return %y
}
"""


def last_line_of_fresh_python(code: str) -> str:
    """The last line ``code`` prints in a new interpreter (whose imports are its own)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_fir_opt_does_not_import_torch_or_sympy(tmp_path: Path) -> None:
    src = tmp_path / "rms.fir"
    src.write_text(RMS)
    code = (
        "import sys\n"
        "from fir.tools.fir_opt import main\n"
        f"rc = main([{str(src)!r}, '-p', 'cleanup'])\n"
        "print(rc, 'torch' in sys.modules, 'sympy' in sys.modules)\n"
    )
    assert last_line_of_fresh_python(code) == "0 False False"


@pytest.mark.parametrize("target", ["plan", "cpp", "llvm"])
def test_fir_translate_to_cpu_code_does_not_import_torch(tmp_path: Path, target: str) -> None:
    """Printing a kernel's plan, C++ or LLVM IR is text to text, like fir-opt: torch's import
    (about a second) must not come with it (the llvm build reaches the runtime package, whose
    program class imports torch: that one is imported at first use)."""
    src = tmp_path / "rms.fir"
    src.write_text(RMS)
    code = (
        "import sys, io, contextlib\n"
        "from fir.tools.fir_translate import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    rc = main([{str(src)!r}, '-p', 'fusion', '--target', {target!r}])\n"
        "print(rc, len(out.getvalue()) > 0, 'torch' in sys.modules)\n"
    )
    assert last_line_of_fresh_python(code) == "0 True False"


def test_fir_opt_round_trips_and_writes_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "rms.fir"
    src.write_text(RMS)
    dst = tmp_path / "out.fir"
    assert fir_opt.main([str(src), "-o", str(dst)]) == 0
    assert dst.read_text() == RMS


def test_fir_opt_user_errors_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.fir"
    bad.write_text(RMS.replace("rsqrt", "rsqrtt"))
    assert fir_opt.main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:5:8: error: unknown op 'rsqrtt'; did you mean 'rsqrt'?" in err
    assert "Traceback" not in err
    assert fir_opt.main([str(tmp_path / "missing.fir")]) == 1
    assert fir_opt.main([str(bad), "-p", "nosuchpass"]) == 1
    with pytest.raises(SystemExit) as e:
        fir_opt.main(["--no-such-flag"])
    assert e.value.code == 1


def test_split_input_file_keeps_line_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = RMS + "// -----\n" + RMS.replace("rsqrt", "rsqrtt") + "// -----\n" + RMS
    src = tmp_path / "split.fir"
    src.write_text(text)
    assert fir_opt.main([str(src), "--split-input-file"]) == 1
    out, err = capsys.readouterr()
    assert f"{src}:15:8: error: unknown op 'rsqrtt'" in err
    assert out == RMS + "// -----\n" + RMS


def test_fir_opt_console_script_runs() -> None:
    out = subprocess.run(["fir-opt", "--list-passes"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "canonicalize" in out.stdout and "cleanup" in out.stdout


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_fir_run_examples_with_pipeline_check(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fir_run.main([str(path), "-p", "cleanup", "--check"]) == 0
    out = capsys.readouterr().out
    assert "output #0" in out and "agree before and after" in out


def test_fir_run_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.fir"
    bad.write_text("func @f(%x: f32[4]) -> (f32[4]) {\n  return %y\n}\n")
    assert fir_run.main([str(bad)]) == 1
    assert "use of undefined value %y" in capsys.readouterr().err


# sizes beyond any address space: no allocator grants them, whatever its overcommit policy
HUGE_INPUT = (
    "func @f(%x: f32[99999999999999]) -> (f32[99999999999999]) {\n"
    "  %y = exp %x : f32[99999999999999]\n"
    "  return %y\n}\n"
)
HUGE_RESULT = (
    "func @f(%x: f32[4]) -> (f32[]) {\n"
    "  %y = full 1.0 : f32[99999999999999]\n"
    "  %s = sum %y : f32[]\n"
    "  return %s\n}\n"
)


@pytest.mark.parametrize("check", [False, True])
def test_fir_run_input_too_large_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], check: bool
) -> None:
    src = tmp_path / "big.fir"
    src.write_text(HUGE_INPUT)
    assert fir_run.main([str(src)] + (["--check"] if check else [])) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        "fir-run: error: cannot allocate input %x (f32[99999999999999]): "
        "363.8 TiB (399999999999996 bytes)\n"
    )
    assert captured.out == ""


def test_fir_run_result_too_large_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "big.fir"
    src.write_text(HUGE_RESULT)
    assert fir_run.main([str(src)]) == 1
    assert capsys.readouterr().err == (
        f"{src}:2:8: error: %y = full: cannot allocate %y (f32[99999999999999]): "
        "363.8 TiB (399999999999996 bytes)\n"
    )


def test_fir_run_console_script_allocation_error_has_no_traceback(tmp_path: Path) -> None:
    src = tmp_path / "big.fir"
    src.write_text(HUGE_INPUT)
    proc = subprocess.run(
        [sys.executable, "-m", "fir.tools.fir_run", str(src)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("fir-run: error: cannot allocate input %x")
