"""dask backend: lazy blockwise contraction.

Results against the loop oracle on the repo's vocabulary and on random strings, with several
chunks along group, kept and contracted axes; nothing computes until asked (a counting
``dask.delayed`` source); kept axes keep their chunks; split contracted axes reduce as a
tree; disagreeing chunks are unified; diagonals, size-1 broadcasting, > 52 axes, numpy
operands lifted, the explain report's block and task counts, and the out-of-core example.
"""

from __future__ import annotations

import doctest
import threading
import warnings
import zlib

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
from dask.array.core import PerformanceWarning
from dask.core import get_dependencies
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import contract, contract_expression, explain, identifiability, make_plan, make_schedule
from contractions.backends import BackendOptions, backend_for, dask_backend
from contractions.schedule import schedule_labels

from ._references import loop_reference
from ._strategies import grouped_problems, needed_supplements, random_operands
from ._vocabulary import random_problem, vocabulary

TT = "WCa,Caib,WCi->WCb"


def close(actual, expected, tol=1e-10):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * max(1.0, float(np.abs(expected).max(initial=0))))


def compute(x):
    return x.compute(scheduler="sync")


def composition(n: int, rng: np.random.Generator) -> tuple[int, ...]:
    """A random split of extent ``n`` into chunks (several whenever n >= 2)."""
    if n < 2:
        return (n,)
    cuts = sorted(rng.choice(np.arange(1, n), size=int(rng.integers(1, min(n - 1, 2) + 1)), replace=False))
    edges = [0, *cuts, n]
    return tuple(int(b - a) for a, b in zip(edges, edges[1:]))


def axis_keys(term: str, group_shapes: dict) -> list[tuple[str, int]]:
    """(symbol, sub-axis) of each axis of an operand of ``term`` (lengths stated by the test)."""
    keys = []
    for symbol in term:
        count = len(group_shapes[symbol]) if symbol.isupper() else 1
        keys += [(symbol, k) for k in range(count)]
    return keys


def chunked(subscripts: str, operands, group_shapes: dict, rng: np.random.Generator):
    """dask operands with one random chunking per (symbol, sub-axis), shared by every operand."""
    lhs, out = subscripts.split("->")
    spec: dict = {}
    arrays = []
    for term, op in zip(lhs.split(","), operands):
        keys = axis_keys(term, group_shapes)
        assert len(keys) == op.ndim
        for key, n in zip(keys, op.shape):
            spec.setdefault(key, composition(n, rng))
        arrays.append(da.from_array(op, chunks=tuple(spec[key] for key in keys)))
    return arrays, [spec[key] for key in axis_keys(out, group_shapes)]


def lengths_of(subscripts: str, group_shapes: dict) -> dict:
    lengths = {g: len(s) for g, s in group_shapes.items()}
    lengths.update({c: 1 for c in subscripts if c.islower()})
    return lengths


# ------------------------------------------------------------------ the vocabulary
VOCABULARY = vocabulary()


@pytest.mark.parametrize("subscripts,pins", VOCABULARY, ids=[s for s, _ in VOCABULARY])
def test_vocabulary_matches_the_loop_oracle_with_several_chunks_per_axis(subscripts, pins):
    rng = np.random.default_rng(zlib.crc32(subscripts.encode()))
    problem = random_problem(subscripts, pins, rng, extents=(1, 3))
    arrays, out_chunks = chunked(subscripts, problem.operands, problem.group_shapes, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerformanceWarning)
        got = contract(subscripts, *arrays, **problem.len_kwargs)
    assert isinstance(got, da.Array)
    # Every operand chunks a label alike: the output keeps exactly those chunks.
    assert got.chunks == tuple(out_chunks)
    want = loop_reference(subscripts, problem.operands, lengths_of(subscripts, problem.group_shapes))
    result = compute(got)
    assert isinstance(result, (np.ndarray, np.generic)) and result.dtype == np.float64  # 0-d: a scalar
    close(result, want)


@settings(max_examples=60, deadline=None)
@given(grouped_problems(), st.integers(0, 2**32 - 1))
def test_random_strings_match_the_loop_oracle(problem, seed):
    rng = np.random.default_rng(seed)
    operands = random_operands(problem, rng)
    arrays, out_chunks = chunked(problem.subscripts, operands, problem.group_shapes, rng)
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    got = contract(problem.subscripts, *arrays, **pins)
    assert isinstance(got, da.Array) and got.chunks == tuple(out_chunks)
    want = loop_reference(problem.subscripts, operands, lengths_of(problem.subscripts, problem.group_shapes))
    close(compute(got), want)


# -------------------------------------------------------------- nothing computes
class CountingSource:
    """Blocks made by a ``dask.delayed`` function that counts its calls."""

    def __init__(self, seed: int) -> None:
        self.calls = 0
        self.seed = seed
        self._lock = threading.Lock()

    def block(self, index: int, shape: tuple[int, ...]) -> np.ndarray:
        with self._lock:
            self.calls += 1
        return np.random.default_rng([self.seed, index]).standard_normal(shape)

    def array(self, rows: tuple[int, ...], rest: tuple[int, ...]):
        pieces = [da.from_delayed(dask.delayed(self.block)(k, (n, *rest)), shape=(n, *rest), dtype=float)
                  for k, n in enumerate(rows)]
        return da.concatenate(pieces, axis=0)

    def numpy(self, rows: tuple[int, ...], rest: tuple[int, ...]) -> np.ndarray:
        return np.concatenate([np.random.default_rng([self.seed, k]).standard_normal((n, *rest))
                               for k, n in enumerate(rows)])


def test_contracting_computes_nothing_until_asked():
    source = CountingSource(7)
    rows = (3, 2, 3)
    x, z = source.array(rows, (2, 4)), source.array(rows, (2, 5))
    cores = np.random.default_rng(1).standard_normal((2, 4, 5, 3))
    y = contract(TT, x, cores, z)
    expr = contract_expression(TT, x.shape, cores.shape, z.shape)(x, cores, z)
    report = explain(TT, x, cores, z)
    plan = make_plan(TT, (x.shape, cores.shape, z.shape), ())
    dask_backend.describe_operands(plan, make_schedule(plan), BackendOptions(), [x, cores, z])
    assert source.calls == 0, "building the graph, explaining or describing it computed a block"
    assert "dask" in report and isinstance(y, da.Array) and isinstance(expr, da.Array)
    result = compute(y)
    assert source.calls == 2 * len(rows)   # every source block exactly once
    want = np.einsum("wca,caib,wci->wcb", source.numpy(rows, (2, 4)), cores, source.numpy(rows, (2, 5)))
    close(result, want)
    assert y.chunks[0] == rows


# ----------------------------------------------------------- chunks and graph shape
def test_kept_axes_keep_the_chunks_and_no_task_gathers_an_operand():
    rng = np.random.default_rng(2)
    x = da.from_array(rng.standard_normal((12, 6)), chunks=(3, 6))
    y = rng.standard_normal((6, 4))
    out = contract("Wa,ab->Wb", x, y)
    assert out.chunks == ((3, 3, 3, 3), (4,))
    dsk = dict(out.__dask_graph__())
    x_keys = set(x.__dask_graph__().keys())
    for key in dsk:
        assert len(get_dependencies(dsk, key) & x_keys) <= 1, "a task gathers blocks of x"
    close(compute(out), x.compute() @ y)


def test_split_contracted_axis_is_a_tree_reduction():
    rng = np.random.default_rng(3)
    x0, y0 = rng.standard_normal((4, 64)), rng.standard_normal((64, 3))
    x, y = da.from_array(x0, chunks=(2, 2)), da.from_array(y0, chunks=(2, 3))
    out = contract("Wa,ab->Wb", x, y)
    assert out.chunks == ((2, 2), (3,))
    dsk = dict(out.__dask_graph__())
    fan_in = max(len(get_dependencies(dsk, key)) for key in dsk)
    assert fan_in < 32, "one task sums all 32 partial products: not a tree"
    close(compute(out), x0 @ y0)


def test_disagreeing_chunks_are_unified_to_their_common_refinement():
    rng = np.random.default_rng(4)
    x0, z0 = rng.standard_normal((4, 2, 3)), rng.standard_normal((4, 2, 5))
    cores = rng.standard_normal((2, 3, 5, 6))
    x = da.from_array(x0, chunks=((2, 2), 2, 3))
    z = da.from_array(z0, chunks=((3, 1), 1, 5))
    out = contract(TT, x, cores, z)
    assert out.chunks[:2] == ((2, 1, 1), (1, 1))   # as dask.array.core.unify_chunks decides
    close(compute(out), np.einsum("wca,caib,wci->wcb", x0, cores, z0))


def test_numpy_operands_are_lifted_and_take_the_dask_chunks():
    rng = np.random.default_rng(5)
    x0, z0 = rng.standard_normal((6, 2, 3)), rng.standard_normal((6, 2, 5))
    cores = rng.standard_normal((2, 3, 5, 6))
    x = da.from_array(x0, chunks=(2, 1, 3))
    assert backend_for([x, cores, z0]).name == "dask"
    out = contract(TT, x, cores, z0)   # z0 shares W and C with x: it takes x's chunks
    assert isinstance(out, da.Array) and out.chunks[:2] == ((2, 2, 2), (1, 1))
    close(compute(out), np.einsum("wca,caib,wci->wcb", x0, cores, z0))
    lists = contract("Wa,a->W", x0[:, 0], [1.0, 2.0, 3.0])   # still numpy without a dask operand
    assert isinstance(lists, np.ndarray)


def test_diagonal_whose_two_axes_are_chunked_differently():
    rng = np.random.default_rng(6)
    x0 = rng.standard_normal((4, 5, 5))
    x = da.from_array(x0, chunks=((2, 2), (2, 3), (3, 2)))
    close(compute(contract("Wii->W", x)), np.einsum("wii->w", x0))
    y0 = rng.standard_normal((5, 4))
    got = contract("Wii,ib->Wb", x, da.from_array(y0, chunks=((1, 4), 2)))
    close(compute(got), np.einsum("wii,ib->wb", x0, y0))


def test_size_one_axes_broadcast_across_blocks():
    rng = np.random.default_rng(7)
    a0, b0 = rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((1, 5, 4, 6))
    a = da.from_array(a0, chunks=(1, 1, 3, 2))
    b = da.from_array(b0, chunks=(1, (2, 3), (2, 2), 3))
    out = contract("Wab,Wbc->Wac", a, b)
    assert out.chunks == ((1, 1), (2, 3), (3,), (3, 3))
    close(compute(out), np.einsum("uvab,uvbc->uvac", a0, b0))


def test_full_contraction_to_a_scalar_and_integer_dtypes():
    rng = np.random.default_rng(8)
    x0 = rng.integers(-3, 4, size=(6, 8)).astype(np.int32)
    x = da.from_array(x0, chunks=(2, 3))
    total = contract("Wa,Wa->", x, x)
    assert isinstance(total, da.Array) and total.shape == () and total.dtype == np.int32
    result = compute(total)
    assert result.dtype == np.int32 and int(result) == int(np.einsum("wa,wa->", x0, x0))
    mixed = contract("Wa,ab->Wb", x, rng.standard_normal((8, 2)).astype(np.float32))
    assert mixed.dtype == np.result_type(np.int32, np.float32) == compute(mixed).dtype


def test_zero_size_axis():
    x = da.zeros((0, 3), chunks=(1, 3))
    out = contract("Wa,ab->Wb", x, np.ones((3, 2)))
    assert out.shape == (0, 2) and compute(out).shape == (0, 2)


def test_more_than_52_axes():
    rng = np.random.default_rng(9)

    def sparse(n, big):
        return tuple(big.get(i, 1) for i in range(n))

    x0 = rng.standard_normal(sparse(50, {0: 2, 7: 3, 31: 2, 45: 2}))
    y0 = rng.standard_normal(sparse(30, {1: 2, 12: 3, 25: 2}))
    x = da.from_array(x0, chunks=tuple(1 if n > 1 else n for n in x0.shape))
    y = da.from_array(y0, chunks=tuple(1 if n > 1 else n for n in y0.shape))
    got = contract("AB,BC->AC", x, y, len_A=30)
    close(compute(got), loop_reference("AB,BC->AC", [x0, y0], {"A": 30, "B": 20, "C": 10}))


def test_preferred_element_type_casts_lazily():
    x = da.ones((4, 3), chunks=2, dtype=np.float32)
    out = contract("Wa,ab->Wb", x, np.ones((3, 2), np.float32), preferred_element_type=np.float64)
    assert out.dtype == np.float64 and compute(out).dtype == np.float64


def test_memory_limit_bounds_each_block(monkeypatch):
    limits = []
    program = dask_backend._block_program
    monkeypatch.setattr(dask_backend, "_block_program", lambda *args: limits.append(args[-1]) or program(*args))
    rng = np.random.default_rng(14)
    x0, z0 = rng.standard_normal((8, 2, 6)), rng.standard_normal((8, 2, 5))
    cores = rng.standard_normal((2, 6, 5, 4))
    x, z = da.from_array(x0, chunks=(4, 2, 6)), da.from_array(z0, chunks=(4, 2, 5))
    plan = make_plan(TT, (x.shape, cores.shape, z.shape), ())
    # The blocks' numpy schedule under a 16-element limit runs in blocks of its own.
    limited = schedule_labels(plan.expansion.inputs, plan.expansion.output, ((4, 2, 6), cores.shape, (4, 2, 5)),
                              make_schedule(plan).path, "pairwise", memory_limit=16)
    assert limited.blocking is not None
    got = contract(TT, x, cores, z, memory_limit=16)
    close(compute(got), np.einsum("wca,caib,wci->wcb", x0, cores, z0))
    assert limits == [16, 16]            # two W chunks, each a numpy call limited to 16 elements
    limits.clear()
    compute(contract(TT, x, cores, z))
    assert limits == ["default", "default"]   # numpy's default limit, for the block's shapes


def test_dask_arrays_of_non_numpy_blocks_are_refused():
    xp = pytest.importorskip("array_api_strict")
    x = da.ones((4, 3), chunks=2).map_blocks(lambda b: xp.asarray(b), meta=xp.empty((0, 0)))
    with pytest.raises(TypeError, match=r"operand 0 is a dask array of array_api_strict\..*numpy blocks only"):
        contract("Wa,ab->Wb", x, np.ones((3, 2)))


def test_dask_mixed_with_another_library_names_both():
    xp = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match=r"operands mix dask and array_api_strict arrays \(operand 0 .*operand 1"):
        contract("Wa,a->W", da.ones((2, 3)), xp.ones(3))
    with pytest.raises(TypeError, match=r"operands mix array_api_strict and dask arrays"):
        contract("Wa,a,a->W", xp.ones((2, 3)), np.ones(3), da.ones(3))


# -------------------------------------------------------------------- explain
def test_explain_and_describe_operands_count_blocks_and_tasks():
    rng = np.random.default_rng(10)
    x = da.from_array(rng.standard_normal((8, 2, 6)), chunks=(4, 2, 3))
    z = da.from_array(rng.standard_normal((8, 2, 5)), chunks=(2, 2, 5))
    cores = rng.standard_normal((2, 6, 5, 3))
    report = explain(TT, x, cores, z)
    assert "backend         dask" in report and "blockwise" in report and "tree reduction" in report
    plan = make_plan(TT, (x.shape, cores.shape, z.shape), ())
    lines = dask_backend.describe_operands(plan, make_schedule(plan), BackendOptions(), [x, cores, z])
    summary = dask_backend.summarise(plan, make_schedule(plan), BackendOptions(), [x, cores, z])
    # W unified to (2, 2, 2, 2), a split in two (x's chunks), C, i, b in one chunk each.
    assert summary.blocks == 4 * 2 and summary.split == ("a",)
    out = contract(TT, x, cores, z)
    added = set(dict(out.__dask_graph__())) - set(x.__dask_graph__().keys()) - set(z.__dask_graph__().keys())
    assert summary.tasks == len(added)
    assert f"blocks: {summary.blocks} " in "\n".join(lines)
    assert f"tasks this call adds: {len(added)} " in "\n".join(lines)


def test_module_docstring_examples():
    assert doctest.testmod(dask_backend).failed == 0


# ------------------------------------------------------------ the example, small
def test_out_of_core_example_at_small_size():
    pytest.importorskip("distributed")
    from examples import dask_out_of_core

    report = dask_out_of_core.run(dask_out_of_core.SMALL)
    assert report.max_error < 1e-10
    assert report.sampled_rows > 0 and report.peak_bytes > 0
    assert report.operand_bytes > report.chunk_bytes


def test_explain_on_dask_operands_counts_blocks_and_tasks():
    from contractions import explain

    x = da.ones((8, 2, 6), chunks=(4, 2, 3))
    cores = np.ones((2, 6, 5, 3))
    z = da.ones((8, 2, 5), chunks=(4, 2, 5))
    report = explain("WCa,Caib,WCi->WCb", x, cores, z)
    assert "backend         dask" in report
    assert "blocks: " in report and "tasks this call adds: " in report


def test_unknown_chunk_sizes_say_what_to_do():
    from contractions import ContractionError, contract

    x = da.ones((6, 3), chunks=(3, 3))
    x = x[x[:, 0] > 0]                      # a boolean mask: the row count is unknown
    with pytest.raises(ContractionError, match="compute_chunk_sizes"):
        contract("Wa,a->W", x, np.ones(3))
