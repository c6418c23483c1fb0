"""The time model's memory terms: how an array is walked (`access_pattern`), what reading it
costs past the caches (`strided_read_ns`, `streamed_ns`), and that the schedule prices each
step the same way wherever it prices it (lowering and blocking).

Expected values are worked out by hand from strides written in the test, not read back from
the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import contract
from contractions.model.layout import MatmulFactor, best_matmul_layout, factor_order, factor_read_ns
from contractions.model.numpy_prices import (
    FAR_JUMP_ELEMENTS,
    NEAR_JUMP_ELEMENTS,
    NumpyCostModel,
    access_pattern,
    einsum_step_ns,
    einsum_walk,
    gather_passes,
)
from contractions.model.profile import Profile
from contractions.model.protocol import Access, size_of
from contractions.plan import make_plan
from contractions.schedule import make_schedule, schedule_labels
from contractions.schedule.blocking import _step_cost

# The numpy model at the reference profile's prices (a 1 MiB L2, a 32 MiB last-level cache:
# arrays past 2**20 float64 elements are read from memory; two BLAS threads): the shapes below
# are sized for those thresholds, which the profile of the machine running the tests would move.
MODEL = NumpyCostModel(Profile())
STREAMS_PREFETCHED = MODEL.profile.streams_prefetched
TLB_PAGES = MODEL.profile.tlb_pages
BIG = MODEL.memory_elements() + 1


# ------------------------------------------------------------------------- access_pattern
def test_a_walk_in_memory_order_is_one_run():
    assert access_pattern((0, 1, 2), (0, 1, 2), {0: 3, 1: 4, 2: 5}) == Access(60, 0)


def test_a_walk_that_moves_an_outer_axis_inside_reads_runs_of_the_trailing_ones():
    # stored (0, 1, 2, 3) with extents 2, 3, 4, 5: strides 60, 20, 5, 1
    ext = {0: 2, 1: 3, 2: 4, 3: 5}
    # (60 apart, past `NEAR_JUMP_ELEMENTS`: 2 interleaved streams, continued along label 1)
    assert access_pattern((0, 1, 2, 3), (1, 0, 2, 3), ext) == Access(20, 60, streams=2)
    # runs of 5 whose lines hold the next value of label 2: label 1 (3 lines) is walked
    # before the walk comes back to them
    assert access_pattern((0, 1, 2, 3), (0, 2, 1, 3), ext) == Access(5, 20, lines=3)


def test_a_sub_line_run_counts_the_lines_and_pages_of_its_reuse_window():
    # stored (0, 1) = 64 x 1000 (strides 1000, 1); walked transposed: each read jumps 1000
    # elements, and 64 reads (64 lines, 64 pages of 512 elements) pass before the walk comes
    # back to the next element of the first line
    ext = {0: 64, 1: 1000}
    got = access_pattern((0, 1), (1, 0), ext)
    assert (got.run, got.jump, got.lines, got.pages) == (1, 1000, 64, 64)
    # a jump of 100 elements stays within a page
    near = access_pattern((0, 1), (1, 0), {0: 64, 1: 100})
    assert (near.lines, near.pages) == (64, 1)


def test_a_block_cut_ends_the_run_at_the_cut_label():
    # stored (0, 1, 2), extents 4, 6, 8; a block of 3 along label 1 reads runs of 3 * 8
    ext = {0: 4, 1: 6, 2: 8}
    assert access_pattern((0, 1, 2), (0, 1, 2), ext, {0: 4, 1: 3, 2: 8}) == Access(24, 48)


def test_far_runs_continued_by_a_near_outer_axis_are_counted_as_streams():
    # stored (0, 1, 2) = 4 x 512 x 16 (strides 8192, 16, 1), walked (1, 0, 2): runs of 16,
    # 8192 apart; the 4 values of label 0 are read in turn, then label 1 steps 16 elements on
    # and continues all four
    assert access_pattern((0, 1, 2), (1, 0, 2), {0: 4, 1: 512, 2: 16}) == Access(
        16, 8192, streams=4)
    # walked (0, 2, 1) instead: runs of 1 -- the stream count is for runs of a line or more
    assert access_pattern((0, 1, 2), (0, 2, 1), {0: 4, 1: 512, 2: 16}).streams == 0
    # no near axis outside the break: the runs are never continued
    ext = {0: 600, 1: 16}
    assert access_pattern((0, 1), (0, 1), ext, {0: 600, 1: 8}).streams == 0


def test_labels_of_extent_one_and_labels_not_stored_are_ignored():
    ext = {0: 1, 1: 7, 2: 9, 3: 5}
    assert access_pattern((0, 1, 2), (3, 2, 0, 1), ext) == access_pattern((1, 2), (2, 1), ext)


def test_near_runs_count_the_streams_they_interleave():
    # stored (n, k, r) = (1000, 48, 8) walked (k, n, r): runs of 8 whose starts are 384 apart
    # (under a page), each continued one line further on the next k: 1000 streams
    ext = {0: 1000, 1: 48, 2: 8}
    assert access_pattern((0, 1, 2), (1, 0, 2), ext) == Access(run=8, jump=384, streams=1000)
    # with only 4 rows, 4 streams
    ext4 = {0: 4, 1: 48, 2: 8}
    assert access_pattern((0, 1, 2), (1, 0, 2), ext4) == Access(run=8, jump=384, streams=4)
    # starts 3 lines (192 B) apart count as following each other: no streams counted
    ext3 = {0: 1000, 1: 3, 2: 8}
    assert access_pattern((0, 1, 2), (1, 0, 2), ext3) == Access(run=8, jump=24)
    # 48-long runs 3 runs apart are far enough: a stream each
    ext48 = {0: 1000, 1: 3, 2: 48}
    assert access_pattern((0, 1, 2), (1, 0, 2), ext48) == Access(run=48, jump=144, streams=1000)


# ------------------------------------------------------------------------ strided_read_ns
def test_arrays_within_the_cache_and_long_runs_cost_nothing_extra():
    far = Access(run=8, jump=10 * FAR_JUMP_ELEMENTS)
    assert MODEL.strided_read_ns(MODEL.memory_elements(), far) == 0.0
    assert MODEL.strided_read_ns(BIG, Access(run=4096, jump=10**6)) == 0.0
    # runs that nearly follow each other: the prefetcher keeps up
    assert MODEL.strided_read_ns(BIG, Access(run=8, jump=NEAR_JUMP_ELEMENTS - 8)) == 0.0


def test_runs_a_few_runs_apart_within_a_page_pay_per_run():
    m = MODEL
    elements = 8 * (BIG // 8 + 1)
    near = m.strided_read_ns(elements, Access(run=8, jump=NEAR_JUMP_ELEMENTS))
    assert near == pytest.approx(elements / 8 * m.profile.ns_per_near_run) and near > 0
    # the same price up to a page, then the far price takes over
    assert m.strided_read_ns(elements, Access(run=8, jump=FAR_JUMP_ELEMENTS - 1)) == near
    assert m.strided_read_ns(elements, Access(run=8, jump=FAR_JUMP_ELEMENTS)) > near
    # longer runs: fewer of them
    assert m.strided_read_ns(elements, Access(run=32, jump=64)) == pytest.approx(near / 4)
    # a few interleaved streams stay free, as for far runs
    assert m.strided_read_ns(elements, Access(run=8, jump=64, streams=STREAMS_PREFETCHED)) == 0.0


def test_runs_a_page_apart_pay_per_run_and_per_line():
    m = MODEL
    one_line = m.strided_read_ns(8 * 1000 + BIG - BIG % 8, Access(run=8, jump=FAR_JUMP_ELEMENTS))
    elements = 8 * 1000 + BIG - BIG % 8
    assert one_line == pytest.approx(elements / 8 * (m.profile.ns_per_far_run + m.profile.ns_per_far_line))
    # 48-long runs span 6 lines: fewer runs, each dearer, cheaper per element
    six = m.strided_read_ns(elements, Access(run=48, jump=FAR_JUMP_ELEMENTS))
    assert six == pytest.approx(elements / 48 * (m.profile.ns_per_far_run + 6 * m.profile.ns_per_far_line))
    assert six < one_line


def test_a_few_interleaved_streams_read_at_the_streaming_price():
    m = MODEL
    for streams in (1, STREAMS_PREFETCHED):
        assert m.strided_read_ns(BIG, Access(run=16, jump=10**5, streams=streams)) == 0.0
    many = m.strided_read_ns(BIG, Access(run=16, jump=10**5, streams=STREAMS_PREFETCHED + 1))
    assert many == pytest.approx(BIG / 16 * (m.profile.ns_per_far_run + 2 * m.profile.ns_per_far_line))
    assert many == m.strided_read_ns(BIG, Access(run=16, jump=10**5))


def test_sub_line_runs_pay_for_pages_past_the_tlb_and_lines_past_the_cache():
    m = MODEL
    few = Access(run=1, jump=10**5, lines=TLB_PAGES, pages=TLB_PAGES)
    paged = Access(run=1, jump=10**5, lines=TLB_PAGES + 1, pages=TLB_PAGES + 1)
    evicted = Access(run=1, jump=10**5, lines=m.memory_elements(), pages=TLB_PAGES + 1)
    assert m.strided_read_ns(BIG, few) == 0.0
    assert m.strided_read_ns(BIG, paged) == pytest.approx(m.profile.ns_per_paged_element * BIG)
    assert m.strided_read_ns(BIG, evicted) == pytest.approx(m.profile.ns_per_evicted_element * BIG)


# ------------------------------------------------------------------- layouts and schedules
def _layout(model, lx, ly, batch, contract, extents):
    return best_matmul_layout(lx, ly, batch, contract, extents, None, model)


def test_the_memory_terms_move_a_layout_only_past_the_margin():
    # A batched product of two large operands whose free rows lie far apart: both models price
    # the same candidates, and the memory terms may pick another only at LAYOUT_MEMORY_WORTH.
    ext = {0: 16, 1: 16, 2: 16, 3: 16, 4: 48, 5: 48}
    lx, ly, batch, contract = (0, 1, 2, 3, 4), (0, 1, 2, 3, 5), {2, 3}, {0, 1}
    off = MODEL.with_prices(ns_per_streamed_element=0.0, ns_per_far_run=0.0, ns_per_far_line=0.0,
                            ns_per_paged_element=0.0, ns_per_evicted_element=0.0)
    plain = _layout(off, lx, ly, batch, contract, ext)
    priced = _layout(MODEL, lx, ly, batch, contract, ext)
    # the chosen layout carries the full model's price, so explain's time is the honest one
    assert priced.cost > plain.cost
    huge = MODEL.with_prices(ns_per_far_run=1e6)
    moved = _layout(huge, lx, ly, batch, contract, ext)
    assert (moved.left, moved.right) != (plain.left, plain.right)


def test_below_the_margin_the_in_cache_layout_stands():
    # With the margin made unreachable, the memory terms never move a layout: the choice is the
    # in-cache model's, priced by the full one.
    ext = {0: 16, 1: 16, 2: 16, 3: 16, 4: 48, 5: 48}
    lx, ly, batch, contract = (0, 1, 2, 3, 4), (0, 1, 2, 3, 5), {2, 3}, {0, 1}
    off = MODEL.with_prices(ns_per_streamed_element=0.0, ns_per_far_run=0.0, ns_per_far_line=0.0,
                            ns_per_paged_element=0.0, ns_per_evicted_element=0.0)
    plain = _layout(off, lx, ly, batch, contract, ext)
    huge = MODEL.with_prices(ns_per_far_run=1e6, layout_memory_worth=float("inf"))
    kept = _layout(huge, lx, ly, batch, contract, ext)
    assert (kept.left, kept.right, kept.batch, kept.contract) == (plain.left, plain.right,
                                                                   plain.batch, plain.contract)
    assert kept.cost > plain.cost


@pytest.mark.parametrize("subscripts,shapes,supplements", [
    ("WCa,KCaib,Wi->WKCb", ((6, 9, 9, 9, 8), (9, 9, 9, 9, 8, 8, 8), (6, 9, 8)), ()),
    ("WCa,Caib,WCi->WCb", ((16, 16, 16, 16, 20), (16, 16, 20, 27, 27), (16, 16, 16, 16, 27)), ()),
    ("BP,BPQ,BQ->B", ((12, 12, 12, 12), (12, 12, 12, 12, 12, 16), (12, 12, 12, 16)), ()),
    ("WCo,WCa->Cao", ((16, 16, 16, 16, 48), (16, 16, 16, 16, 48)), (("W", 2),)),
])
def test_lowering_and_blocking_price_every_step_alike(subscripts, shapes, supplements):
    # The block chooser re-prices steps at block extents with `_step_cost`; at the schedule's
    # own extents that must be the price lowering gave the step (up to the tie-breaks).
    plan = make_plan(subscripts, shapes, supplements)
    schedule = make_schedule(plan, memory_limit=None, cost_model=MODEL)
    assert schedule.strategy == "pairwise"
    # the case reaches the memory terms: some step reads an operand past the threshold
    assert any(size_of(labels, schedule.extents) > MODEL.memory_elements()
               for step in schedule.steps for labels in (step.x_labels, step.y_labels))
    last = len(schedule.steps) - 1
    for k, step in enumerate(schedule.steps):
        # (the tie-breaks between equal layouts add well under a microsecond)
        assert _step_cost(step, schedule.extents, MODEL, k == last) == pytest.approx(
            step.cost_ns, rel=1e-5, abs=1000.0)


# ------------------------------------------------------------------------------- einsum
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@st.composite
def _two_operand_einsums(draw):
    n = draw(st.integers(2, 6))
    extents = {label: draw(st.integers(2, 4)) for label in range(n)}
    x = tuple(draw(st.permutations(range(n)))[:draw(st.integers(1, n))])
    y = tuple(draw(st.permutations(range(n)))[:draw(st.integers(1, n))])
    used = list(dict.fromkeys(x + y))
    result = tuple(draw(st.permutations(used))[:draw(st.integers(1, len(used)))])
    return x, y, result, extents


@settings(max_examples=300, deadline=None)
@given(_two_operand_einsums())
def test_einsum_walk_orders_the_result_as_numpy_allocates_it(case):
    # numpy's einsum allocates its result in the order its loop walks, so the result's strides
    # show where the walk puts every result label.
    x, y, result, extents = case
    letters: dict[int, str] = {}
    for label in (*x, *y, *result):
        letters.setdefault(label, _LETTERS[len(letters)])
    subscripts = "{},{}->{}".format(*("".join(letters[lab] for lab in t) for t in (x, y, result)))
    out = np.einsum(subscripts, np.zeros([extents[lab] for lab in x]),
                    np.zeros([extents[lab] for lab in y]))
    by_stride = tuple(lab for _, lab in sorted(zip((-s for s in out.strides), result)))
    walk = einsum_walk((x, y), result, extents)
    assert sorted(walk) == sorted(set(x) | set(y))
    assert tuple(lab for lab in walk if lab in result) == by_stride


def test_einsum_walk_moves_a_summed_label_out_past_a_contiguous_one():
    # 'ABCDa,CDaABb->ABCDb': the summed a starts innermost; both operands holding a and b
    # agree b steps less, so b goes inside; W (AB) against C (CD) conflicts and stays put.
    ext = {0: 12, 1: 12, 2: 12, 3: 12, 4: 11, 5: 15}
    assert einsum_walk(((0, 1, 2, 3, 4), (2, 3, 4, 0, 1, 5)), (0, 1, 2, 3, 5), ext) == (
        0, 1, 2, 3, 4, 5)


def test_an_einsum_whose_inner_loop_is_strided_costs_more():
    ext = {0: 64, 1: 64, 2: 32}
    contiguous = einsum_step_ns(((2, 1), (0, 2, 1)), (2, 0), ext, MODEL)   # ki,oki->ko
    strided = einsum_step_ns(((2, 1), (0, 1, 2)), (2, 0), ext, MODEL)      # ki,oik->ko
    # both walk o, k, i: the inner loop is i, 64 long (k does not continue it in the result)
    macs, loops = 64 * 64 * 32, 64 * 32
    m = MODEL
    assert contiguous == pytest.approx(m.profile.ns_per_einsum_mac * macs + m.profile.ns_per_inner_loop * loops)
    assert strided == pytest.approx(m.profile.ns_per_strided_einsum_mac * macs + m.profile.ns_per_inner_loop * loops)


def test_a_one_operand_einsum_pays_half_a_multiply_add_per_element_read():
    # 'oki->ko' (a sum over i): one element read per multiply-add where 'ki,oki->ko' reads two
    ext = {0: 64, 1: 64, 2: 32}
    one = einsum_step_ns(((0, 2, 1),), (2, 0), ext, MODEL)
    macs, loops = 64 * 64 * 32, 64 * 32
    p = MODEL.profile
    assert one == pytest.approx(p.ns_per_einsum_mac * macs / 2 + p.ns_per_inner_loop * loops)
    assert one < einsum_step_ns(((2, 1), (0, 2, 1)), (2, 0), ext, MODEL)
    # the inner loop's restarts are not halved with it
    fixed = MODEL.with_prices(ns_per_einsum_mac=0.0)
    assert einsum_step_ns(((0, 2, 1),), (2, 0), ext, fixed) == pytest.approx(p.ns_per_inner_loop * loops)


def test_an_einsum_pays_for_every_restart_of_its_inner_loop():
    # 'WCaib,WCajb->Cij' walks b innermost (6 long: i and j sit between a and b) and
    # 'WCiab,WCjab->Cij' a and b as one loop of 36: the same multiply-adds, six times the loops.
    ext = {0: 6, 1: 8, 2: 6, 3: 6, 4: 6, 5: 6}   # W C a i b j
    split = einsum_step_ns(((0, 1, 2, 3, 4), (0, 1, 2, 5, 4)), (1, 3, 5), ext, MODEL)
    joined = einsum_step_ns(((0, 1, 3, 2, 4), (0, 1, 5, 2, 4)), (1, 3, 5), ext, MODEL)
    macs = 6 * 8 * 6 * 6 * 6 * 6
    m = MODEL
    assert split == pytest.approx(m.profile.ns_per_einsum_mac * macs + m.profile.ns_per_inner_loop * macs / 6)
    assert joined == pytest.approx(m.profile.ns_per_einsum_mac * macs + m.profile.ns_per_inner_loop * macs / 36)


def test_a_vector_like_step_over_a_far_walked_operand_runs_as_a_stacked_product():
    # Each (W, C) pair multiplies a vector by an 11 x 15 matrix of an operand stored
    # C, a, W, b: einsum's loop walks W outside C and reads 15-element rows from 1,584
    # interleaved places; the stacked product walks C outside W and streams each C slab.
    shapes = ((12, 12, 12, 12, 11), (12, 12, 11, 12, 12, 15))
    plan = make_plan("WCa,CaWb->WCb", shapes, (("W", 2),))
    step, = make_schedule(plan, memory_limit=None, cost_model=MODEL).steps
    assert step.kernel == "matmul"
    assert not (step.layout.left.copy or step.layout.right.copy)
    # the same string in cache keeps einsum's loop
    small = make_plan("WCa,CaWb->WCb", ((4, 4, 4, 4, 11), (4, 4, 11, 4, 4, 15)), (("W", 2),))
    assert make_schedule(small, memory_limit=None, cost_model=MODEL).steps[0].kernel == "einsum"


# ------------------------------------------------------------- streaming into einsum's loop
def test_einsum_streams_a_large_operand_at_no_extra_price_a_matmul_factor_pays():
    assert MODEL.streamed_ns(BIG, "einsum") == 0.0
    assert MODEL.streamed_ns(BIG) == MODEL.streamed_ns(BIG, "matmul") > 0
    assert MODEL.streamed_ns(BIG) == pytest.approx(MODEL.profile.ns_per_streamed_element * BIG)


def test_a_large_vector_like_step_past_the_cache_runs_as_einsum_by_a_clear_margin():
    # 'bo,boi->bi': a stack of (1 x o) @ (o x i) products, too large per product for the
    # small-step rule; past the cache einsum's loop streams the big operand (decision 34)
    plan = make_plan("bo,boi->bi", ((64, 48), (64, 48, 96)), ())
    past = MODEL.with_prices(memory_threshold=1 << 12)
    within = MODEL.with_prices(memory_threshold=1 << 30)
    (far_step,) = make_schedule(plan, memory_limit=None, cost_model=past).steps
    (near_step,) = make_schedule(plan, memory_limit=None, cost_model=within).steps
    assert far_step.kernel == "einsum" and near_step.kernel == "matmul"
    # with einsum charged the matmul factors' streaming price the margin is not reached
    old = past.with_prices(ns_per_einsum_streamed_element=past.profile.ns_per_streamed_element)
    (old_step,) = make_schedule(plan, memory_limit=None, cost_model=old).steps
    assert old_step.kernel == "matmul"


# ------------------------------------------------------------------ gathers that sweep again
def test_gather_passes_counts_the_sweeps_of_a_hard_transpose():
    ext = {0: 36, 1: 24, 2: 6}            # stored (0, 1, 2): strides 144, 6, 1
    # label 1 to the front: every one of its 24 values sweeps the whole array (5,184 elements)
    assert gather_passes((0, 1, 2), (1, 0, 2), ext, window=4096) == 24
    # the last two swapped: each sweep stays inside one 24 x 6 tile (139 elements apart at most)
    assert gather_passes((0, 1, 2), (0, 2, 1), ext, window=4096) == 1
    # ... unless the window is smaller than a tile
    assert gather_passes((0, 1, 2), (0, 2, 1), ext, window=64) == 6
    # in memory order, or with the window off, nothing sweeps again
    assert gather_passes((0, 1, 2), (0, 1, 2), ext, window=4096) == 1
    assert gather_passes((0, 1, 2), (1, 0, 2), ext, window=0) == 1
    # two outer labels out of order multiply
    assert gather_passes((0, 1, 2), (2, 1, 0), ext, window=16) == 6 * 24


def test_equal_priced_layouts_prefer_the_gather_that_stays_in_tiles():
    # 'wi,kib->wkb' (the last step): gathering the big operand with i moved to the front, or
    # with i moved past b (a local transpose), prices the same; the local one wins the tie
    # and the result comes out as 'kbw' (returned as a transposed view).
    extents = {0: 36, 1: 24, 2: 512, 3: 6}
    model = MODEL.with_prices(gather_window=4096, hard_gather_gain=0.0)
    layout = best_matmul_layout((0, 1), (2, 1, 3), set(), {1}, extents, (0, 2, 3), model)
    assert layout.swap and layout.left.copy and layout.left.free == (2, 3)
    assert not layout.right.copy and layout.right.transposed
    plain = best_matmul_layout((0, 1), (2, 1, 3), set(), {1}, extents, (0, 2, 3),
                               model.with_prices(gather_window=0))
    assert not plain.swap and plain.right.copy            # the output-order tie-break alone
    assert layout.cost == pytest.approx(plain.cost, rel=1e-4)   # the price does not move
    # and the call computes the same thing
    rng = np.random.default_rng(37)
    w, y = rng.standard_normal((36, 24)), rng.standard_normal((512, 24, 6))
    np.testing.assert_allclose(contract("wi,kib->wkb", w, y), np.einsum("wi,kib->wkb", w, y))


def test_a_gather_that_sweeps_again_costs_more_by_the_log_of_its_passes():
    model = MODEL.with_prices(hard_gather_gain=0.25)
    flat = model.copy_ns(10_000)
    assert model.gather_ns(10_000, 1) == flat
    assert model.gather_ns(10_000, 64) == pytest.approx(flat * (1 + 0.25 * 6))
    assert model.with_prices(hard_gather_gain=0.0).gather_ns(10_000, 64) == flat
    # the step prices (lowering and blocking alike) read the same: gathering a (36, 24, 512)
    # operand into order (0, 2, 1) walks label 2 (stride 1) outside label 1 (stride 512),
    # whose span, 11,777 elements, is past the window: 512 passes, log2 = 9
    extents = {0: 36, 1: 24, 2: 512}
    factor = MatmulFactor(free=(0, 2), spread=(), copy=True, transposed=False)
    assert factor_order((), (1,), factor, True) == (0, 2, 1)
    windowed = model.with_prices(gather_window=4096)
    size = 36 * 24 * 512
    assert size <= windowed.memory_elements()      # no memory term: the gather alone
    assert factor_read_ns((0, 1, 2), (), (1,), factor, True, extents, windowed) == pytest.approx(
        windowed.copy_ns(size) * (1 + 0.25 * 9))


def test_a_block_reads_its_slice_from_memory_when_its_operand_is_past_the_cache():
    # 'ij,jk,kl->il' along the path (ij,jk) first, its (2000 x 300) intermediate past the limit:
    # cut along i, each block's slice of the (2000 x 100) operand fits under the threshold, but
    # the operand does not, so every slice is streamed from memory.
    shapes = ((2000, 100), (100, 300), (300, 50))
    far = MODEL.with_prices(memory_threshold=100_000)
    near = MODEL.with_prices(memory_threshold=10**9)
    blocked = {name: schedule_labels(((0, 1), (1, 2), (2, 3)), (0, 3), shapes,
                                     optimize=((0, 1), (0, 1)), strategy="pairwise",
                                     memory_limit=60_000, cost_model=model)
               for name, model in (("far", far), ("near", near))}
    b_far, b_near = blocked["far"].blocking, blocked["near"].blocking
    assert b_far is not None and b_near is not None
    assert (b_far.labels, b_far.chunks) == (b_near.labels, b_near.chunks)
    assert b_far.labels == (0,) and b_far.sliced == (True, False, False)
    assert 100 * b_far.chunks[0] <= 100_000 and 300 * b_far.chunks[0] <= 100_000  # slices fit
    extra = blocked["far"].cost_ns - blocked["near"].cost_ns
    assert extra == pytest.approx(far.streamed_ns(2000 * 100))   # the operand, once


def test_a_transpose_in_long_runs_is_priced_at_its_roofline_and_one_element_by_element_as_a_gather():
    from contractions.model.numpy_prices import direct_ns

    ext = {0: 64, 1: 64, 2: 117}
    n = 64 * 64 * 117
    long_runs = direct_ns(((0, 1, 2),), (1, 0, 2), ext, MODEL)       # 'abc->bac': runs of 117
    one_by_one = direct_ns(((0, 1, 2),), (2, 1, 0), ext, MODEL)      # 'abc->cba': runs of 1
    assert long_runs == pytest.approx(MODEL.roofline_ns(0, 2 * n, 2 * n))
    assert one_by_one == pytest.approx(MODEL.copy_ns(n) - MODEL.fresh_buffer_ns(n))
    assert long_runs < one_by_one
    # runs of 4 elements (half a line) are still moved element by element
    short = {0: 64, 1: 64, 2: 4}
    assert direct_ns(((0, 1, 2),), (1, 0, 2), short, MODEL) == pytest.approx(
        MODEL.copy_ns(64 * 64 * 4) - MODEL.fresh_buffer_ns(64 * 64 * 4))
