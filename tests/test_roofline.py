"""Every step price knows the memory wall: no step is priced below what its bytes take at the
profile's bandwidth or its FLOPs at the profile's peak (`NumpyCostModel.roofline_ns`).

The floors are checked against each step's traffic counted here, from the step's own fields
(both operands read, the result written, a gather's copy written and read, a promoted
product's wide result written and read), not from the engine's floor; the profiles are
injected (slow memory, a slow peak), so nothing depends on this machine.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions.model.numpy_prices import NumpyCostModel, roofline
from contractions.model.profile import Profile, load_profile, save_profile
from contractions.model.torch_prices import TorchCostModel
from contractions.schedule import schedule_labels

#: floors that bind almost everywhere: memory at 0.5 B/ns, 2 FLOP/ns
SLOW = replace(Profile(), cache_bytes_per_ns=2.0, memory_bytes_per_ns=0.5, peak_flops_per_ns=2.0)


def _traffic(schedule) -> list[tuple[float, int, int, int]]:
    """(price, FLOPs, elements moved, elements touched) of each step, counted here."""
    extents = schedule.extents
    size = lambda labels: math.prod(extents[label] for label in dict.fromkeys(labels))  # noqa: E731
    found = []
    for step in schedule.steps:
        x, y, result = size(step.x_labels), size(step.y_labels), math.prod(step.result_shape)
        copies = sum(size(labels) for view, labels in ((step.x_view, step.x_labels),
                                                       (step.y_view, step.y_labels))
                     if view is not None and view.gather)
        wide = math.prod(step.wide_shape) if step.reduce else 0
        found.append((step.cost_ns, step.flops, x + y + result + 2 * copies + 2 * wide,
                      x + y + result + copies + wide))
    return found


@st.composite
def contractions_(draw):
    """A pairwise-able contraction of 2-3 operands over labels 0..5, extents 1-40."""
    n_labels = draw(st.integers(2, 6))
    extents = [draw(st.sampled_from([1, 2, 3, 7, 16, 40])) for _ in range(n_labels)]
    terms = []
    for _ in range(draw(st.integers(2, 3))):
        labels = draw(st.lists(st.integers(0, n_labels - 1), min_size=1, max_size=4, unique=True))
        terms.append(tuple(labels))
    used = sorted({label for term in terms for label in term})
    output = tuple(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
    shapes = tuple(tuple(extents[label] for label in term) for term in terms)
    return tuple(terms), output, shapes


@settings(max_examples=150, deadline=None)
@given(contractions_(), st.sampled_from(["auto", "greedy", "optimal"]))
def test_no_step_is_priced_below_its_roofline(problem, optimize):
    inputs, output, shapes = problem
    model = NumpyCostModel(SLOW)
    schedule = schedule_labels(inputs, output, shapes, optimize=optimize, strategy="pairwise",
                               cost_model=model)
    for price, flops, moved, touched in _traffic(schedule):
        floor = max(flops / SLOW.peak_flops_per_ns,
                    8 * moved / (SLOW.cache_bytes_per_ns if touched <= SLOW.memory_threshold
                                 else SLOW.memory_bytes_per_ns))
        assert price >= floor * (1 - 1e-9), (schedule.steps, price, floor)
    assert schedule.cost_ns >= sum(price for price, *_ in _traffic(schedule))


def test_a_floor_that_binds_sets_the_price_and_one_that_does_not_changes_nothing():
    inputs, output, shapes = ((0, 1), (1, 2)), (0, 2), ((300, 200), (200, 100))
    loose = schedule_labels(inputs, output, shapes, strategy="pairwise",
                            cost_model=NumpyCostModel(replace(SLOW, cache_bytes_per_ns=0.0,
                                                              memory_bytes_per_ns=0.0, peak_flops_per_ns=0.0)))
    bound = schedule_labels(inputs, output, shapes, strategy="pairwise", cost_model=NumpyCostModel(SLOW))
    (step,) = bound.steps
    elements = 300 * 200 + 200 * 100 + 300 * 100   # within SLOW's caches: at 2 B/ns
    assert step.cost_ns == pytest.approx(max(8 * elements / 2.0, 2 * 300 * 200 * 100 / 2.0))
    assert loose.steps[0].cost_ns < step.cost_ns
    # a floor far below every price (the built-in defaults on this small product) moves nothing
    defaults = NumpyCostModel(Profile())
    unfloored = NumpyCostModel(replace(Profile(), cache_bytes_per_ns=0.0, memory_bytes_per_ns=0.0,
                                       peak_flops_per_ns=0.0))
    assert (schedule_labels(inputs, output, shapes, strategy="pairwise", cost_model=defaults).cost_ns
            == schedule_labels(inputs, output, shapes, strategy="pairwise", cost_model=unfloored).cost_ns)


def test_the_direct_route_and_the_path_of_einsums_are_floored_too():
    model = NumpyCostModel(SLOW)
    direct = schedule_labels(((0, 1), (1, 2)), (0, 2), ((30, 20), (20, 10)), strategy="direct", cost_model=model)
    elements = 30 * 20 + 20 * 10 + 30 * 10
    assert direct.cost_ns >= 8 * elements / SLOW.cache_bytes_per_ns
    # a pure transpose copies its operand: read once, written once
    moved = schedule_labels(((0, 1),), (1, 0), ((300, 200),), strategy="direct", cost_model=model)
    assert moved.cost_ns >= 8 * 2 * 300 * 200 / SLOW.cache_bytes_per_ns


def test_past_the_memory_threshold_the_memory_bandwidth_prices_the_bytes():
    small = replace(SLOW, memory_threshold=1000)
    assert roofline(small, 0, 900, 900) == 8 * 900 / small.cache_bytes_per_ns
    assert roofline(small, 0, 900, 1001) == 8 * 900 / small.memory_bytes_per_ns
    assert roofline(small, 10**6, 1, 1) == 10**6 / small.peak_flops_per_ns
    assert roofline(replace(small, cache_bytes_per_ns=0.0, memory_bytes_per_ns=0.0, peak_flops_per_ns=0.0),
                    10**6, 10**6, 10**6) == 0.0


def test_the_contraction_floor_of_the_path_search_stays_below_every_step_price():
    # the branch and bound prunes paths by `contraction_floor_ns`: with the roofline in it,
    # it must still be a lower bound of what the steps are priced
    model = NumpyCostModel(SLOW)
    schedule = schedule_labels(((0, 1), (1, 2)), (0, 2), ((64, 48), (48, 32)), strategy="pairwise",
                               cost_model=model)
    (step,) = schedule.steps
    assert model.contraction_floor_ns(1, 64, 48, 32) <= step.cost_ns


def test_torch_prices_share_the_floor():
    assert TorchCostModel(profile=SLOW).roofline_ns(100, 1000, 1000) == roofline(SLOW, 100, 1000, 1000)


def test_a_profile_written_before_the_roofline_prices_keeps_their_defaults(tmp_path):
    path = save_profile(Profile(), tmp_path / "old.json")
    data = json.loads(path.read_text())
    for name in ("cache_bytes_per_ns", "memory_bytes_per_ns", "peak_flops_per_ns"):
        del data["prices"][name]
    path.write_text(json.dumps(data))
    loaded = load_profile(path)
    assert (loaded.cache_bytes_per_ns, loaded.memory_bytes_per_ns, loaded.peak_flops_per_ns) == (
        Profile.cache_bytes_per_ns, Profile.memory_bytes_per_ns, Profile.peak_flops_per_ns)


def test_floored_schedules_still_compute_the_contraction():
    rng = np.random.default_rng(0)
    from contractions.backends.compile import compile_schedule
    from contractions.backends.numpy_backend import NUMPY_OPS

    shapes = ((6, 5, 4), (4, 5, 3), (3, 7))
    schedule = schedule_labels(((0, 1, 2), (2, 1, 3), (3, 4)), (4, 0), shapes, strategy="pairwise",
                               cost_model=NumpyCostModel(SLOW))
    arrays = [rng.standard_normal(shape) for shape in shapes]
    np.testing.assert_allclose(compile_schedule(schedule, NUMPY_OPS)(*arrays),
                               np.einsum("abc,cbd,de->ea", *arrays), rtol=1e-12)
