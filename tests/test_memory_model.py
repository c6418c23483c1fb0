"""The time model's memory terms: how an array is walked (`access_pattern`), what reading it
costs past the caches (`strided_read_ns`, `streamed_ns`), and that the schedule prices each
step the same way wherever it prices it (lowering and blocking).

Expected values are worked out by hand from strides written in the test, not read back from
the code under test.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from contractions.matmul_model import (
    FAR_JUMP_ELEMENTS,
    NUMPY_MODEL,
    TLB_PAGES,
    Access,
    access_pattern,
    best_matmul_layout,
    size_of,
)
from contractions.plan import make_plan
from contractions.schedule import make_schedule
from contractions.schedule.blocking import _step_cost

BIG = NUMPY_MODEL.memory_elements() + 1


# ------------------------------------------------------------------------- access_pattern
def test_a_walk_in_memory_order_is_one_run():
    assert access_pattern((0, 1, 2), (0, 1, 2), {0: 3, 1: 4, 2: 5}) == Access(60, 0)


def test_a_walk_that_moves_an_outer_axis_inside_reads_runs_of_the_trailing_ones():
    # stored (0, 1, 2, 3) with extents 2, 3, 4, 5: strides 60, 20, 5, 1
    ext = {0: 2, 1: 3, 2: 4, 3: 5}
    assert access_pattern((0, 1, 2, 3), (1, 0, 2, 3), ext) == Access(20, 60)
    assert access_pattern((0, 1, 2, 3), (0, 2, 1, 3), ext) == Access(5, 20)


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


def test_labels_of_extent_one_and_labels_not_stored_are_ignored():
    ext = {0: 1, 1: 7, 2: 9, 3: 5}
    assert access_pattern((0, 1, 2), (3, 2, 0, 1), ext) == access_pattern((1, 2), (2, 1), ext)


# ------------------------------------------------------------------------ strided_read_ns
def test_arrays_within_the_cache_and_long_runs_cost_nothing_extra():
    far = Access(run=8, jump=10 * FAR_JUMP_ELEMENTS)
    assert NUMPY_MODEL.strided_read_ns(NUMPY_MODEL.memory_elements(), far) == 0.0
    assert NUMPY_MODEL.strided_read_ns(BIG, Access(run=4096, jump=10**6)) == 0.0
    assert NUMPY_MODEL.strided_read_ns(BIG, Access(run=8, jump=FAR_JUMP_ELEMENTS - 1)) == 0.0


def test_runs_a_page_apart_pay_per_run_and_per_line():
    m = NUMPY_MODEL
    one_line = m.strided_read_ns(8 * 1000 + BIG - BIG % 8, Access(run=8, jump=FAR_JUMP_ELEMENTS))
    elements = 8 * 1000 + BIG - BIG % 8
    assert one_line == pytest.approx(elements / 8 * (m.ns_per_far_run + m.ns_per_far_line))
    # 48-long runs span 6 lines: fewer runs, each dearer, cheaper per element
    six = m.strided_read_ns(elements, Access(run=48, jump=FAR_JUMP_ELEMENTS))
    assert six == pytest.approx(elements / 48 * (m.ns_per_far_run + 6 * m.ns_per_far_line))
    assert six < one_line


def test_sub_line_runs_pay_for_pages_past_the_tlb_and_lines_past_the_cache():
    m = NUMPY_MODEL
    few = Access(run=1, jump=10**5, lines=TLB_PAGES, pages=TLB_PAGES)
    paged = Access(run=1, jump=10**5, lines=TLB_PAGES + 1, pages=TLB_PAGES + 1)
    evicted = Access(run=1, jump=10**5, lines=m.memory_elements(), pages=TLB_PAGES + 1)
    assert m.strided_read_ns(BIG, few) == 0.0
    assert m.strided_read_ns(BIG, paged) == pytest.approx(m.ns_per_paged_element * BIG)
    assert m.strided_read_ns(BIG, evicted) == pytest.approx(m.ns_per_evicted_element * BIG)


# ------------------------------------------------------------------- layouts and schedules
def _layout(model, lx, ly, batch, contract, extents):
    return best_matmul_layout(lx, ly, batch, contract, extents, None, model)


def test_the_memory_terms_move_a_layout_only_past_the_margin():
    # A batched product of two large operands whose free rows lie far apart: both models price
    # the same candidates, and the memory terms may pick another only at LAYOUT_MEMORY_WORTH.
    ext = {0: 16, 1: 16, 2: 16, 3: 16, 4: 48, 5: 48}
    lx, ly, batch, contract = (0, 1, 2, 3, 4), (0, 1, 2, 3, 5), {2, 3}, {0, 1}
    off = replace(NUMPY_MODEL, ns_per_streamed_element=0.0, ns_per_far_run=0.0, ns_per_far_line=0.0,
                  ns_per_paged_element=0.0, ns_per_evicted_element=0.0)
    plain = _layout(off, lx, ly, batch, contract, ext)
    priced = _layout(NUMPY_MODEL, lx, ly, batch, contract, ext)
    # the chosen layout carries the full model's price, so explain's time is the honest one
    assert priced.cost > plain.cost
    huge = replace(NUMPY_MODEL, ns_per_far_run=1e6)
    moved = _layout(huge, lx, ly, batch, contract, ext)
    assert (moved.left, moved.right) != (plain.left, plain.right)


def test_below_the_margin_the_in_cache_layout_stands(monkeypatch):
    # With the margin made unreachable, the memory terms never move a layout: the choice is the
    # in-cache model's, priced by the full one.
    import contractions.matmul_model as mm

    ext = {0: 16, 1: 16, 2: 16, 3: 16, 4: 48, 5: 48}
    lx, ly, batch, contract = (0, 1, 2, 3, 4), (0, 1, 2, 3, 5), {2, 3}, {0, 1}
    off = replace(NUMPY_MODEL, ns_per_streamed_element=0.0, ns_per_far_run=0.0, ns_per_far_line=0.0,
                  ns_per_paged_element=0.0, ns_per_evicted_element=0.0)
    plain = _layout(off, lx, ly, batch, contract, ext)
    huge = replace(NUMPY_MODEL, ns_per_far_run=1e6)
    monkeypatch.setattr(mm, "LAYOUT_MEMORY_WORTH", float("inf"))
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
    schedule = make_schedule(plan, memory_limit=None)
    assert schedule.strategy == "pairwise"
    # the case reaches the memory terms: some step reads an operand past the threshold
    assert any(size_of(labels, schedule.extents) > NUMPY_MODEL.memory_elements()
               for step in schedule.steps for labels in (step.x_labels, step.y_labels))
    for step in schedule.steps:
        assert _step_cost(step, schedule.extents) == pytest.approx(step.cost_ns, rel=1e-5)
