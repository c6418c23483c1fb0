"""numpy, JAX and torch through the same layers: the vocabulary, random strings (past 52 axes
included), every form of optimize= and contract_expression, each against the loop oracle.

Each framework is skipped cleanly when it is not installed.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import contract, contract_expression, explain, identifiability
from contractions.testing.oracle import loop_contract

from ._references import loop_reference
from ._strategies import grouped_problems, needed_supplements, random_operands
from ._vocabulary import random_problem, vocabulary

VOCABULARY = vocabulary()


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)   # float64 results, comparable at 1e-10
    import jax.numpy as jnp

    return "jax", jnp.asarray, lambda r: isinstance(r, jax.Array)


def _torch():
    torch = pytest.importorskip("torch")
    return "torch", torch.from_numpy, lambda r: isinstance(r, torch.Tensor)


def _numpy():
    # a 0-d result is a numpy scalar, as np.einsum returns
    return "numpy", np.asarray, lambda r: isinstance(r, (np.ndarray, np.generic))


FRAMEWORKS = {"numpy": _numpy, "jax": _jax, "torch": _torch}


@pytest.fixture(params=list(FRAMEWORKS))
def framework(request):
    return FRAMEWORKS[request.param]()


# JAX compiles one executable per string and path (~0.2 s each): one vocabulary pass for it.
VOCABULARY_RUNS = [(name, opt) for name in ("numpy", "torch") for opt in ("auto", "greedy", "dp", False)]
VOCABULARY_RUNS.append(pytest.param("jax", "auto", marks=pytest.mark.slow))


def seeded(*parts: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def close(got, want) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("backend,optimize", VOCABULARY_RUNS)
def test_vocabulary_matches_the_oracle(backend, optimize):
    name, to_array, is_native = FRAMEWORKS[backend]()
    for subscripts, pins in VOCABULARY:
        problem = random_problem(subscripts, pins, seeded(name, subscripts, optimize), extents=(1, 4))
        got = contract(subscripts, *map(to_array, problem.operands), optimize=optimize,
                       **problem.len_kwargs)
        assert is_native(got), (subscripts, type(got))
        close(got, loop_contract(subscripts, list(problem.operands), problem.group_shapes))


def test_explicit_path_and_expression(framework):
    name, to_array, is_native = framework
    subscripts = "Ka,KCab,Cbc,Kc->KC"
    problem = random_problem(subscripts, (), seeded(name, "path"), extents=(2, 3))
    want = loop_contract(subscripts, list(problem.operands), problem.group_shapes)
    arrays = list(map(to_array, problem.operands))
    for path in ([(0, 1), (0, 1), (0, 1)], [(2, 3), (0, 2), (0, 1)], [(1, 2), (0, 2), (0, 1)]):
        close(contract(subscripts, *arrays, optimize=path), want)
        expr = contract_expression(subscripts, *(a.shape for a in problem.operands), optimize=path)
        assert expr.schedule.path == tuple(path)
        result = expr(*arrays)
        assert is_native(result)
        close(result, want)
    report = explain(subscripts, *arrays)
    assert f"backend         {name}" in report


@pytest.mark.parametrize("backend", list(FRAMEWORKS))
@settings(max_examples=25, deadline=None)
@given(problem=grouped_problems(max_terms=3), seed=st.integers(0, 2**32 - 1))
def test_random_strings_match_the_oracle(backend, problem, seed):
    name, to_array, is_native = FRAMEWORKS[backend]()
    operands = random_operands(problem, np.random.default_rng(seed))
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    got = contract(problem.subscripts, *map(to_array, operands), optimize="greedy", **pins)
    assert is_native(got)
    close(got, loop_contract(problem.subscripts, operands, problem.group_shapes))


def sparse_shape(n: int, big: dict[int, int]) -> tuple[int, ...]:
    return tuple(big.get(i, 1) for i in range(n))


@pytest.mark.parametrize("backend", list(FRAMEWORKS))
@settings(max_examples=8, deadline=None)
@given(a_axes=st.integers(26, 32), b_axes=st.integers(12, 16), c_axes=st.integers(15, 20),
       seed=st.integers(0, 2**32 - 1))
def test_past_52_axes(backend, a_axes, b_axes, c_axes, seed):
    """A, B, C groups with mostly size-1 axes, so > 52 labels stay cheap for the oracle (each
    group stays <= 32 axes: the reference broadcasts group shapes with numpy)."""
    name, to_array, is_native = FRAMEWORKS[backend]()
    r = np.random.default_rng(seed)
    x = r.standard_normal(sparse_shape(a_axes + b_axes, {0: 2, a_axes: 3, a_axes + b_axes - 1: 2}))
    y = r.standard_normal(sparse_shape(b_axes + c_axes + 2, {0: 3, b_axes: 2, b_axes + c_axes: 2}))
    y = y + np.swapaxes(y, -1, -2)   # a diagonal 'ii' with genuine values
    lengths = {"A": a_axes, "B": b_axes, "C": c_axes}
    subscripts = "AB,BCii->ACi"
    assert a_axes + b_axes + c_axes + 1 > 52
    got = contract(subscripts, to_array(x), to_array(y), len_A=a_axes)
    assert is_native(got)
    close(got, loop_reference(subscripts, [x, y], lengths))


@pytest.mark.parametrize("backend", list(FRAMEWORKS))
def test_memory_limit_on_every_backend(backend):
    """numpy and torch run blocks within the limit; JAX takes only the path (XLA plans memory)."""
    name, to_array, is_native = FRAMEWORKS[backend]()
    shapes = [(40, 2, 30), (2, 30, 50, 60), (40, 2, 50)]
    ops = [seeded(name, "limit", k).standard_normal(s) for k, s in enumerate(shapes)]
    want = np.einsum("wca,caib,wci->wcb", *ops)
    got = contract("WCa,Caib,WCi->WCb", *map(to_array, ops), memory_limit=3000)
    assert is_native(got)
    close(got, want)
    report = explain("WCa,Caib,WCi->WCb", *map(to_array, ops), memory_limit=3000)
    assert ("blocks:" in report) == (name != "jax")
