"""The console script's `explain` and `demo` (check/scan are tested with the harness)."""

import subprocess
import sys

import pytest

from contractions.cli import main


def test_explain_reports_groups_expansion_path_and_flops(capsys):
    assert main(["explain", "WCa,Caib,WCi->WCb", "4x4x2x3", "2x3x5x6", "4x4x2x5"]) == 0
    out = capsys.readouterr().out
    assert "W: 2 axes -> AB extents (4, 4)" in out
    assert "C: 1 axis -> C extents (2,)" in out
    assert "'ABCa,Caib,ABCi->ABCb'" in out
    assert "output shape    (4, 4, 2, 6)" in out
    assert "path" in out and "FLOPs" in out


def test_explain_with_supplement_and_co_travel(capsys):
    assert main(["explain", "WCo,WCa->Cao", "3x2x5", "3x2x4", "--len", "W=1"]) == 0
    out = capsys.readouterr().out
    assert "determined with len_W=1 (the string alone: needs one of len_W, len_C)" in out
    assert main(["explain", "WKCi,Cio->WKCo", "2x3x4x5", "4x5x6"]) == 0
    assert "WK (only the total matters)" in capsys.readouterr().out


def test_explain_error_goes_to_stderr_with_exit_2(capsys):
    assert main(["explain", "WCo,WCa->Cao", "3x2x5", "3x2x4"]) == 2
    err = capsys.readouterr().err
    assert "UnderdeterminedError" not in err and "len_W" in err


def test_bad_shape_argument_is_a_usage_error():
    with pytest.raises(SystemExit):
        main(["explain", "Wa->W", "4xq"])


def test_python_dash_m_runs_the_demo_and_it_checks_itself():
    out = subprocess.run([sys.executable, "-m", "contractions", "demo"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "all checks passed" in out.stdout
    assert "[FAILED]" not in out.stdout
