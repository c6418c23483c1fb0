"""np.einsum's call conventions: sublists, scalar results, object and float16 dtypes,
order=/casting=/dtype= and the exception classes numpy raises, each checked against np.einsum."""

import json

import numpy as np
import opt_einsum as oe
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import ContractionError, OperandCountError, PathError, UnderdeterminedError, contract


def _exception_of(call):
    try:
        call()
    except Exception as err:  # noqa: BLE001 - the class is what is compared
        return err
    raise AssertionError("no exception")


# ------------------------------------------------------------------------------ sublists
def test_the_sublist_form_matches_np_einsum():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    for args in [(a, [0, 1], b, [1, 2], [0, 2]), (a, [0, 1], b, [1, 2]), (a, [1, 0]),
                 (a, [0, 0 + 1], b, [1, 2], [2, 0])]:
        np.testing.assert_allclose(contract(*args), np.einsum(*args))


def test_the_sublist_form_with_ellipsis_and_large_labels():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 2, 3)), rng.standard_normal(3)
    args = (a, [Ellipsis, 0, 1], b, [1], [Ellipsis, 0])
    np.testing.assert_allclose(contract(*args), np.einsum(*args))
    np.testing.assert_allclose(contract(a, [Ellipsis, 40, 51], b, [51]), np.einsum(a, [Ellipsis, 40, 51], b, [51]))
    # implicit output keeps the symbols' order: 30 < 40 as 'A'.. < 'a'.. would not be
    got = contract(a, [40, 30, 51], b, [51])
    np.testing.assert_allclose(got, np.einsum(a, [40, 30, 51], b, [51]))


def test_a_bad_sublist_is_a_type_error_as_in_numpy():
    a = np.ones((2, 3))
    assert isinstance(_exception_of(lambda: np.einsum(a, "ij")), TypeError)
    with pytest.raises(TypeError, match=r"subscripts must be a str, got ndarray first; the subscripts "
                                        r"come first, as a str: contract\('ij', \.\.\.\)"):
        contract(a, "ij")
    with pytest.raises(TypeError, match="subscripts must be a str"):
        contract(3)


def test_no_arguments_is_a_value_error_as_in_numpy():
    assert isinstance(_exception_of(lambda: np.einsum()), ValueError)
    with pytest.raises(OperandCountError, match="needs the subscripts string"):
        contract()
    assert issubclass(OperandCountError, ValueError)


# --------------------------------------------------------------------------- scalars
@pytest.mark.parametrize("optimize", ["auto", "greedy", False, [(0, 1)]])
def test_a_0d_result_is_a_numpy_scalar(optimize):
    x = np.arange(3.0)
    got = contract("i,i->", x, x, optimize=optimize)
    want = np.einsum("i,i->", x, x)
    assert type(got) is type(want) is np.float64
    assert got == want
    assert json.dumps(float(got)) and hash(got) == hash(5.0)


def test_scalar_types_follow_the_dtype():
    for dtype in (np.float32, np.int64, np.complex128, np.int8):
        x = np.arange(3).astype(dtype)
        assert type(contract("i->", x)) is type(np.einsum("i->", x))
        assert type(contract("i,i", x, x)) is type(np.einsum("i,i", x, x))


# ----------------------------------------------------------------------------- object
def test_object_dtype_is_kept_on_every_path():
    x = np.arange(3, dtype=object)
    got = contract("i->", x)
    assert type(got) is type(np.einsum("i->", x)) and got == 3
    got = contract("b,ja->j", np.ones(30, dtype=object), np.ones((40, 30), dtype=object))
    assert got.dtype == object and got.shape == (40,) and set(got.tolist()) == {900}
    big = np.array([2**70, 3], dtype=object)     # beyond int64: only object arithmetic is exact
    for optimize in ("auto", "greedy", "dp", [(0, 1), (0, 1)]):
        got = contract("i,i,j->j", big, big, np.arange(2, dtype=object), optimize=optimize)
        assert got.dtype == object and got.tolist() == [0, 2**140 + 9]


def test_object_scalar_steps_and_matmul():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 5, (3, 4)).astype(object)
    b = rng.integers(0, 5, (4, 2)).astype(object)
    got = contract("ij,jk,k->i", a, b, np.ones(2, dtype=object), optimize=[(0, 1), (0, 1)])
    assert got.dtype == object
    assert got.tolist() == np.einsum("ij,jk,k->i", a, b, np.ones(2, dtype=object)).tolist()


# ---------------------------------------------------------------------------- float16
def test_float16_does_not_overflow_where_the_answer_fits():
    x = np.full((4, 40), 30, np.float16)
    y = np.full((40, 40), 30, np.float16)
    z = np.full(40, 0.001, np.float16)
    want = np.einsum("ij,jk,k->i", x, y, z)
    assert np.isfinite(want).all()
    for optimize in ("auto", "greedy", [(0, 1), (0, 1)], [(1, 2), (0, 1)]):
        got = contract("ij,jk,k->i", x, y, z, optimize=optimize)
        assert got.dtype == np.float16
        assert np.isfinite(got).all()
        exact = np.einsum("ij,jk,k->i", *(t.astype(np.float64) for t in (x, y, z)))
        assert np.abs(got - exact).max() <= np.abs(want - exact).max() + 1e-9


def test_float16_mixed_with_float32_is_float32():
    got = contract("i,i->i", np.ones(3, np.float16), np.ones(3, np.float32), optimize="greedy")
    assert got.dtype == np.float32


# ------------------------------------------------------------------ order casting dtype
@pytest.mark.parametrize("order", ["C", "F", "A", "K", "c", "f"])
def test_order_lays_the_result_out_as_asked(order):
    x = np.asfortranarray(np.arange(24.0).reshape(2, 3, 4))
    y = np.arange(12.0).reshape(4, 3)
    for subscripts, ops in [("ijk->ikj", (x,)), ("ijk,kl->ilj", (x, y))]:
        got = contract(subscripts, *ops, order=order)
        want = np.einsum(subscripts, *ops, order=order)
        np.testing.assert_array_equal(got, want)
        # numpy may hand back a strided view whatever the order; a result here is laid out as
        # asked ('A': Fortran when every operand is)
        layout = {"C": "C", "F": "F", "A": "F" if all(o.flags.f_contiguous for o in ops) else "C"}
        wanted = layout.get(order.upper())
        if wanted == "C":
            assert got.flags.c_contiguous
        elif wanted == "F":
            assert got.flags.f_contiguous


@pytest.mark.parametrize(
    "kwargs",
    [{"order": "X"}, {"casting": "bad"}, {"order": 3}],
)
def test_bad_order_or_casting_is_numpys_value_error(kwargs):
    x = np.ones((2, 3))
    want = _exception_of(lambda: np.einsum("ij->i", x, **kwargs))
    got = _exception_of(lambda: contract("ij->i", x, **kwargs))
    assert isinstance(got, type(want))
    assert "must be" in str(got)


CASTS = [
    ("i->", [np.array([0.5, 0.7])], {"dtype": int}),
    ("i->", [np.ones(2, np.float32)], {"dtype": np.float64, "casting": "no"}),
    ("i->", [np.ones(2, np.float32)], {"dtype": np.float16}),
    ("i->", [np.ones(2, np.float32)], {"dtype": np.float16, "casting": "unsafe"}),
    ("i->", [np.array([0.5, 1.7])], {"dtype": int, "casting": "unsafe"}),
    ("i,i->", [np.ones(2, np.float32), np.ones(2)], {"casting": "no"}),
    ("i,i->", [np.ones(2, np.float32), np.ones(2)], {"casting": "equiv"}),
    ("i,i->", [np.ones(2), np.ones(2)], {"casting": "no"}),
    ("i,i->", [np.ones(2, np.int32), np.ones(2)], {"dtype": np.float32, "casting": "same_kind"}),
    ("ij->j", [np.ones((2, 3), np.int64)], {"dtype": np.float64}),
]


@pytest.mark.parametrize("subscripts, operands, kwargs", CASTS)
def test_dtype_and_casting_follow_numpys_rules(subscripts, operands, kwargs):
    try:
        want = np.einsum(subscripts, *operands, **kwargs)
    except Exception as err:  # noqa: BLE001
        with pytest.raises(type(err), match="rule"):
            contract(subscripts, *operands, **kwargs)
        return
    got = contract(subscripts, *operands, **kwargs)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want)


# ------------------------------------------------------------------ numpy's exceptions
MISTAKES = [
    ("ij,jk", [np.ones((2, 3)), np.ones((4, 2))]),           # extents disagree
    ("ij,jk", [np.ones((2, 3))]),                             # too few operands
    ("ij", [np.ones((2, 3, 4))]),                             # too many axes
    ("i.j", [np.ones((2, 3, 4))]),                            # a lone dot
    ("ij->ii", [np.ones((2, 3))]),                            # repeated output
    ("ij->k", [np.ones((2, 3))]),                             # output from nowhere
    ("ii", [np.ones((2, 3))]),                                # diagonal of unequal extents
]


@pytest.mark.parametrize("subscripts, operands", MISTAKES)
def test_mistakes_raise_the_class_numpy_raises(subscripts, operands):
    want = _exception_of(lambda: np.einsum(subscripts, *operands))
    got = _exception_of(lambda: contract(subscripts, *operands))
    assert isinstance(got, ContractionError)
    assert isinstance(got, type(want)), (type(got), type(want))


@pytest.mark.parametrize("path", [[(0, 1), (0, 1)], [(0, 5)]])
def test_a_bad_path_is_numpys_and_opt_einsums_exception(path):
    a, b = np.ones((2, 3)), np.ones((3, 2))
    got = _exception_of(lambda: contract("ij,jk", a, b, optimize=path))
    assert isinstance(got, PathError) and isinstance(got, ContractionError)
    for einsum in (np.einsum, oe.contract):
        want = _exception_of(lambda f=einsum: f("ij,jk", a, b, optimize=path))
        assert isinstance(got, type(want)), (einsum, type(want))


def test_an_output_ellipsis_without_input_ellipsis_is_no_axes_as_in_numpy():
    assert contract("i->...", np.ones(3)) == np.einsum("i->...", np.ones(3))


def test_an_unknown_keyword_is_a_type_error():
    assert isinstance(_exception_of(lambda: np.einsum("ij", np.ones((2, 3)), foo=1)), TypeError)
    with pytest.raises(TypeError):
        contract("ij", np.ones((2, 3)), foo=1)


def test_underdetermined_is_a_value_error_and_says_do_not_determine():
    assert issubclass(UnderdeterminedError, ValueError)
    with pytest.raises(ValueError, match="do not determine"):
        contract("WCo,WCa->Cao", np.ones((3, 2, 5)), np.ones((3, 2, 4)))


# ------------------------------------------------------------------- property: dtypes
@settings(max_examples=60, deadline=None)
@given(st.sampled_from([np.float16, np.float32, np.float64, np.int32, np.int64, np.complex64]),
       st.sampled_from(["ij,jk->ik", "ij,jk,k->", "i,i->", "ij->", "ij,j->i"]),
       st.integers(0, 2**16))
def test_result_dtype_and_type_match_np_einsum(dtype, subscripts, seed):
    rng = np.random.default_rng(seed)
    shapes = {"ij,jk->ik": [(2, 3), (3, 4)], "ij,jk,k->": [(2, 3), (3, 4), (4,)],
              "i,i->": [(3,), (3,)], "ij->": [(2, 3)], "ij,j->i": [(2, 3), (3,)]}[subscripts]
    ops = [(rng.standard_normal(s) * 3).astype(dtype) for s in shapes]
    want = np.einsum(subscripts, *ops)
    got = contract(subscripts, *ops)
    assert type(got) is type(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(np.asarray(got, np.complex128), np.asarray(want, np.complex128),
                               rtol=tol, atol=tol)


# ------------------------------------------------- sublists as arrays, out= casting, ranges
@pytest.mark.parametrize("dtype", [np.int8, np.intp, np.uint16])
def test_an_integer_array_is_a_sublist_as_in_numpy(dtype):
    rng = np.random.default_rng(3)
    m, v = rng.standard_normal((3, 3)), rng.standard_normal(3)
    for args in [(m, np.array([0, 0], dtype)), (m, np.array([0, 1], dtype), v, np.array([1], dtype)),
                 (m, np.array([0, 1], dtype), v, np.array([1], dtype), np.array([0], dtype))]:
        np.testing.assert_allclose(contract(*args), np.einsum(*args))
    with pytest.raises(TypeError, match=r"subscripts must be a str, got ndarray .*numpy's sublist "
                                        r"form follows each operand by a list of its axis numbers"):
        contract(m, np.array([0.0, 1.0]))      # a float array names no axes, in numpy neither
    assert isinstance(_exception_of(lambda: np.einsum(m, np.array([0.0, 1.0]))), TypeError)


@pytest.mark.parametrize("out_dtype", [np.int64, np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("optimize", [False, True, "optimal", "greedy"])
def test_a_0d_out_takes_numpys_cast(out_dtype, optimize):
    a = np.full(7, 1.5)
    try:
        np.einsum("i,i->", a, a, out=np.array(0, out_dtype), optimize=optimize)
        numpy_takes = True
    except TypeError:
        numpy_takes = False
    out = np.array(0, out_dtype)
    if not numpy_takes:
        with pytest.raises(TypeError, match="cannot hold"):
            contract("i,i->", a, a, out=out, optimize=optimize)
        return
    want = np.array(0, out_dtype)
    np.einsum("i,i->", a, a, out=want, optimize=optimize)
    assert contract("i,i->", a, a, out=out, optimize=optimize) is out
    assert out == want and out.dtype == want.dtype


@pytest.mark.parametrize("optimize", [False, True, "greedy"])
def test_out_with_dtype_and_unsafe_casting_as_numpy(optimize):
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    b = np.arange(4, dtype=np.int16)
    for kwargs in ({"dtype": "f8", "casting": "unsafe"}, {"casting": "unsafe"}):
        want, got = np.zeros(3, np.int16), np.zeros(3, np.int16)
        np.einsum("ij,j", a, b, out=want, optimize=optimize, **kwargs)
        assert contract("ij,j", a, b, out=got, optimize=optimize, **kwargs) is got
        np.testing.assert_array_equal(got, want)
    # a larger out keeps the casting= rule (numpy's single call, and ours on every path)
    with pytest.raises(TypeError, match="cannot hold safely"):
        contract("ij,j", a.astype(float), b, out=np.zeros(3, np.int16), optimize=optimize)


def test_sublist_symbols_past_numpys_range_with_optimize_false():
    a, b = np.ones((2, 3)), np.ones((3, 4))
    for bad in (52, -1):
        want = _exception_of(lambda s=bad: np.einsum(a, [0, s], b, [s, 2], [0, 2], optimize=False))
        with pytest.raises(type(want), match=r"outside np.einsum's range \[0, 52\)"):
            contract(a, [0, bad], b, [bad, 2], [0, 2], optimize=False)
    np.testing.assert_allclose(contract(a, [0, 51], b, [51, 2], [0, 2], optimize=False),
                               np.einsum(a, [0, 51], b, [51, 2], [0, 2], optimize=False))
    # any other optimize= takes any symbol, as opt_einsum does
    np.testing.assert_allclose(contract(a, [0, 1000], b, [1000, 2], [0, 2]),
                               oe.contract(a, [0, 1000], b, [1000, 2], [0, 2]))


@pytest.mark.parametrize("subscripts, path", [("ab,bc,cd,de->ae", ["einsum_path", (2, 3), (0, 1)]),
                                              ("a,a,a->a", ["einsum_path", (1,), (0, 1)])])
def test_an_incomplete_einsum_path_is_numpys_runtime_error(subscripts, path):
    ops = [np.ones([2] * len(t)) for t in subscripts.split("->")[0].split(",")]
    want = _exception_of(lambda: np.einsum(subscripts, *ops, optimize=path))
    assert type(want) is RuntimeError
    with pytest.raises(RuntimeError, match="uncontracted") as info:
        contract(subscripts, *ops, optimize=path)
    assert isinstance(info.value, PathError)


def test_all_scalar_operands_under_a_bound_as_numpy():
    ops = (np.complex128(1), 1.0, np.float32(1))
    want = np.einsum(",,->", *ops)
    got = contract(",,->", *ops, optimize="greedy", memory_limit="max_input")
    assert type(got) is type(want) and got == want
