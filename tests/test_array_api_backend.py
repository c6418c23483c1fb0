"""Array API backend, on array-api-strict: results against the loop oracle (the repo's
vocabulary, random strings, > 52 axes) in float32, float64 and complex128; the result is an
array of the same library on the same device; the schedule it runs has no einsum; numpy
operands are lifted; two libraries in one call are refused naming both."""

from __future__ import annotations

import doctest
import types
import zlib

import numpy as np
import pytest

xp = pytest.importorskip("array_api_strict")
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import contract, contract_expression, explain, identifiability, make_plan, make_schedule
from contractions.backends import BackendOptions, array_api_backend, backend_for

from ._references import loop_reference
from ._strategies import grouped_problems, needed_supplements
from ._vocabulary import random_problem, vocabulary

TT = "WCa,Caib,WCi->WCb"
DTYPES = {"float32": (np.float32, 2e-4), "float64": (np.float64, 1e-10), "complex128": (np.complex128, 1e-10)}


def is_strict(x) -> bool:
    return type(x).__module__.partition(".")[0] == "array_api_strict"


def to_numpy(x) -> np.ndarray:
    return np.asarray(xp.asarray(x, device=xp.Device("CPU_DEVICE")))   # from any device


def close(actual, expected, tol):
    actual = to_numpy(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * max(1.0, float(np.abs(expected).max(initial=0))))


def random(rng, shape, dtype):
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def lengths_of(subscripts, group_shapes):
    lengths = {g: len(s) for g, s in group_shapes.items()}
    lengths.update({c: 1 for c in subscripts if c.islower()})
    return lengths


# ------------------------------------------------------------------ the vocabulary
VOCABULARY = vocabulary()


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("subscripts,pins", VOCABULARY, ids=[s for s, _ in VOCABULARY])
def test_vocabulary_matches_the_loop_oracle(subscripts, pins, dtype):
    np_dtype, tol = DTYPES[dtype]
    rng = np.random.default_rng(zlib.crc32(f"{subscripts}/{dtype}".encode()))
    problem = random_problem(subscripts, pins, rng, extents=(1, 3))
    operands = [random(rng, op.shape, np_dtype) for op in problem.operands]
    got = contract(subscripts, *(xp.asarray(op) for op in operands), **problem.len_kwargs)
    assert is_strict(got) and got.dtype == getattr(xp, dtype)
    want = loop_reference(subscripts, [op.astype(np.complex128) for op in operands],
                          lengths_of(subscripts, problem.group_shapes))
    close(got, want, tol)


@settings(max_examples=60, deadline=None)
@given(grouped_problems(), st.integers(0, 2**32 - 1), st.sampled_from(list(DTYPES)))
def test_random_strings_match_the_loop_oracle(problem, seed, dtype):
    np_dtype, tol = DTYPES[dtype]
    rng = np.random.default_rng(seed)
    operands = [random(rng, s, np_dtype) for s in problem.operand_shapes()]
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    got = contract(problem.subscripts, *(xp.asarray(op) for op in operands), **pins)
    assert is_strict(got) and got.dtype == getattr(xp, dtype)
    want = loop_reference(problem.subscripts, [op.astype(np.complex128) for op in operands],
                          lengths_of(problem.subscripts, problem.group_shapes))
    close(got, want, tol)


def sparse(n, big):
    return tuple(big.get(i, 1) for i in range(n))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_more_than_52_axes(dtype):
    np_dtype, tol = DTYPES[dtype]
    rng = np.random.default_rng(11)
    x = random(rng, sparse(50, {0: 2, 7: 3, 31: 2, 45: 2}), np_dtype)
    y = random(rng, sparse(30, {1: 2, 12: 3, 25: 2}), np_dtype)
    got = contract("AB,BC->AC", xp.asarray(x), xp.asarray(y), len_A=30)
    assert is_strict(got) and got.ndim == 40
    close(got, loop_reference("AB,BC->AC", [x, y], {"A": 30, "B": 20, "C": 10}), tol)
    # three operands and a diagonal, past 52 axes
    y3 = random(rng, sparse(22, {3: 2, 20: 3, 21: 3}), np_dtype)   # B (10) C (10) then 'ii'
    z3 = random(rng, sparse(15, {0: 2, 14: 3}), np_dtype)
    x3 = random(rng, sparse(40, {0: 2, 39: 2}), np_dtype)
    s = "AB,BCii,CD->ADi"
    got3 = contract(s, *(xp.asarray(a) for a in (x3, y3, z3)), len_A=30, len_C=10)
    close(got3, loop_reference(s, [x3, y3, z3], {"A": 30, "B": 10, "C": 10, "D": 5}), tol)


# ------------------------------------------------------------- what runs, and where
@pytest.mark.parametrize("subscripts,pins", VOCABULARY[:40], ids=[s for s, _ in VOCABULARY[:40]])
def test_the_schedule_has_no_einsum(subscripts, pins):
    rng = np.random.default_rng(zlib.crc32(subscripts.encode()))
    problem = random_problem(subscripts, pins, rng, extents=(2, 3))
    supplements = tuple(sorted((k[4:], v) for k, v in problem.len_kwargs.items()))
    plan = make_plan(subscripts, tuple(op.shape for op in problem.operands), supplements)
    standard = array_api_backend.standard_schedule(plan, make_schedule(plan))
    assert standard.strategy == "pairwise"
    assert {step.kernel for step in standard.steps} <= {"matmul", "multiply"}


def test_explain_prints_the_einsum_free_schedule():
    report = explain(TT, xp.ones((40, 2, 30)), np.ones((2, 30, 50, 60)), xp.ones((40, 2, 50)))
    assert "backend         array_api" in report and "without einsum" in report
    assert " einsum '" not in report   # no einsum step
    assert "matmul" in report


def test_numpy_operands_are_lifted_onto_the_device():
    device = xp.Device("device1")
    rng = np.random.default_rng(12)
    x, cores, z = rng.standard_normal((4, 2, 3)), rng.standard_normal((2, 3, 5, 6)), rng.standard_normal((4, 2, 5))
    got = contract(TT, xp.asarray(x, device=device), cores, z)
    assert is_strict(got) and got.device == device
    close(got, np.einsum("wca,caib,wci->wcb", x, cores, z), 1e-10)
    assert backend_for([x, xp.asarray(z)]).name == "array_api"
    expr = contract_expression(TT, x.shape, cores.shape, z.shape)
    assert is_strict(expr(xp.asarray(x), cores, xp.asarray(z)))


def test_inputs_are_not_modified_and_the_result_is_fresh():
    x = xp.asarray(np.arange(6.0).reshape(2, 3))
    got = contract("Wa->aW", x)   # a pure transpose: the finish copies
    assert is_strict(got) and got.shape == (3, 2)
    close(got, np.arange(6.0).reshape(2, 3).T, 0)
    close(x, np.arange(6.0).reshape(2, 3), 0)


def test_integer_dtype_stays_integer_and_preferred_element_type():
    x = xp.asarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    got = contract("Wa,Wa->W", x, x)
    assert got.dtype == xp.int32
    close(got, np.einsum("wa,wa->w", np.arange(12).reshape(3, 4), np.arange(12).reshape(3, 4)), 0)
    f32 = xp.ones((3, 4), dtype=xp.float32)
    assert contract("Wa,ab->Wb", f32, np.ones((4, 2), np.float32)).dtype == xp.float32
    assert contract("Wa,ab->Wb", f32, xp.ones((4, 2), dtype=xp.float32),
                    preferred_element_type="float64").dtype == xp.float64


def test_two_array_libraries_in_one_call_name_both():
    # A second Array API library: a namespace of its own (the registry compares libraries).
    other = types.ModuleType("otherlib")
    for name in ("asarray", "astype", "matmul", "multiply", "permute_dims", "reshape", "result_type", "sum"):
        setattr(other, name, getattr(xp, name))
    other.linalg = xp.linalg

    class OtherArray:
        shape, ndim = (3,), 1

        def __array_namespace__(self, api_version=None):
            return other

    with pytest.raises(TypeError, match=r"operands mix array_api_strict and otherlib arrays \(operand 0 .*operand 1"):
        contract("Wa,a->W", xp.ones((2, 3)), OtherArray())


def test_a_namespace_missing_standard_functions_is_refused_not_converted():
    class Half:
        shape, ndim = (3,), 1

        def __array_namespace__(self, api_version=None):
            return types.SimpleNamespace(__name__="halflib", asarray=np.asarray)

        def __array__(self, dtype=None, copy=None):
            raise AssertionError("converted to numpy")

    with pytest.raises(TypeError, match=r"operand 1 is a .*Half, which no backend runs"):
        contract("Wa,a->W", np.ones((2, 3)), Half())


def test_an_explicit_memory_limit_runs_in_blocks_on_the_namespace():
    rng = np.random.default_rng(15)
    x, cores, z = rng.standard_normal((8, 2, 6)), rng.standard_normal((2, 6, 5, 4)), rng.standard_normal((8, 2, 5))
    plan = make_plan(TT, (x.shape, cores.shape, z.shape), ())
    limited = array_api_backend.standard_schedule(plan, make_schedule(plan, memory_limit=16))
    assert limited.blocking is not None
    assert {step.kernel for _, inner in limited.blocking.inner for step in inner.steps} <= {"matmul", "multiply"}
    got = contract(TT, xp.asarray(x), xp.asarray(cores), xp.asarray(z), memory_limit=16)
    assert is_strict(got)
    close(got, np.einsum("wca,caib,wci->wcb", x, cores, z), 1e-10)
    unlimited = contract(TT, xp.asarray(x), xp.asarray(cores), xp.asarray(z))   # default: no blocks
    close(unlimited, np.einsum("wca,caib,wci->wcb", x, cores, z), 1e-10)


def test_backend_interface_compiles_with_options():
    plan = make_plan(TT, ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5)), ())
    run = array_api_backend.compile(plan, make_schedule(plan, "greedy"), BackendOptions())
    rng = np.random.default_rng(13)
    x, cores, z = rng.standard_normal((4, 2, 3)), rng.standard_normal((2, 3, 5, 6)), rng.standard_normal((4, 2, 5))
    close(run(xp.asarray(x), xp.asarray(cores), xp.asarray(z)), np.einsum("wca,caib,wci->wcb", x, cores, z), 1e-10)


def test_module_docstring_examples():
    assert doctest.testmod(array_api_backend).failed == 0
