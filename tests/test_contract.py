"""End to end on numpy: `contract` against the loop oracle and hand-expanded np.einsum."""

import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import (
    ContractionError,
    OperandCountError,
    SizeMismatchError,
    UnderdeterminedError,
    contract,
    expand_subscripts,
    identifiability,
)
from contractions.calls import runners
from contractions.testing.oracle import loop_contract

from ._strategies import grouped_problems, hand_expand, needed_supplements, random_operands

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape)


# ---- properties -------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(grouped_problems(), st.integers(0, 2**32 - 1))
def test_matches_loop_oracle_and_hand_expanded_einsum(problem, seed):
    operands = random_operands(problem, np.random.default_rng(seed))
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    got = contract(problem.subscripts, *operands, **pins)
    assert got.shape == problem.output_shape()
    assert got.dtype == np.float64
    by_einsum = np.einsum(hand_expand(problem), *operands)
    np.testing.assert_allclose(got, by_einsum, rtol=1e-10, atol=1e-10)
    by_loops = loop_contract(problem.subscripts, operands, problem.group_shapes)
    np.testing.assert_allclose(got, by_loops, rtol=1e-10, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(grouped_problems(max_terms=2), st.integers(0, 2**32 - 1))
def test_integer_and_complex_dtypes_promote_as_einsum(problem, seed):
    r = np.random.default_rng(seed)
    shapes = problem.operand_shapes()
    ints = [r.integers(-3, 4, size=s).astype(np.int32) for s in shapes]
    if len(ints) > 1:
        ints[-1] = (ints[-1] + 1j * r.integers(-3, 4, size=shapes[-1])).astype(np.complex64)
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    got = contract(problem.subscripts, *ints, **pins)
    want = np.einsum(hand_expand(problem), *ints)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ---- the behaviours docs/dialect.md names ------------------------------------------------
def test_the_headline_example_with_multi_axis_groups():
    x, cores, z = randn(4, 3, 2, 3), randn(2, 3, 5, 6), randn(4, 3, 2, 5)
    got = contract("WCa,Caib,WCi->WCb", x, cores, z)
    want = np.einsum("wxca,caib,wxci->wxcb", x, cores, z)
    np.testing.assert_allclose(got, want)


def test_batched_trace_and_diagonal():
    a = randn(2, 3, 4, 4)
    np.testing.assert_allclose(contract("Wii->W", a), np.einsum("xyii->xy", a))
    np.testing.assert_allclose(contract("Wii->Wi", a), np.einsum("xyii->xyi", a))


def test_output_groups_in_any_order():
    v, m = randn(3, 5), randn(3, 2, 2, 5)
    got = contract("Vo,VWo->WVo", v, m, len_V=1)
    np.testing.assert_allclose(got, np.einsum("vo,vwxo->wxvo", v, m))


def test_empty_group_vanishes():
    x, cores, z = randn(3), randn(3, 5, 6), randn(5)
    got = contract("WCa,Caib,WCi->WCb", x, cores, z)  # W and C both empty
    np.testing.assert_allclose(got, np.einsum("a,aib,i->b", x, cores, z))


def test_empty_output_is_a_full_sum():
    a, b = randn(2, 3, 4), randn(2, 3, 4)
    got = contract("Wa,Wa->", a, b)
    assert got.shape == ()
    np.testing.assert_allclose(got, np.sum(a * b))


def test_zero_d_operand_with_only_an_empty_group():
    got = contract("W,Wa->Wa", np.array(2.0), randn(3))
    assert got.shape == (3,)


def test_size_one_axes_broadcast_like_numpy_einsum():
    a, b = randn(4, 1, 3), randn(1, 5, 3)
    got = contract("Wa,Wa->Wa", a, b)
    np.testing.assert_allclose(got, np.einsum("xya,xya->xya", a, b))
    np.testing.assert_allclose(loop_contract("Wa,Wa->Wa", [a, b], {"W": (4, 5)}), got)


def test_zero_size_axes():
    got = contract("Wa,ab->Wb", np.zeros((0, 2, 3)), randn(3, 4))
    assert got.shape == (0, 2, 4)
    got = contract("Wa,ab->Wb", randn(2, 0), np.zeros((0, 4)))
    np.testing.assert_array_equal(got, np.zeros((2, 4)))


def test_integer_dtype_stays_integer():
    a = np.arange(12, dtype=np.int64).reshape(2, 2, 3)
    got = contract("Wa,Wa->W", a, a)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.einsum("xya,xya->xy", a, a))


def test_inputs_are_not_modified_and_result_does_not_alias_them():
    a = randn(3, 4)
    before = a.copy()
    out = contract("Wa->aW", a)
    np.testing.assert_array_equal(a, before)
    assert not np.shares_memory(out, a)
    out[...] = 0
    np.testing.assert_array_equal(a, before)


def test_array_likes_are_accepted():
    got = contract("Wa,a->W", [[1.0, 2.0], [3.0, 4.0]], np.array([1.0, 1.0]))
    np.testing.assert_allclose(got, [3.0, 7.0])


def test_transposed_batch_raises_before_any_arithmetic():
    with pytest.raises(SizeMismatchError) as info:
        contract("Wa,Wa->W", randn(2, 3, 4), randn(3, 2, 4))
    msg = str(info.value)
    assert "group 'W' sub-axis 0 (of 2)" in msg
    assert "operand 0" in msg and "operand 1" in msg and "2" in msg and "3" in msg
    assert "'Wa,Wa->W'" in msg


def test_letter_size_mismatch_names_the_letter():
    with pytest.raises(SizeMismatchError, match="letter 'a' has extent 4 in operand 0"):
        contract("Wa,Wa->W", randn(2, 4), randn(2, 5))


def test_operand_count_mismatch_states_both_counts():
    with pytest.raises(OperandCountError, match="2 input terms but 3 operands"):
        contract("Wa,Wa->W", randn(2), randn(2), randn(2))


def test_underdetermined_call_raises_without_supplement():
    with pytest.raises(UnderdeterminedError, match="len_W"):
        contract("WCo,WCa->Cao", randn(3, 2, 5), randn(3, 2, 4))


def test_unknown_keyword_is_type_error_naming_the_len_form():
    with pytest.raises(TypeError, match=r"'optimise' for contract\('Wa->W', \.\.\.\): did you mean optimize=\?$"):
        contract("Wa->W", randn(2, 3), optimise=True)
    with pytest.raises(TypeError, match=r"'lenW' .*: did you mean len_W=\? \(a group length is written len_<G>=n"):
        contract("Wa->W", randn(2, 3), lenW=1)
    with pytest.raises(TypeError, match="not bool"):
        contract("Wa->W", randn(2, 3), len_W=True)
    with pytest.raises(TypeError, match="int number of axes"):
        contract("Wa->W", randn(2, 3), len_W=1.0)


def test_len_accepts_numpy_integers_via_operator_index():
    got = contract("WCo,WCa->Cao", randn(3, 2, 5), randn(3, 2, 4), len_W=np.int64(1))
    assert got.shape == (2, 4, 5)


def test_preferred_element_type_on_numpy():
    a = np.ones((2, 3), dtype=np.float32)
    assert contract("Wa->W", a, preferred_element_type=np.float64).dtype == np.float64


def test_warm_calls_reuse_the_cached_plan():

    a = randn(2, 3)
    contract("Wa->W", a)
    misses = runners._COMPILED.cache_info().misses
    assert runners.HOT[("Wa->W", (2, 3))] is not None
    contract("Wa->W", randn(2, 3))
    contract("WCo,WCa->Cao", randn(11, 3, 5), randn(11, 3, 4), len_W=1)  # a signature no other test uses
    contract("WCo,WCa->Cao", randn(11, 3, 5), randn(11, 3, 4), len_W=1)
    assert runners._COMPILED.cache_info().misses == misses + 1  # only the new signature planned


def test_hot_cache_does_not_let_bool_or_float_supplements_through():
    a, b = randn(3, 2, 5), randn(3, 2, 4)
    contract("WCo,WCa->Cao", a, b, len_W=1)
    with pytest.raises(TypeError, match="not bool"):
        contract("WCo,WCa->Cao", a, b, len_W=True)
    with pytest.raises(TypeError, match="int number of axes"):
        contract("WCo,WCa->Cao", a, b, len_W=1.0)


def test_hot_cache_is_bounded(monkeypatch):

    monkeypatch.setattr(runners, "HOT_CACHE_SIZE", 3)
    runners.HOT.clear()
    for n in range(1, 8):
        contract("Wa->W", randn(n, 2))
        assert len(runners.HOT) <= 3


def test_threads_get_identical_results():
    a, b = randn(6, 5, 4), randn(6, 4, 3)
    want = contract("Wij,Wjk->Wik", a, b)
    results, errors = [], []

    def work():
        try:
            for _ in range(50):
                results.append(contract("Wij,Wjk->Wik", a, b))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(np.array_equal(r, want) for r in results)


def test_expanded_string_is_byte_equal_across_calls_and_splits():
    assert expand_subscripts("WKCi,Cio->WKCo", 4, 3) == "ABCi,Cio->ABCo"
    assert expand_subscripts("WKCi,Cio->WKCo", 4, 3, len_K=1) == "ABCi,Cio->ABCo"
    assert expand_subscripts("WKCi,Cio->WKCo", 4, 3, len_K=2) == "ABCi,Cio->ABCo"


def test_importing_and_numpy_contract_do_not_import_jax_or_torch():
    code = (
        "import sys, numpy as np, contractions\n"
        "contractions.contract('Wa,ab->Wb', np.ones((2, 3)), np.ones((3, 4)))\n"
        "print('jax' in sys.modules, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_more_axes_than_einsum_letters():
    """60 distinct axes: no 52-letter ceiling.  Reference: flatten each group (allowed in a
    test) and run a three-letter einsum."""
    r = np.random.default_rng(5)
    w_shape = (2,) + (1,) * 19 + (2,)       # 21 axes
    x_shape = (3,) + (1,) * 18 + (2,)       # 20 axes
    y_shape = (1,) * 18 + (2,)              # 19 axes
    a = r.standard_normal(w_shape + x_shape)
    b = r.standard_normal(x_shape + y_shape)
    got = contract("WX,XY->WY", a, b, len_W=21)
    want = np.einsum("wx,xy->wy", a.reshape(4, 6), b.reshape(6, 2)).reshape(w_shape + y_shape)
    assert got.shape == w_shape + y_shape
    np.testing.assert_allclose(got, want, rtol=1e-12)


# ---- np.einsum's keywords, limits and odd inputs -----------------------------------------
def test_out_is_written_into_and_returned_after_checks():
    a, b = randn(4, 2, 3), randn(4, 3, 5)
    out = np.full((4, 2, 5), np.nan)
    got = contract("Wij,Wjk->Wik", a, b, out=out, optimize="greedy")
    assert got is out
    np.testing.assert_allclose(out, np.einsum("wij,wjk->wik", a, b), rtol=1e-12)
    out32 = np.zeros((4, 2, 5), np.complex128)      # a wider dtype is a safe cast, as in np.einsum
    contract("Wij,Wjk->Wik", a, b, out=out32)
    np.testing.assert_allclose(out32.real, out, rtol=1e-12)
    untouched = np.zeros((4, 2, 5), np.float32)
    with pytest.raises(TypeError, match="cannot hold safely"):
        contract("Wij,Wjk->Wik", a, b, out=untouched)
    with pytest.raises(SizeMismatchError, match=r"out= has shape \(2, 5\) but .* gives \(4, 2, 5\)"):
        contract("Wij,Wjk->Wik", a, b, out=np.zeros((2, 5)))
    with pytest.raises(TypeError, match="out= must be a numpy array"):
        contract("Wij,Wjk->Wik", a, b, out=[0.0])
    assert not untouched.any()


def test_dtype_is_np_einsums_name_for_the_computation_dtype():
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    # np.einsum refuses int32 -> float32 under its default casting='safe', and so do we
    with pytest.raises(TypeError, match="rule 'safe'"):
        np.einsum("wa,wa->w", ints, ints, dtype=np.float32)
    with pytest.raises(TypeError, match="cannot be cast from int32 to float32 by the rule 'safe'"):
        contract("Wa,Wa->W", ints, ints, dtype=np.float32)
    got = contract("Wa,Wa->W", ints, ints, dtype=np.float32, casting="same_kind")
    assert got.dtype == np.float32
    floats = ints.astype(np.float32)
    np.testing.assert_allclose(got, np.einsum("wa,wa->w", floats, floats))
    with pytest.raises(TypeError, match="disagree"):
        contract("Wa,Wa->W", ints, ints, dtype=np.float32, preferred_element_type=np.float64)


@pytest.mark.parametrize("keyword,value", [("order", "C"), ("casting", "no")])
def test_np_einsum_keywords_are_taken(keyword, value):
    x = randn(2, 3)
    np.testing.assert_allclose(contract("Wa->W", x, **{keyword: value}), x.sum(-1))


def test_seventy_operands_run_pairwise():
    vectors = [randn(3) for _ in range(70)]
    subscripts = ",".join("Wa" for _ in vectors) + "->W"
    got = contract(subscripts, *(v[None, :] for v in vectors))
    np.testing.assert_allclose(got, [np.sum(np.prod(vectors, axis=0))], rtol=1e-10)


def test_an_output_past_numpys_axis_limit_is_refused_before_arithmetic():
    with pytest.raises(ContractionError, match="result of 70 axes, but numpy arrays hold at most 64"):
        contract("A,B->AB", np.ones((1,) * 40), np.ones((1,) * 30), len_A=40)


@pytest.mark.parametrize("optimize", ["auto", "greedy", False])
@pytest.mark.parametrize("subscripts,shapes", [
    ("Wij,jk->Wik", [(3, 4, 5), (5, 2)]),      # matmul step
    ("Wi,Wj->Wij", [(3, 4), (3, 5)]),         # multiply step
    ("Wi,i->W", [(3, 4), (4,)]),              # vector-like einsum step
    ("Wii->W", [(3, 4, 4)]),                  # one operand
])
def test_object_dtype_works_on_every_path(subscripts, shapes, optimize):
    from fractions import Fraction

    r = np.random.default_rng(7)
    ops = [np.vectorize(lambda v: Fraction(int(v), 7), otypes=[object])(r.integers(-5, 6, s))
           for s in shapes]
    got = contract(subscripts, *ops, optimize=optimize)
    want = np.einsum(subscripts.replace("W", "w"), *ops)
    assert got.dtype == object and got.shape == want.shape
    assert all(isinstance(v, Fraction) for v in got.ravel())
    assert (got == want).all()
