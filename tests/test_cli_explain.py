"""The console script's `explain`, `demo` and top-level options (check/scan are tested with the
harness)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from contractions import __version__, identifiability
from contractions.cli import _shape, main


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


def test_invalid_call_goes_to_stderr_with_exit_2(capsys):
    assert main(["explain", "Wa,Wa->W", "2x3x4", "3x2x4"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "size mismatch in 'Wa,Wa->W'" in err and "SizeMismatchError" not in err
    assert main(["explain", "Wa....->W", "3"]) == 2
    assert "'...'" in capsys.readouterr().err
    assert main(["explain", "Wa->a", "3x2", "--len", "K=1"]) == 2
    assert "group 'K' does not appear" in capsys.readouterr().err


def test_underdetermined_call_prints_the_report_and_what_to_pass_with_exit_1(capsys):
    assert main(["explain", "WCo,WCa->Cao", "3x2x5", "3x2x4"]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    assert f"identifiability {identifiability('WCo,WCa->Cao').describe()}\n" in out
    assert "whatever the shapes" in out
    assert "--len W=<n>   these shapes allow: --len W=0, --len W=1, --len W=2" in out
    assert "--len C=<n>   these shapes allow: --len C=0, --len C=1, --len C=2" in out
    assert "len_W=<n>" in out
    # following the advice gives the full report
    assert main(["explain", "WCo,WCa->Cao", "3x2x5", "3x2x4", "--len", "W=2"]) == 0
    assert "W: 2 axes -> AB extents (3, 2)" in capsys.readouterr().out


def test_underdetermined_call_needing_several_supplements_lists_a_completing_set(capsys):
    shapes = ["3x2x5", "3x2x4", "2x2x2x3", "2x2x2x4"]
    assert main(["explain", "WCo,WCa,KLi,KLj->CaoLij", *shapes]) == 1
    out = capsys.readouterr().out
    assert f"identifiability {identifiability('WCo,WCa,KLi,KLj->CaoLij').describe()}\n" in out
    assert "--len W=<n> --len K=<n>   these shapes allow: --len W=0 --len K=0," in out
    assert "... (12 in all)" in out
    assert main(["explain", "WCo,WCa->Cao", "3x2x5", "3x2x4x5"]) == 1
    assert "no value fits these shapes" in capsys.readouterr().out


def test_the_string_alone_reports_identifiability(capsys):
    assert main(["explain", "WCo,WCa->Cao"]) == 1
    out = capsys.readouterr().out
    assert f"identifiability {identifiability('WCo,WCa->Cao').describe()}\n" in out
    assert "--len W=<n>" in out and "--len C=<n>" in out
    assert "these shapes allow" not in out
    assert main(["explain", "WCo,WCa->Cao", "--len", "C=1"]) == 0
    assert "identifiability determined (with --len C=1)" in capsys.readouterr().out
    assert main(["explain", "WKCi,Cio->WKCo"]) == 0
    out = capsys.readouterr().out
    assert "identifiability determined" in out and "WK (only the total matters)" in out


@pytest.mark.parametrize("text,shape", [
    ("4x2x3", (4, 2, 3)), ("7", (7,)), ("0x1", (0, 1)), ("()", ()), ("scalar", ()), ("#3", 3),
    ("#0", 0)])
def test_shape_syntax(text, shape):
    assert _shape(text) == shape


@pytest.mark.parametrize("text", [
    "3xx4", "x4", "4x", "x", "", "-3", "3x-4", "+3", "2.5", "4xq", "4,2", " 4", "4 x 2", "#",
    "#-1", "#2x3", "\u0663", "1_0", "4X2"])
def test_bad_shape_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as info:
        main(["explain", "Wa->W", text])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "contractions explain: error: argument SHAPE: bad shape" in err and repr(text) in err


@pytest.mark.parametrize("flags,message", [
    (["--len", "W=1", "--len", "W=2"], "group W given twice (--len W=1 and --len W=2)"),
    (["--len", "W=1", "--len", "len_W=1"], "group W given twice"),
    (["--len", "W=-1"], "bad value 'W=-1'"),
    (["--len", "W=x"], "bad value 'W=x'"),
    (["--len", "w=1"], "bad value 'w=1'"),
    (["--len", "WC=1"], "bad value 'WC=1'"),
    (["--len", "W"], "bad value 'W'"),
])
def test_bad_or_repeated_supplement_is_a_usage_error(flags, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(["explain", "WCo,WCa->Cao", "3x2x5", "3x2x4", *flags])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "contractions explain: error: argument --len:" in err and message in err


def test_len_prefix_is_accepted(capsys):
    assert main(["explain", "WCo,WCa->Cao", "3x2x5", "3x2x4", "--len", "len_W=1"]) == 0
    assert "determined with len_W=1" in capsys.readouterr().out


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"contractions {__version__} (distribution grouped-einsum)"


def test_the_version_has_one_source():
    root = Path(__file__).resolve().parents[1]
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert not re.search(r'^version = "', pyproject, re.MULTILINE), "the version is dynamic"
    assert re.search(r'^dynamic = \["version"\]$', pyproject, re.MULTILINE)
    assert 'version = { attr = "contractions._version.__version__" }' in pyproject
    source = (root / "contractions" / "_version.py").read_text(encoding="utf-8")
    assert re.findall(r'^__version__ = "([^"]+)"$', source, re.MULTILINE) == [__version__]
    assert "__version__ =" not in (root / "contractions" / "__init__.py").read_text(encoding="utf-8")


def test_installed_distribution_reports_the_package_version():
    from importlib import metadata

    try:
        installed = metadata.version("grouped-einsum")
    except metadata.PackageNotFoundError:
        pytest.skip("grouped-einsum is not installed (a source checkout on PYTHONPATH)")
    assert installed == __version__, "the installed metadata is stale: reinstall (pip install -e .)"


@pytest.mark.parametrize("command", [[], ["demo"], ["explain"], ["check"], ["scan"]])
def test_help_has_no_markup_leftovers(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: contractions")
    for markup in ("`", "**", ":func:", ":class:", ":mod:", ":meth:", ".. "):
        assert markup not in out, f"{markup!r} in `contractions {' '.join(command)} --help`"


def test_python_dash_m_runs_the_demo_and_it_checks_itself():
    out = subprocess.run([sys.executable, "-m", "contractions", "demo"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "all checks passed" in out.stdout
    assert "[FAILED]" not in out.stdout


# ---- explain's schedule options and the bare command ------------------------------------------
THREE = ["explain", "Wa,Wab,Wb->W", "2x3", "2x3x4", "2x4"]


def test_explain_optimize_takes_a_preset_a_path_or_false(capsys):
    from contractions import explain

    assert main([*THREE, "--optimize", "[(1, 2), (0, 1)]"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == explain("Wa,Wab,Wb->W", (2, 3), (2, 3, 4), (2, 4), optimize=[(1, 2), (0, 1)])
    assert "path            [(1, 2), (0, 1)]" in out and "optimize='explicit path'" in out
    assert main([*THREE, "--optimize", "greedy"]) == 0
    assert "optimize='greedy'" in capsys.readouterr().out
    assert main([*THREE, "--optimize", "false"]) == 0
    assert "(direct, optimize='direct')" in capsys.readouterr().out


def test_explain_memory_limit_reaches_the_schedule(capsys):
    big = ["explain", "Wa,ab->Wb", "64x64", "64x64"]
    assert main([*big, "--memory-limit", "1000"]) == 0
    assert "(limit 1,000)" in capsys.readouterr().out
    assert main([*big, "--memory-limit", "1KB"]) == 0
    assert "(limit 125)" in capsys.readouterr().out  # 8-byte elements for bare shapes
    assert main([*big, "--memory-limit", "none"]) == 0
    assert "(no limit)" in capsys.readouterr().out


def test_explain_backend_names_whose_schedule_is_reported(capsys):
    assert main([*THREE, "--backend", "numpy"]) == 0
    assert "backend         numpy (" in capsys.readouterr().out
    pytest.importorskip("torch")
    assert main([*THREE, "--backend", "torch"]) == 0
    assert "backend         torch (" in capsys.readouterr().out


@pytest.mark.parametrize("flags, message", [
    (["--optimize", "bogus"], "optimize='bogus' names no path optimizer"),
    (["--optimize", "[(0, 1"], None),
    (["--memory-limit", "12QB"], "memory_limit='12QB': write a number of elements"),
    (["--memory-limit", "0"], "must be at least one element"),
])
def test_explain_bad_schedule_options_exit_2(flags, message, capsys):
    if message is None:  # a malformed path is an argparse usage error
        with pytest.raises(SystemExit) as info:
            main([*THREE, *flags])
        assert info.value.code == 2
        assert "bad path '[(0, 1'" in capsys.readouterr().err
        return
    assert main([*THREE, *flags]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err


def test_explain_unknown_backend_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main([*THREE, "--backend", "fortran"])
    assert info.value.code == 2
    assert "invalid choice: 'fortran'" in capsys.readouterr().err


def test_schedule_options_without_shapes_are_refused(capsys):
    assert main(["explain", "Wa,Wab,Wb->W", "--optimize", "greedy", "--backend", "numpy"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--optimize and --backend shape the schedule, which needs one SHAPE" in err


def test_bare_command_prints_the_help_and_exits_0_as_help_does(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: contractions")
    for command in ("demo", "explain", "check", "scan"):
        assert command in out
    assert "exits with status 0, as --help does" in out
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0 and capsys.readouterr().out == out


def test_bare_console_script():
    result = subprocess.run([sys.executable, "-m", "contractions.cli"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("usage: contractions"), result.stderr
