"""What a newcomer from numpy meets first: uppercase letters, the argument order, packed
operands, a misspelt keyword, help(contract), `contractions lint`, warnings on an `inf`, and
`contractions calibrate`'s progress.  Each error is checked for its type and its advice, and
`contractions check` is checked to give the runtime error's advice for the same mistake.
"""

from __future__ import annotations

import inspect
import io
import pydoc
import re
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from contractions import (
    ContractionError,
    KeywordError,
    OperandCountError,
    UnderdeterminedError,
    contract,
)
from contractions.cli import build_parser, main
from contractions.lint import run_check


def _findings(tmp_path: Path, source: str) -> list[str]:
    """`contractions check`'s finding lines for ``source``, each without its location."""
    path = tmp_path / "calls.py"
    path.write_text(textwrap.dedent(source))
    out = io.StringIO()
    run_check([str(path)], out=out, err=io.StringIO())
    return [line.split(": ", 1)[1] for line in out.getvalue().splitlines()]


def _message(call) -> str:
    with pytest.raises(Exception) as err:
        call()
    return str(err.value)


# ---------------------------------------------------------------- uppercase letters as numpy's
@pytest.mark.parametrize("grouped, lowercase, shapes", [
    ("IJ,JK->IK", "ij,jk->ik", [(2, 3), (3, 4)]),
    ("AB,BC", "ab,bc", [(2, 3), (3, 4)]),                  # implicit output
    ("BIJ,BJK->BIK", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...IJ,...JK->...IK", "...ij,...jk->...ik", [(5, 2, 3), (5, 3, 4)]),
])
def test_uppercase_letters_meant_for_numpy_name_the_lowercase_string(grouped, lowercase, shapes):
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in shapes]
    with pytest.raises(UnderdeterminedError) as err:
        contract(grouped, *ops)
    msg = str(err.value)
    assert msg.startswith(
        f"underdetermined subscripts {grouped!r}: UPPERCASE letters are groups of zero or more axes "
        "here, not numpy's single axes; for numpy's meaning, one axis per letter (as these operands "
        f"have), write the lowercase {lowercase!r}. As groups, the operands' ndims do not determine")
    assert re.search(r"Pass (one of|\d+ supplements together).* len_", msg)  # the grouped fix too
    # the string it suggests runs, and means what numpy means by it
    np.testing.assert_allclose(contract(lowercase, *ops), np.einsum(grouped, *ops))


def test_uppercase_letters_on_operands_of_other_ndims_name_no_string():
    a, b = np.ones((2, 3, 1)), np.ones((3, 4))
    msg = _message(lambda: contract("IJ,JK->IK", a, b))
    assert ("UPPERCASE letters are groups of zero or more axes here, not numpy's single axes "
            "(numpy's are lowercase letters, but these operands do not have one axis per letter "
            "either). As groups,") in msg
    assert "'ij,jk->ik'" not in msg


def test_a_string_in_the_dialect_gets_no_numpy_hint():
    msg = _message(lambda: contract("WCo,WCa->Cao", np.ones((3, 2, 5)), np.ones((3, 2, 4))))
    assert msg.startswith("underdetermined subscripts 'WCo,WCa->Cao': the operands' ndims do not")
    assert "UPPERCASE" not in msg


def test_check_gives_the_uppercase_advice_too(tmp_path):
    [finding] = _findings(tmp_path, """\
        from contractions import contract
        y = contract('IJ,JK->IK', a, b)
        """)
    assert finding == (
        "CT107 'IJ,JK->IK' needs a supplement the call does not pass: UPPERCASE letters are groups "
        "of zero or more axes here, not numpy's single axes; for numpy's meaning, one axis per "
        "letter, write the lowercase 'ij,jk->ik'; as groups, the string cannot decide the lengths "
        "of I, J, K; pass one of len_I, len_J, len_K")


# ------------------------------------------------------------------- the subscripts come first
def test_subscripts_after_an_operand_are_named_and_put_first():
    a = np.ones((2, 3))
    with pytest.raises(TypeError, match=re.escape(
            "subscripts must be a str, got ndarray first; the subscripts come first, as a str: "
            "contract('ij->i', ...) with the operands after it")):
        contract(a, "ij->i")
    assert isinstance(_exception_of(lambda: np.einsum(a, "ij->i")), TypeError)   # numpy's type


@pytest.mark.parametrize("first, shown", [(None, "NoneType (None)"), (3, "int (3)")])
def test_a_first_argument_that_is_no_string_says_the_subscripts_come_first(first, shown):
    with pytest.raises(TypeError, match=re.escape(
            f"subscripts must be a str, got {shown}; the subscripts come first, as a str, e.g. "
            "contract('ij,jk->ik', a, b) (numpy's sublist form follows each operand by a list of "
            "its axis numbers instead: contract(a, [0, 1], b, [1, 2], [0, 2]))")):
        contract(first, np.ones((2, 3)))


def test_bytes_subscripts_are_decoded_in_the_advice():
    with pytest.raises(TypeError, match=re.escape(
            "subscripts must be a str, not bytes (b'Wa->W'); the subscripts come first, as a str: "
            "decode them, contract('Wa->W', ...)")):
        contract(b"Wa->W", np.ones((2, 3)))


def test_numpy_sublist_form_still_runs_and_names_its_bad_sublist():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(contract(a, [0, 1], b, [1, 2], [0, 2]),
                               np.einsum(a, [0, 1], b, [1, 2], [0, 2]))
    with pytest.raises(TypeError, match=r"sublist 1 is str \('jk'\); in the sublist form"):
        contract(a, [0, 1], b, "jk")


def test_check_says_the_subscripts_come_first(tmp_path):
    [finding] = _findings(tmp_path, """\
        from contractions import contract
        y = contract(x, 'ij->i')
        """)
    assert finding == ("CT101 the first argument of contract() is not a string literal but a later "
                       "one is: the subscripts come first, as a str: contract('ij->i', ...) with "
                       "the operands after it")


# ------------------------------------------------------------------------ packed operands
@pytest.mark.parametrize("shape_b", [(3, 4), (2, 3)])      # (np.asarray fails / stacks them)
@pytest.mark.parametrize("pack", [list, tuple])
def test_operands_packed_into_one_list_are_told_to_go_separately(shape_b, pack):
    a, b = np.ones((2, 3)), np.ones(shape_b)
    with pytest.raises(OperandCountError, match=re.escape(
            f"'ij,jk->ik' has 2 input terms but 1 operand was given, and operand 0 is a "
            f"{pack.__name__} of 2 arrays: operands go as separate arguments: "
            "contract('ij,jk->ik', *ops), not contract('ij,jk->ik', ops)")):
        contract("ij,jk->ik", pack([a, b]))


def test_nested_lists_of_numbers_are_still_operands():
    b = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(contract("ij,jk->ik", [[1.0, 2.0], [3.0, 4.0]], b),
                               np.einsum("ij,jk->ik", np.array([[1.0, 2.0], [3.0, 4.0]]), b))
    with pytest.raises(ContractionError, match="nested lists must be rectangular"):
        contract("ij,jk->ik", [[1.0, 2.0], [3.0]], b)


def test_check_gives_the_packed_operands_advice_too(tmp_path):
    [finding] = _findings(tmp_path, """\
        from contractions import contract
        y = contract('ij,jk->ik', [a, b])
        """)
    assert finding == ("CT102 'ij,jk->ik' has 2 input term(s) but the call passes 1 operand(s); "
                       "operand 0 is a list: operands go as separate arguments: "
                       "contract('ij,jk->ik', *ops), not contract('ij,jk->ik', ops)")


# ---------------------------------------------------------------------- misspelt keywords
@pytest.mark.parametrize("written, meant", [
    ("optimise", "optimize"), ("optimze", "optimize"), ("opt", "optimize"),
    ("memorylimit", "memory_limit"), ("mem_limit", "memory_limit"), ("precison", "precision"),
    ("dtpye", "dtype"), ("use_blass", "use_blas"), ("backed", "backend"),
    ("lenW", "len_W"), ("len_w", "len_W"), ("length_W", "len_W"), ("LEN_W", "len_W"),
])
def test_a_misspelt_keyword_names_its_close_match(written, meant):
    x = np.ones((2, 3))
    with pytest.raises(KeywordError) as err:
        contract("Wa->W", x, **{written: 1})
    assert isinstance(err.value, TypeError) and isinstance(err.value, ContractionError)
    msg = str(err.value)
    assert msg.startswith(f"unexpected keyword argument {written!r} for contract('Wa->W', ...): "
                          f"did you mean {meant}=?")
    assert ("len_<G>=n" in msg) == meant.startswith("len_")   # the len_ rule only for lengths


def test_an_unknown_keyword_lists_what_contract_takes():
    msg = _message(lambda: contract("Wa->W", np.ones((2, 3)), colour=1))
    assert msg == ("unexpected keyword argument 'colour' for contract('Wa->W', ...): it takes "
                   "optimize=, memory_limit=, precision=, preferred_element_type=, out=, dtype=, "
                   "order=, casting=, backend=, use_blas= and len_<G>=n (G an uppercase group letter)")


def test_check_gives_the_keyword_advice_of_the_runtime_error(tmp_path):
    findings = _findings(tmp_path, """\
        from contractions import contract
        y = contract('Wa->W', x, optimise='greedy')
        y = contract('Wa->W', x, lenW=1)
        y = contract('Wa->W', x, len_w=1)
        """)
    x = np.ones((2, 3))
    for finding, keyword in zip(findings, [{"optimise": "greedy"}, {"lenW": 1}, {"len_w": 1}]):
        advice = _message(lambda kw=keyword: contract("Wa->W", x, **kw)).split("...): ", 1)[1]
        assert finding.endswith(f"; {advice}") or finding.endswith(f": {advice}"), (finding, advice)
    assert findings[0] == "CT103 unknown keyword 'optimise' for contract('Wa->W'): did you mean optimize=?"


# ------------------------------------------------------------------------- help(contract)
def test_help_shows_a_readable_signature():
    shown = str(inspect.signature(contract))
    assert shown == ("(subscripts: str, *operands, optimize='auto', memory_limit='default', "
                     "precision=None, preferred_element_type=None, out=None, dtype=None, order='K', "
                     "casting='safe', backend=None, use_blas=True, **len_groups: int) -> array")
    assert "<object object" not in pydoc.render_doc(contract)


# ------------------------------------------------------------------------ contractions lint
def test_lint_is_check(tmp_path, capsys):
    path = tmp_path / "calls.py"
    path.write_text("from contractions import contract\ny = contract('WCo,WCa->Cao', a, b)\n")
    assert main(["lint", str(path)]) == main(["check", str(path)]) == 1
    lint_out, check_out = capsys.readouterr().out.split("\n", 1)
    assert lint_out + "\n" == check_out and "CT107" in lint_out
    assert "check (lint)" in build_parser().format_help()


# ---------------------------------------------------------------------- inf: the warnings
def test_an_inf_warns_only_where_a_matmul_runs_as_documented():
    """docs/numpy-compat.md, "Deliberate differences": a BLAS step warns of inf * 0 as numpy's
    optimize=True path does; np.einsum's single loop never does; np.errstate silences it."""
    m = np.ones((8, 8))
    m[0, 0] = np.inf
    n = np.ones((8, 8))
    n[0, 1] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = np.einsum("ij,jk->ik", m, n)
    assert np.isnan(expected[0, 1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = contract("ij,jk->ik", m, n, optimize=[(0, 1)])
    assert [(w.category, str(w.message)) for w in caught] == [
        (RuntimeWarning, "invalid value encountered in matmul")]
    assert np.array_equal(got, expected, equal_nan=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(invalid="ignore"):
            assert np.array_equal(contract("ij,jk->ik", m, n, optimize=[(0, 1)]), expected,
                                  equal_nan=True)
        # one einsum call warns of nothing, as np.einsum
        assert np.array_equal(contract("ij,jk->ik", m, n, optimize=False), expected, equal_nan=True)


# ---------------------------------------------------------------- calibrate's progress line
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_calibrate_shows_its_progress_on_a_terminal(tmp_path, monkeypatch, capsys):
    from contractions import calibrate as calibration

    monkeypatch.setattr(calibration, "QUICK", calibration.TINY)   # (seconds, not a minute)
    monkeypatch.setattr(calibration.Progress.__init__, "__defaults__", (None, 0.0))  # every tick
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["calibrate", "--quick", "--output", str(tmp_path / "profile.json")]) == 0
    shown = terminal.getvalue()
    assert "\rmeasuring BLAS products in cache, stage 1/8 [0/12]" in shown
    assert "\rmeasuring BLAS products in cache, stage 1/8 [11/12]" in shown
    assert "\rmeasuring gathers and fresh pages, stage 4/8 [1/2]" in shown
    assert "\rmeasuring the roofline: bandwidths and peak, stage 6/8 [1/" in shown
    assert shown.endswith("\r")          # the line is cleared at the end
    assert "\rmeasuring" not in capsys.readouterr().out       # stdout keeps the log lines only


def test_calibrate_is_quiet_when_stderr_is_piped(tmp_path, monkeypatch):
    from contractions import calibrate as calibration

    monkeypatch.setattr(calibration, "QUICK", calibration.TINY)
    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    assert main(["calibrate", "--quick", "--output", str(tmp_path / "profile.json")]) == 0
    assert piped.getvalue() == ""


def _exception_of(call) -> BaseException | None:
    try:
        call()
    except Exception as exc:   # noqa: BLE001 - (what numpy raises, for comparison)
        return exc
    return None
