"""The full search's branch and bound over candidate paths (dev/decisions.md, 52): every
step's floor is below its price, the paths it leaves out never change the schedule chosen,
and a model without a floor prices every path."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions.errors import MemoryLimitError
from contractions.model.numpy_prices import NUMPY_MODEL, NumpyCostModel
from contractions.model.torch_prices import TORCH_MODEL
from contractions.schedule import blocking, lowering
from contractions.schedule.ir import FORTRAN, STRIDED
from contractions.schedule.lowering import Candidates, _step_floors, lower_candidates

LETTERS = "abcdefgh"
EXTENTS = (1, 2, 3, 5, 8, 17, 32, 64, 127, 256)

# Prices unlike the built-in ones: more threads that gain more, dearer calls and loops.
OTHER_MODEL = NumpyCostModel().with_prices(blas_threads=8, thread_gain=0.9, ns_per_matmul_call=400.0,
                                           ns_per_einsum_mac=0.2, ns_per_strided_einsum_mac=0.3)
# Slow memory and a slow peak: the roofline floors most step prices (`CostModel.roofline_ns`).
WALLED_MODEL = NumpyCostModel().with_prices(cache_bytes_per_ns=2.0, memory_bytes_per_ns=0.5,
                                            peak_flops_per_ns=2.0)


@st.composite
def problems(draw, min_terms=3, max_terms=4):
    """(inputs, output, shapes, layouts) of a random contraction given as integer labels."""
    n = draw(st.integers(min_terms, max_terms))
    used = draw(st.lists(st.sampled_from(range(len(LETTERS))), min_size=2, max_size=7, unique=True))
    terms = [tuple(draw(st.lists(st.sampled_from(used), min_size=1, max_size=4, unique=True)))
             for _ in range(n)]
    every = sorted({lab for t in terms for lab in t})
    output = tuple(lab for lab in every if draw(st.booleans()))
    extent = {lab: draw(st.sampled_from(EXTENTS)) for lab in every}
    shapes = tuple(tuple(extent[lab] for lab in t) for t in terms)
    layouts = tuple(draw(st.sampled_from((0, 0, FORTRAN, STRIDED))) for _ in terms)
    return tuple(terms), output, shapes, layouts if any(layouts) else None


def _all_paths(inputs, output, shapes, layouts, model):
    return lower_candidates(inputs, output, shapes, "auto", "pairwise", True, None, layouts, model)


@settings(max_examples=150, deadline=None)
@given(problems(), st.sampled_from([NUMPY_MODEL, OTHER_MODEL, WALLED_MODEL]))
def test_a_steps_floor_is_never_above_its_price(problem, model):
    inputs, output, shapes, layouts = problem
    for schedule in _all_paths(inputs, output, shapes, layouts, model):
        final_order = tuple(lab for lab in output if schedule.extents[lab] != 1)
        terms = [p.labels for p in schedule.preparations]
        floors = _step_floors(terms, schedule.path, final_order, schedule.extents, model)
        assert floors is not None and len(floors) == len(schedule.steps)
        for floor, step in zip(floors, schedule.steps):
            assert 0.0 <= floor <= step.cost_ns * (1 + 1e-12), (schedule.path, step, floor)


def _unbounded(monkeypatch):
    monkeypatch.setattr(lowering, "_bounded", lambda *args, **kwargs: None)


def _schedule(inputs, output, shapes, limit, model):
    blocking.schedule_labels.cache_clear()
    try:
        return blocking.schedule_labels(inputs, output, shapes, "auto", None, True, limit,
                                        cost_model=model)
    except MemoryLimitError as exc:
        return str(exc)


@settings(max_examples=60, deadline=None)
@given(problems(), st.sampled_from([None, "default", "max_input", 4000, 150_000]),
       st.sampled_from([NUMPY_MODEL, OTHER_MODEL, WALLED_MODEL]))
def test_the_paths_left_out_never_change_the_schedule(problem, limit, model):
    inputs, output, shapes, _ = problem
    bounded = _schedule(inputs, output, shapes, limit, model)
    with pytest.MonkeyPatch.context() as patch:
        _unbounded(patch)
        every = _schedule(inputs, output, shapes, limit, model)
    blocking.schedule_labels.cache_clear()
    assert bounded == every


# 'ABamb,ABasc,mstn,ABbtd->ABcnd' at 4x4 batch and 15 elsewhere: most of its 18 paths are
# proved slower without being lowered.
WIDE = (((0, 1, 2, 3, 4), (0, 1, 2, 5, 6), (3, 5, 7, 8), (0, 1, 4, 7, 9)), (0, 1, 6, 8, 9),
        ((4, 4, 15, 15, 15), (4, 4, 15, 15, 15), (15, 15, 15, 15), (4, 4, 15, 15, 15)))


def test_the_bounded_search_keeps_the_fastest_paths_and_leaves_out_the_rest():
    inputs, output, shapes = WIDE
    every = lower_candidates(inputs, output, shapes, "auto", "pairwise")
    kept = lower_candidates(inputs, output, shapes, "auto", "pairwise", keep_within=1.25)
    assert isinstance(kept, Candidates) and not kept.complete
    assert len(every) == 18 and len(kept) < len(every) / 2
    ranked = sorted(every, key=lambda s: s.cost_ns)
    within = [s for s in every if s.cost_ns <= max(1.25 * ranked[0].cost_ns, ranked[1].cost_ns)]
    assert [s.path for s in kept] == [s.path for s in within]   # the same schedules, path order
    assert kept == within
    assert not any(math.isclose(s.cost_ns, ranked[0].cost_ns) for s in every if s not in kept)


def test_without_keep_within_or_a_floor_every_path_is_lowered():
    inputs, output, shapes = WIDE
    assert len(lower_candidates(inputs, output, shapes, "auto", "pairwise")) == 18
    assert TORCH_MODEL.contraction_floor_ns(2, 3, 4, 5) is None
    kept = lower_candidates(inputs, output, shapes, "auto", "pairwise", keep_within=1.25,
                            cost_model=TORCH_MODEL)
    assert len(kept) == 18 and getattr(kept, "complete", True)


def test_a_choice_slower_than_the_kept_paths_prices_every_path(monkeypatch):
    # A limit no kept path meets unblocked, whose blocks model slower than BLOCKING_WORTH
    # times the fastest: the search lowers every path before it chooses.
    inputs, output, shapes = WIDE
    calls = []
    original = lowering.lower_candidates

    def counted(*args, **kwargs):
        calls.append(kwargs.get("keep_within"))
        return original(*args, **kwargs)

    monkeypatch.setattr(blocking, "lower_candidates", counted)
    bounded = _schedule(inputs, output, shapes, 20_000, NUMPY_MODEL)
    fastest = min(s.cost_ns for s in lower_candidates(inputs, output, shapes, "auto", "pairwise"))
    assert bounded.blocking is not None and bounded.cost_ns > blocking.BLOCKING_WORTH * fastest
    # (the blocks' own schedules come through here too, each along one given path)
    assert calls[0] == blocking.BLOCKING_WORTH and None in calls
    monkeypatch.setattr(blocking, "lower_candidates", original)
    _unbounded(monkeypatch)
    assert _schedule(inputs, output, shapes, 20_000, NUMPY_MODEL) == bounded


def test_the_floor_bounds_every_layout_of_a_product_from_below():
    model = NUMPY_MODEL
    floor = model.contraction_floor_ns(4, 64, 32, 48)
    assert floor is not None and floor > 0
    # one call per batch entry, or the same work split into more, smaller products
    assert floor <= model.matmul_ns(4, 64, 32, 48)
    assert floor <= model.matmul_ns(4 * 8, 8, 32, 48)
    assert floor <= model.einsum_ns(4 * 64 * 32 * 48)
    worse = replace(model.profile, thread_gain=-0.5)
    assert NumpyCostModel(worse).contraction_floor_ns(4, 64, 32, 48) <= NumpyCostModel(worse).matmul_ns(
        4, 64, 32, 48)
    # a stack split over the threads (decision 63): the floor stays below its split price,
    # even with the hand-over free and the split gaining more than BLAS's threads
    split = NumpyCostModel(replace(model.profile, blas_threads=4, ns_per_split=0.0, split_gain=0.9,
                                   thread_gain=0.2))
    products = split.matmul_ns(64, 64, 32, 48)
    workers, priced = split.split_products(64, 64, 64, 32, 48, products)
    assert workers == 4 and priced < products
    assert split.contraction_floor_ns(64, 64, 32, 48) <= priced
