"""Blocked execution under a memory limit: only the steps carrying a cut label run per block,
every copy the call makes is counted, and a limit past the block floor is refused.

References: the loop oracle (`contractions.testing.oracle.loop_contract`) and np.einsum on
hand-expanded strings; memory is measured with tracemalloc (numpy reports its array data).
"""

from __future__ import annotations

import functools
import itertools
import math
import tracemalloc
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import (
    ContractionError,
    MemoryLimitError,
    contract,
    contract_expression,
    explain,
    identifiability,
    make_plan,
    make_schedule,
)
from contractions import schedule as schedule_module
from contractions.backends import scratch
from contractions.backends.compile import compile_schedule
from contractions.backends.numpy_backend import NUMPY_OPS
from contractions.calls import runners, tiers
from contractions.model.numpy_prices import NUMPY_MODEL, NumpyCostModel
from contractions.model.profile import Profile
from contractions.schedule import MAX_BLOCKS, describe_schedule, schedule_labels
from contractions.testing.oracle import loop_contract

from ._strategies import grouped_problems, needed_supplements

#: What numpy may allocate beside the buffers a schedule counts (nditer and ufunc buffers,
#: small bookkeeping arrays, Python objects); the bound a call keeps is its limit plus this.
ALLOWANCE = 256 * 1024

LAYOUTS = ["C", "F", "transposed", "strided", "negative"]


def seeded(*parts: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def laid_out(a: np.ndarray, layout: str) -> np.ndarray:
    """The same values as ``a`` in another memory layout (a view where possible)."""
    a = np.asarray(a)
    if a.ndim == 0:
        return a
    if layout == "C":
        return np.ascontiguousarray(a)
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "transposed":
        return np.ascontiguousarray(a.T).T
    if layout == "strided":
        wide = np.zeros(tuple(n * 2 if n > 1 else 1 for n in a.shape), a.dtype)
        view = wide[tuple(slice(None, None, 2 if n > 1 else 1) for n in a.shape)]
        view[...] = a
        return view
    if layout == "negative":
        flipped = np.ascontiguousarray(a[tuple(slice(None, None, -1) for _ in a.shape)])
        return flipped[tuple(slice(None, None, -1) for _ in a.shape)]
    raise AssertionError(layout)


def close(got, want) -> None:
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


# -------------------------------------------------------------- steps inside the loop
def test_steps_without_a_cut_label_run_once_before_the_blocks():
    r = seeded("hoist")
    # a 60 x 60 x 60 product that carries no cut label: worth running once
    a, b, c, d = (r.standard_normal(s) for s in [(60, 60), (60, 60), (1000, 60), (1000, 50)])
    expr = contract_expression("ab,bc,Wc,Wd->Wad", a.shape, b.shape, c.shape, d.shape,
                               memory_limit=20000)
    blocking = expr.schedule.blocking
    assert blocking is not None and blocking.n_blocks > 1
    assert blocking.hoisted == (0,)                      # ab,bc->ac carries no cut label
    assert expr.schedule.steps[0].x_labels == (0, 1) and blocking.sliced == (False, False, True, True)
    # it runs once: the recorder sees one product of its result size, then the loop's steps
    log = []

    def logged(fn):
        def run(*args):
            out = fn(*args)
            log.append(out.size)
            return out
        return run

    assert NUMPY_OPS.matmul_c is not None   # intermediates are asked for in C order
    ops = NUMPY_OPS.__class__(**{**NUMPY_OPS.__dict__, "matmul": logged(NUMPY_OPS.matmul),
                                 "matmul_c": logged(NUMPY_OPS.matmul_c)})
    got = compile_schedule(expr.schedule, ops)(a, b, c, d)
    close(got, np.einsum("ab,bc,wc,wd->wad", a, b, c, d))
    assert log.count(3600) == 1 and len(log) == 1 + blocking.n_blocks
    report = explain("ab,bc,Wc,Wd->Wad", a, b, c, d, memory_limit=20000)
    lines = report.splitlines()
    once = lines.index("  once, before the blocks (these steps carry no cut label):")
    assert lines[once + 1].startswith("    step 1: (0, 1) matmul")
    assert lines[once + 2].startswith(f"  blocks: {blocking.n_blocks} (")
    assert all(not line.startswith("    step 1") for line in lines[once + 2:])


def test_blocks_are_written_in_the_order_the_steps_produce_them():
    # The last step yields 'kCb' + 'W...' order while the output is 'W...'; each block goes
    # into a buffer in the steps' order (no transposing write) and the call returns that
    # buffer permuted to output order, a view, as the unblocked call does.
    r = seeded("storage")
    x, y, z = (r.standard_normal(s) for s in [(6, 5, 4), (7, 5, 4, 3, 2), (6, 3)])
    subscripts = "WCa,KCaib,Wi->WKCb"
    # at the reference profile's prices (the path, and so the last step's order, follows them)
    plan = make_plan(subscripts, (x.shape, y.shape, z.shape), ())
    schedule = make_schedule(plan, memory_limit=1000, cost_model=NumpyCostModel(Profile()))
    blocking = schedule.blocking
    assert blocking is not None and blocking.n_blocks > 1
    assert sorted(blocking.storage) == sorted(schedule.output) and blocking.storage != schedule.output
    assert schedule.finish is not None and schedule.finish.permutation is not None
    # the full blocks write their result as it comes (only a reshape, never a permutation)
    assert all(inner.finish is not None and inner.finish.permutation is None
               for lengths, inner in blocking.inner if lengths == blocking.chunks)
    got = compile_schedule(schedule, NUMPY_OPS)(x, y, z)
    close(got, np.einsum("wca,kcaib,wi->wkcb", x, y, z))
    assert got.shape == (6, 7, 5, 2) and not got.flags.c_contiguous and got.base is not None
    assert any(line.startswith("finish: blocks written in") for line in describe_schedule(schedule))


def test_block_sizes_keep_the_products_large():
    # One big operand and a small chain: the cut goes through the batch, never through the
    # small matrices, and the small product is hoisted.
    r = seeded("large")
    x, m1, m2, y = (r.standard_normal(s) for s in [(4000, 64), (64, 64), (64, 64), (4000, 64)])
    expr = contract_expression("Wi,ij,jk,Wk->W", x.shape, m1.shape, m2.shape, y.shape,
                               memory_limit=150_000, optimize=[(1, 2), (0, 2), (0, 1)])
    blocking = expr.schedule.blocking
    assert blocking is not None and blocking.labels == (0,)          # only W is cut
    assert blocking.hoisted == (0,)
    assert blocking.chunks[0] >= 256                                  # large BLAS shapes
    close(expr(x, m1, m2, y), np.einsum("wi,ij,jk,wk->w", x, m1, m2, y, optimize=True))


def test_a_limit_past_the_block_floor_is_refused_with_the_smallest_that_works():
    a = seeded("floor").standard_normal((100, 100))
    with pytest.raises(MemoryLimitError, match=r"memory_limit=10 elements cannot be honoured: "
                       r"within 10,000 blocks this contraction needs at least ([0-9,]+).*pass "
                       r"memory_limit=[0-9]+ or more, or memory_limit=None") as info:
        contract("ij,jk,kl->il", a, a, a, memory_limit=10)
    works = info.value.smallest_limit
    assert isinstance(info.value, ContractionError) and works is not None and works > 10
    assert f"{works:,}" in str(info.value)
    expr = contract_expression("ij,jk,kl->il", a.shape, a.shape, a.shape, memory_limit=works)
    assert expr.schedule.blocking.n_blocks <= MAX_BLOCKS
    assert expr.schedule.peak_extra <= works
    close(expr(a, a, a), a @ a @ a)


def test_blocking_plans_each_kind_of_block_once():
    # The chunk search prices trials from the whole schedule's steps; it schedules only the
    # final kinds of block (full chunks and each shorter last chunk): no re-planning per trial.
    schedule_labels.cache_clear()
    plan = make_plan("ij,jk,kl->il", ((150, 140), (140, 130), (130, 120)), ())
    schedule = make_schedule(plan, memory_limit=2000)
    blocking = schedule.blocking
    assert blocking is not None
    kinds = len(blocking.inner)
    assert kinds <= 2 ** len(blocking.labels)
    # the whole-shape schedule, plus at most every kind of block for the two cheapest orders
    assert schedule_labels.cache_info().misses <= 1 + 2 * 2 ** len(blocking.labels) + 2


# -------------------------------------------------- blocked execution vs the oracle
@settings(max_examples=60, deadline=None)
@given(grouped_problems(max_terms=4, max_group_axes=2), st.integers(0, 2**32 - 1),
       st.sampled_from([1, 2, 3, 5, 8, 40, 300]),
       st.lists(st.sampled_from(LAYOUTS), min_size=4, max_size=4),
       st.lists(st.sampled_from(["float64", "float32", "int64", "complex128"]), min_size=4,
                max_size=4),
       st.sampled_from([None, "float64", "complex128"]))
def test_blocked_execution_matches_the_oracle_over_layouts_and_dtypes(problem, seed, limit, layouts,
                                                                     dtypes, dtype):
    rng = np.random.default_rng(seed)
    operands = []
    for k, shape in enumerate(problem.operand_shapes()):
        base = np.asarray(rng.standard_normal(shape) * 3)
        kind = np.dtype(dtypes[k])
        value = np.round(base).astype(kind) if kind.kind == "i" else base.astype(kind)
        operands.append(laid_out(value, layouts[k]))
    if dtype is not None and not np.can_cast(np.result_type(*operands), dtype):
        dtype = None                     # dtype= only widens here (complex -> real would warn)
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    want = loop_contract(problem.subscripts,
                         [a.astype(dtype) if dtype is not None else a for a in operands],
                         problem.group_shapes)
    try:
        got = contract(problem.subscripts, *operands, memory_limit=limit, dtype=dtype, **pins)
    except MemoryLimitError as err:      # a tiny explicit limit may be impossible: say so
        assert err.smallest_limit is None or err.smallest_limit > limit
        assert f"memory_limit={limit:,} elements cannot be honoured" in str(err)
        return
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4 if got.dtype == np.float32 else 1e-9, atol=1e-4)
    report = explain(problem.subscripts, *operands, memory_limit=limit, **pins)
    if "pairwise" in report and dtype is None:
        peak = int(report.split("peak extra")[1].split()[0].replace(",", ""))
        assert peak <= limit


def test_blocked_execution_with_hoisting_past_52_axes():
    r = seeded("b52")
    x = r.standard_normal((3,) + (1,) * 28 + (4, 5))     # A: 29 axes, then i, j
    y = r.standard_normal((1,) * 25 + (5, 6))            # B: 25 axes, then j, k
    z = r.standard_normal((6, 7))                        # k, l
    w = r.standard_normal((7, 9))                        # l, m
    expr = contract_expression("Aij,Bjk,kl,lm->ABim", x.shape, y.shape, z.shape, w.shape, len_A=29,
                               memory_limit=30, optimize=[(2, 3), (0, 1), (0, 1)])
    assert len(expr.plan.expansion.symbols) > 52
    blocking = expr.schedule.blocking
    assert blocking is not None and expr.schedule.peak_extra <= 30
    want = np.einsum("aij,jk,kl,lm->aim", x.reshape(3, 4, 5), y.reshape(5, 6), z, w)
    close(expr(x, y, z, w).reshape(3, 4, 9), want)
    for layout in LAYOUTS[1:]:
        close(contract("Aij,Bjk,kl,lm->ABim", laid_out(x, layout), y, laid_out(z, layout), w,
                       len_A=29, memory_limit=30).reshape(3, 4, 9), want)


# --------------------------------------------------------------- every byte counted
def traced_extra(func) -> tuple[int, np.ndarray]:
    # An empty scratch pool: the call allocates its copies and intermediates as a first call
    # does (a warm pool would hide them; tests/test_scratch.py checks both).
    scratch.clear_scratch()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = func()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return peak - result.nbytes, result


CASES = [
    ("ij,jk->ik", [(600, 500), (500, 400)]),
    ("Wi,iK,WK->WK", [(400, 50), (50, 400), (400, 400)]),
    ("WCa,Caib,WCi->WCb", [(60, 2, 40), (2, 40, 50, 30), (60, 2, 50)]),
    ("ab,bc,Wc,Wd->Wad", [(30, 30), (30, 30), (2000, 30), (2000, 20)]),
    # its first step reads a permuted view: matmul's result must still be a C array, or the
    # next step copies it (0.5M elements past the count before intermediates asked for C)
    ("WCpqr,Cip,Cjq,Ckr->WCijk", [(36, 64, 6, 6, 6), (64, 6, 6), (64, 6, 6), (64, 6, 6)]),
    # W and a run as batch labels and are summed after (no gather): the product before the sum
    # is 600,000 elements; under the small limit, blocks over W, each summing its own a
    ("Waib,Wajb->ij", [(40, 30, 20, 30), (40, 30, 25, 30)]),
]


DTYPE_MIXES = [(("float64",), None), (("float32", "float64"), None), (("float32",), "float64"),
               (("float64",), "complex128")]


def allowance(itemsize: int) -> int:
    """`ALLOWANCE`, for elements wider than 8 bytes scaled with them (numpy's ufunc buffers
    are counted in elements: 8192 per operand)."""
    return ALLOWANCE * max(1, itemsize // 8)


@pytest.mark.parametrize("case,layout,mix", [
    (case, layout, DTYPE_MIXES[(k + j) % len(DTYPE_MIXES)])
    for k, case in enumerate(CASES) for j, layout in enumerate(LAYOUTS)],
    ids=[f"{c[0]}-{layout}" for c in CASES for layout in LAYOUTS])
def test_peak_extra_is_what_the_call_allocates(case, layout, mix):
    subscripts, shapes = case
    dtypes, dtype = mix
    for limit in ("default", 30_000):
        r = seeded(subscripts, layout)
        operands = [laid_out(r.standard_normal(s).astype(dtypes[k % len(dtypes)]),
                             layout if k != 1 else "C") for k, s in enumerate(shapes)]
        kwargs = {"memory_limit": limit, "dtype": dtype}
        want = np.einsum(_hand(subscripts),
                         *(a.astype(dtype or np.result_type(*operands)) for a in operands),
                         optimize=True)
        contract(subscripts, *operands, **kwargs)          # plan and compile outside the measurement
        extra, got = traced_extra(functools.partial(contract, subscripts, *operands, **kwargs))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        itemsize = got.itemsize
        plan = make_plan(subscripts, tuple(a.shape for a in operands), ())
        default_bound = max(max(math.prod(s) for s in shapes), math.prod(plan.output_shape),
                            schedule_module.DEFAULT_LIMIT_FLOOR)
        bound = default_bound if limit == "default" else limit
        # the schedule the call ran: a first call's tier (calls/tiers.py) may be cheaper
        # than the full search; asked again now, the tiers give that same schedule
        schedule = tiers.first_schedule(plan, "auto", True, limit,
                                        schedule_module_layouts(operands, dtype), remember=False).schedule
        assert schedule.peak_extra <= bound
        # what the call allocated is what the schedule counted (numpy's own buffers aside) ...
        assert extra <= schedule.peak_extra * itemsize + allowance(itemsize), (
            limit, extra, schedule.peak_extra * itemsize)
        # ... and so within the limit
        assert extra <= bound * itemsize + allowance(itemsize)


def schedule_module_layouts(operands, dtype):
    target = np.dtype(dtype) if dtype is not None else np.result_type(*operands)
    # what the call passes: C arrays 0, Fortran arrays read through their transpose, others strided
    codes = tuple((0 if a.flags.c_contiguous else schedule_module.FORTRAN if a.flags.f_contiguous
                   else schedule_module.STRIDED)
                  | (schedule_module.CONVERTED if a.dtype != target else 0) for a in operands)
    return codes if any(codes) else None


def _hand(subscripts: str) -> str:
    # every group in these cases has one axis: its letter, lowercased, is the expansion
    return subscripts.lower()


def test_fortran_operands_are_read_through_their_transpose_and_strided_ones_are_counted():
    a = seeded("T").standard_normal((700, 700))
    # A transposed C array is Fortran-ordered: read as its transpose, BLAS takes it as is.
    report = explain("ij,jk->ik", a.T, a.T, memory_limit=1000)
    assert "prepare operand 0: read as its transpose (Fortran order) -> ji" in report
    assert "peak extra      0 elements" in report and "blocks:" not in report
    extra, got = traced_extra(functools.partial(contract, "ij,jk->ik", a.T, a.T, memory_limit=1000))
    close(got, a.T @ a.T)
    assert extra <= 1000 * 8 + ALLOWANCE
    # A strided operand needs a contiguous copy for BLAS: counted, and blocked to the limit.
    s = laid_out(a, "strided")
    report = explain("ij,jk->ik", s, a, memory_limit=100_000)
    peak = int(report.split("peak extra")[1].split()[0].replace(",", ""))
    assert 0 < peak <= 100_000 and "blocks:" in report
    extra, got = traced_extra(functools.partial(contract, "ij,jk->ik", s, a, memory_limit=100_000))
    close(got, a @ a)
    assert extra <= 100_000 * 8 + ALLOWANCE


@pytest.mark.parametrize("combo", list(itertools.product(["C", "F"], ["float64", "float32"])))
def test_the_warm_path_replans_for_strided_or_mixed_operands(combo):
    layout, kind = combo
    r = seeded("warm", *combo)
    x, y = r.standard_normal((500, 300)), r.standard_normal((300, 400))
    contract("ij,jk->ik", x, y, memory_limit=20_000)   # the C, float64 program, now warm
    other = laid_out(x.astype(kind), layout)
    extra, got = traced_extra(lambda: contract("ij,jk->ik", other, y, memory_limit=20_000))
    close(got.astype(np.float64), other.astype(np.float64) @ y) if kind == "float64" else \
        np.testing.assert_allclose(got, other.astype(np.float64) @ y, rtol=1e-5)
    assert extra <= 20_000 * 8 + ALLOWANCE


# ------------------------------------------------ cost models and declared capabilities
def test_the_cost_model_is_a_parameter_of_the_schedule():
    plan = make_plan("Wij,Wjk->Wik", ((40, 30, 30), (40, 30, 30)), ())
    assert make_schedule(plan).strategy == "pairwise"
    eager = NUMPY_MODEL.with_prices(direct_max_naive=10**9, direct_max_naive_many_labels=10**9)
    assert make_schedule(plan, cost_model=eager).strategy == "direct"
    assert make_schedule(plan, cost_model=NUMPY_MODEL) == make_schedule(plan)
    # a model whose blocks cost more takes fewer, larger blocks for the same limit
    shapes = ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50))
    tt = make_plan("WCa,Caib,WCi->WCb", shapes, ())
    cheap = make_schedule(tt, memory_limit=20_000)
    dear = make_schedule(tt, memory_limit=20_000, cost_model=NUMPY_MODEL.with_prices(ns_per_block=1e9))
    assert cheap.blocking is not None and dear.blocking is not None
    assert dear.blocking.n_blocks <= cheap.blocking.n_blocks


def test_backends_declare_what_they_honour():
    from contractions.backends import Backend, backend_named

    jax_entry, torch_entry = backend_named("jax"), backend_named("torch")
    assert not jax_entry.honours_memory_limit
    assert torch_entry.honours_memory_limit and not torch_entry.blocks_by_default
    assert backend_named("numpy").blocks_by_default
    assert not backend_named("array_api").uses_einsum
    assert runners.backend_limit(jax_entry, 1000) is None
    assert runners.backend_limit(torch_entry, "default") is None and runners.backend_limit(torch_entry, 9) == 9
    mine = Backend("mine", None, lambda op: False, "contractions.backends.numpy_backend",
                   blocks_by_default=True)
    assert runners.backend_limit(mine, "default") == "default"


def test_the_array_api_backend_compiles_the_schedule_it_is_given():
    from contractions.backends import array_api_backend, backend_named
    from contractions.calls.runners import planned

    shapes = ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50))
    plan = make_plan("WCa,Caib,WCi->WCb", shapes, ())
    schedule = planned(plan, "auto", None, None, backend_named("array_api").uses_einsum)
    assert {step.kernel for step in schedule.steps} <= {"matmul", "multiply"}
    assert array_api_backend.standard_schedule(plan, schedule) is schedule     # not re-planned


# --------------------------------------------------------------- cache-sized blocks
def _small_cache(elements: int):
    # the reference profile's prices with a stated cache, not this machine's (its last-level
    # cache moves the memory prices the blocks are weighed against)
    return NumpyCostModel(Profile()).with_prices(cache_elements=elements)


def test_a_bandwidth_bound_chain_runs_in_cache_sized_blocks():
    r = seeded("cache")
    x, m, y = r.standard_normal((200_000, 8)), r.standard_normal((8, 8)), r.standard_normal((200_000, 8))
    plan = make_plan("Bi,ij,Bj->B", (x.shape, m.shape, y.shape), ())
    schedule = make_schedule(plan, memory_limit="default", cost_model=_small_cache(65536))
    blocking = schedule.blocking
    assert blocking is not None and blocking.purpose == "cache" and blocking.n_blocks > 1
    assert not blocking.accumulate and schedule.peak_extra <= 2 * 65536
    assert schedule.memory_limit == make_schedule(plan, memory_limit="default").memory_limit
    assert make_schedule(plan, memory_limit=None, cost_model=_small_cache(65536)).blocking is None
    close(compile_schedule(schedule, NUMPY_OPS)(x, m, y), np.einsum("bi,ij,bj->b", x, m, y))
    assert "cache-sized: a bandwidth-bound chain" in "\n".join(describe_schedule(schedule))


@pytest.mark.parametrize("subscripts,shapes,optimize,cache", [
    ("ij,jk,kl->il", [(300, 300)] * 3, "auto", 4096),             # compute-bound: BLAS blocks itself
    ("Bi,ij,Bj->B", [(200_000, 8), (8, 8), (200_000, 8)], "greedy", 65536),   # a path asked for
    ("Bi,ij,Bj->B", [(200_000, 8), (8, 8), (200_000, 8)], "auto", 0),         # turned off
    ("Bi,ij,Bj->B", [(8_000, 8), (8, 8), (8_000, 8)], "auto", 65536),         # it fits already
])
def test_cache_sized_blocks_only_where_they_apply(subscripts, shapes, optimize, cache):
    plan = make_plan(subscripts, tuple(shapes), ())
    schedule = make_schedule(plan, optimize, memory_limit="default", cost_model=_small_cache(cache))
    assert schedule.blocking is None


# ---------------------------------------------------------------- slices handed over strided
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
def test_a_reshape_is_a_view_exactly_where_numpy_makes_one(shape, data):
    from contractions.schedule.strides import reshaped_strides

    full = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    cut = tuple(slice(0, data.draw(st.integers(1, n))) for n in shape)
    block = full[cut].transpose(data.draw(st.permutations(range(len(shape)))))
    sizes = [n for n in block.shape]
    target = data.draw(st.sampled_from([(math.prod(sizes),), tuple(sizes),
                                        (sizes[0], math.prod(sizes[1:])) if len(sizes) > 1 else (sizes[0],),
                                        (math.prod(sizes[:-1]), sizes[-1])]))
    found = reshaped_strides(block.shape, [s // 8 for s in block.strides], target)
    view = block.view()
    try:
        view.shape = target
    except AttributeError:
        assert found is None
        return
    assert found is not None
    # numpy's strides for axes of length 1 are arbitrary: compare the others
    assert [s for s, n in zip(found, target) if n != 1] == [s // 8 for s, n in zip(view.strides, target) if n != 1]


def test_a_slice_that_stays_a_stack_of_blas_matrices_is_not_copied_per_block():
    # 'abk,bkn,bn->abn' cut along b (the middle axis of x): each block's slice of x is a
    # strided array, but its (a x k) matrices lie as BLAS reads them: handed over strided
    # (slices of more than `memory_threshold` elements only: smaller ones stay in cache
    # copied, which BLAS reads faster; a profile with a small threshold makes these large)
    shapes = ((40, 50, 30), (50, 30, 60), (50, 60))
    arrays = [np.random.default_rng(3).standard_normal(s) for s in shapes]
    model = NumpyCostModel(Profile(memory_threshold=4_000))
    schedule = make_schedule(make_plan("abk,bkn,bn->abn", shapes, ()), memory_limit=100_000, cost_model=model)
    blocking = schedule.blocking
    assert blocking is not None and blocking.labels == (1,) and blocking.sliced[0]
    # x reaches the product (its last step) as its slice, permuted to (b, a, k): not copied
    # (in the full blocks; the last, 1 long, is squeezed first: another array, copied)
    full = blocking.inner[0][1].steps[-1].x_view
    assert full.permutation == (1, 0, 2) and not full.contiguous_first and not full.gather
    assert blocking.in_place   # and the product is written straight into its slice
    want = np.einsum("abk,bkn,bn->abn", *arrays)
    got = compile_schedule(schedule, NUMPY_OPS)(*arrays)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    # under the reference profile these slices are small: copied
    small = make_schedule(make_plan("abk,bkn,bn->abn", shapes, ()), memory_limit=100_000,
                          cost_model=NumpyCostModel(Profile())).blocking
    assert small is not None and small.inner[0][1].steps[-1].x_view.contiguous_first
    # and the copies the blocks no longer make are not priced: the same blocks, copies
    # counted, cost more
    from contractions.schedule.blocking import _slice_copies_ns, _structure

    base = blocking.base
    sliced, hoisted = _structure(base, {1})
    loop = [k for k in range(len(base.steps)) if k not in hoisted]
    (_, block), *_ = blocking.inner
    assert _slice_copies_ns(base, loop, sliced, block.extents, model, block) < _slice_copies_ns(
        base, loop, sliced, block.extents, model)


def test_a_slice_whose_matrix_rows_break_is_still_made_contiguous():
    from contractions.schedule.ir import View
    from contractions.schedule.strides import slice_is_a_view

    def lowered(shape):
        return schedule_labels(((0, 1, 2), (2, 3)), (0, 1, 3), (shape, (30, 7)), strategy="pairwise")

    base, half = lowered((6, 40, 30)), lowered((6, 20, 30))
    # the cut middle axis merged with the one before it: rows 30 apart in runs of 20, then a
    # jump; merged with the one after, rows of 600 still 1200 apart: a matrix as it lies
    assert not slice_is_a_view(base, half, 0, View(None, (120, 30), contiguous_first=True))
    assert slice_is_a_view(base, half, 0, View(None, (6, 20 * 30), contiguous_first=True))
    assert slice_is_a_view(base, base, 0, View(None, (6, 1200), contiguous_first=True))   # uncut
    assert not slice_is_a_view(base, base, 0, View(None, (6, 1200), gather=True))
    # a block whose cut axis is 1 long is prepared (squeezed): its views are of another array
    assert not slice_is_a_view(base, lowered((6, 1, 30)), 0, View(None, (6, 30), contiguous_first=True))


def test_a_blocks_last_product_is_written_straight_into_its_slice():
    from dataclasses import replace as replaced

    from contractions.schedule.strides import writes_in_place

    # 'Bi,Mij,Bj->MB' under the default bound: the blocks cut B's first axis, in the middle of
    # the result's storage order; each block's product writes its matrices into the buffer
    # as they lie
    shapes = ((16, 16, 48), (16, 16, 48, 48), (16, 16, 48))
    arrays = [np.random.default_rng(5).standard_normal(s) for s in shapes]
    # (priced by the reference profile, not this machine's caches and threads)
    schedule = make_schedule(make_plan("Bi,Mij,Bj->MB", shapes, (("B", 2),)),
                             memory_limit="default", cost_model=NumpyCostModel(Profile()))
    blocking = schedule.blocking
    assert blocking is not None and blocking.in_place and not blocking.accumulate
    assert blocking.storage.index(blocking.labels[0]) > 0
    want = np.einsum("abi,cdij,abj->cdab", *arrays)
    np.testing.assert_allclose(compile_schedule(schedule, NUMPY_OPS)(*arrays), want, rtol=1e-12,
                               atol=1e-12 * np.abs(want).max())
    # a backend without matmul_into copies each block into its slice: the same result
    copying = replaced(NUMPY_OPS, matmul_into=None)
    np.testing.assert_allclose(compile_schedule(schedule, copying)(*arrays), want, rtol=1e-12,
                               atol=1e-12 * np.abs(want).max())
    # what decides it: a block in storage order written, not added, into its slice
    block = blocking.inner[0][1]
    storage_shape = tuple(schedule.extents[lab] for lab in blocking.storage)
    assert writes_in_place(block, storage_shape, False)
    assert not writes_in_place(block, storage_shape, True)           # added into the buffer: no
    permuted = evolve_finish(block)
    assert not writes_in_place(permuted, storage_shape, False)       # a block in another order: no


def evolve_finish(block):
    from contractions.schedule.ir import evolve

    return evolve(block, finish=evolve(block.finish, permutation=tuple(reversed(range(len(block.finish.shape))))))


#: every slice counts as large: each block's slices that BLAS can read strided go over strided
_WALLED = NumpyCostModel(Profile(memory_threshold=16))


@st.composite
def _product_chains(draw):
    """A batched product followed by a third operand, every label order and output order:
    blocks whose slices and last products take every stride (B, M, K, N, P are 0..4)."""
    ext = {label: draw(st.integers(2, 24)) for label in range(5)}
    x, y = tuple(draw(st.permutations([0, 1, 2]))), tuple(draw(st.permutations([0, 2, 3])))
    z = draw(st.sampled_from([(0, 3), (3, 4), (0, 3, 4), (1, 3)]))
    output = tuple(draw(st.permutations(sorted({*x, *y, *z} - {2}))))
    return (x, y, z), output, tuple(tuple(ext[label] for label in t) for t in (x, y, z))


@settings(max_examples=120, deadline=None)
@given(_product_chains(), st.sampled_from([0.1, 0.3, 0.6]), st.integers(0, 2**32 - 1))
def test_strided_slices_and_products_written_in_place_match_numpy(problem, share, seed):
    # (about a third of these hand slices over strided and one in ten writes in place)
    inputs, output, shapes = problem
    limit = max(64, int(share * sum(math.prod(shape) for shape in shapes)))
    try:
        schedule = schedule_labels(inputs, output, shapes, strategy="pairwise", memory_limit=limit,
                                   cost_model=_WALLED)
    except MemoryLimitError:
        return
    rng = np.random.default_rng(seed)
    operands = [rng.standard_normal(shape) for shape in shapes]
    letters = "bmknp"
    want = np.einsum(",".join("".join(letters[lab] for lab in t) for t in inputs) + "->"
                     + "".join(letters[lab] for lab in output), *operands)
    np.testing.assert_allclose(compile_schedule(schedule, NUMPY_OPS)(*operands), want, rtol=1e-10,
                               atol=1e-10 * np.abs(want).max(initial=1.0))
    if schedule.blocking is not None and schedule.blocking.in_place:
        # where a backend cannot write in place, the copies give the same
        from dataclasses import replace as replaced

        copied = compile_schedule(schedule, replaced(NUMPY_OPS, matmul_into=None))(*operands)
        np.testing.assert_allclose(copied, want, rtol=1e-10, atol=1e-10 * np.abs(want).max(initial=1.0))
