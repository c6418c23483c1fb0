"""Planning tiers (contractions/calls/tiers.py, dev/decisions.md "Planning that pays for
itself"): which tier plans a call, when the full search takes over, and that every tier's
schedule computes the same contraction (checked against np.einsum on hand-expanded strings)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import (
    ContractionError,
    contract,
    contract_expression,
    explanation,
    identifiability,
    make_plan,
)
from contractions.backends.compile import compile_any_extents, compile_schedule
from contractions.backends.numpy_backend import NUMPY_OPS
from contractions.calls import remembered, runners, tiers
from contractions.model.numpy_prices import NUMPY_MODEL
from contractions.schedule import make_schedule
from contractions.schedule.extent_specs import extent_specs, peak_at, price_at
from contractions.schedule.lowering import lower_candidates

from ._strategies import grouped_problems, hand_expand, needed_supplements

MID = ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50))
MID_OTHER = ((40, 2, 31), (2, 31, 50, 61), (40, 2, 50))
STRING = "WCa,Caib,WCi->WCb"
HAND = "wca,caib,wci->wcb"


pytestmark = pytest.mark.usefixtures("nothing_planned")   # (and search_is_dear: conftest.py)


@pytest.fixture
def search_is_free(monkeypatch):
    """A full search priced at nothing: every first call runs it at once."""
    monkeypatch.setattr(tiers, "search_ns", lambda n, model=None: 0.0)


def operands(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def test_a_new_structure_is_planned_quick_then_its_other_shapes_reuse_it(search_is_dear):
    plan = make_plan(STRING, MID, ())
    first = tiers.first_schedule(plan, memory_limit="default")
    assert first.tier == "quick" and first.upgrade_after > 1
    assert first.schedule.strategy == "pairwise"
    other = tiers.first_schedule(make_plan(STRING, MID_OTHER, ()), memory_limit="default")
    assert other.tier == "reuse"
    # the same decisions: path, kernels, result orders and matmul roles
    assert other.schedule.path == first.schedule.path
    assert [(s.kernel, s.result, s.swap) for s in other.schedule.steps] == [
        (s.kernel, s.result, s.swap) for s in first.schedule.steps]
    assert [s.result_shape for s in other.schedule.steps] != [s.result_shape for s in first.schedule.steps]


def test_a_full_search_replaces_a_quick_plan_as_what_later_shapes_follow(search_is_dear):
    plan = make_plan(STRING, MID, ())
    tiers.first_schedule(plan, memory_limit="default")          # quick: remembered
    full = make_schedule(plan, memory_limit="default")
    tiers.remember_full(plan, full)
    other = tiers.first_schedule(make_plan(STRING, MID_OTHER, ()), memory_limit="default")
    assert other.tier == "reuse" and other.schedule.path == full.path
    assert [s.kernel for s in other.schedule.steps] == [s.kernel for s in full.steps]


def test_the_quick_tier_takes_the_path_of_fewest_flops(search_is_dear):
    plan = make_plan("GFa,Gaib,Fo,Gio->GFb", ((3, 40, 20), (3, 20, 30, 21), (40, 50), (3, 30, 50)), ())
    exp = plan.expansion
    every = lower_candidates(exp.inputs, exp.output, plan.shapes, extents_by_label=plan.extents)
    quick = tiers.first_schedule(plan, memory_limit="default").schedule
    assert quick.flops == min(s.flops for s in every)


def test_a_large_call_is_planned_fully_at_once():
    # ~0.4 ms of modelled work: a 3-operand search (~0.6 ms predicted) is not a tenth of that,
    # but 40x the work is
    big = ((400, 2, 120), (2, 120, 50, 60), (400, 2, 50))
    first = tiers.first_schedule(make_plan(STRING, big, ()), memory_limit="default")
    assert first.schedule.cost_ns * tiers.SEARCH_FRACTION >= tiers.search_ns(3)
    assert first.tier == "full" and first.upgrade_after == 0
    assert first.schedule == make_schedule(make_plan(STRING, big, ()), memory_limit="default")


def test_explicit_optimize_zero_extents_and_broken_limits_go_to_the_full_search(search_is_dear):
    plan = make_plan(STRING, MID, ())
    assert tiers.first_schedule(plan, optimize="greedy", memory_limit="default").tier == "full"
    assert tiers.first_schedule(plan, optimize=[(1, 2), (0, 1)], memory_limit="default").tier == "full"
    zero = make_plan(STRING, ((40, 2, 0), (2, 0, 50, 60), (40, 2, 50)), ())
    assert tiers.first_schedule(zero, memory_limit="default").tier == "full"
    tight = tiers.first_schedule(plan, memory_limit=1000)
    assert tight.tier == "full" and tight.schedule.peak_extra <= 1000


def test_a_small_problem_is_one_einsum_call_in_every_tier(search_is_dear):
    first = tiers.first_schedule(make_plan(STRING, ((2, 2, 3), (2, 3, 2, 3), (2, 2, 2)), ()))
    assert first.schedule.strategy == "direct" and first.tier == "full" and first.search_ns == 0


def test_contract_runs_the_cheap_tier_then_the_full_search_on_the_upgrade_call(search_is_dear):
    ops = operands(MID)
    want = np.einsum(HAND, *ops)
    got = contract(STRING, *ops)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    key = (STRING, *MID)
    run = runners.HOT[key]
    assert type(run) is runners.Provisional and run.calls == 1
    # (explain now sees the structure planned: it reports the reuse of that quick plan, priced
    # alike but for the search's tie-breaks)
    assert run.upgrade_after == pytest.approx(explanation(STRING, *MID).first_call.upgrade_after, rel=1e-4)
    run.upgrade_after = 3        # (the real count is in the thousands with the search priced so)
    np.testing.assert_allclose(contract(STRING, *ops), want, rtol=1e-10, atol=1e-12)
    assert runners.HOT[key] is run
    upgraded = contract(STRING, *ops)                 # the 3rd call: the full search runs
    assert type(runners.HOT[key]) is not runners.Provisional
    # the full runner is the full search's schedule: the same bits as contract_expression's
    np.testing.assert_array_equal(upgraded, contract_expression(STRING, *MID)(*ops))
    np.testing.assert_array_equal(contract(STRING, *ops), upgraded)


def test_contract_plans_fully_at_once_when_the_search_is_cheap(search_is_free):
    ops = operands(MID)
    got = contract(STRING, *ops)
    assert type(runners.HOT[(STRING, *MID)]) is not runners.Provisional
    np.testing.assert_array_equal(got, contract_expression(STRING, *MID)(*ops))


def test_explain_reports_the_first_call_tier_and_changes_nothing(search_is_dear):
    first = explanation(STRING, *MID).first_call
    assert first.tier == "quick" and first.upgrade_after > 1
    assert "first call      quick tier (the path of fewest FLOPs alone)" in str(explanation(STRING, *MID))
    assert explanation(STRING, *MID_OTHER).first_call.tier == "quick"   # explain remembered nothing
    contract(STRING, *operands(MID))
    again = explanation(STRING, *MID_OTHER)
    assert again.first_call.tier == "reuse"
    assert f"takes over on call {again.first_call.upgrade_after} of this shape" in str(again)
    assert explanation(STRING, *MID, optimize="greedy").first_call is None


def test_other_layouts_and_torch_follow_the_tiers_too(search_is_dear):
    ops = operands(MID)
    fortran = [np.asfortranarray(a) for a in ops]
    np.testing.assert_allclose(contract(STRING, *fortran), np.einsum(HAND, *ops), rtol=1e-10, atol=1e-12)
    torch = pytest.importorskip("torch")
    for shapes in (MID, MID_OTHER):
        t = [torch.from_numpy(a) for a in operands(shapes, seed=1)]
        np.testing.assert_allclose(contract(STRING, *t).numpy(),
                                   np.einsum(HAND, *(a.numpy() for a in t)), rtol=1e-10, atol=1e-12)


def _resized(problem, step):
    """``problem`` with every extent raised by ``step`` (none of them 1: one structure)."""
    return dataclasses.replace(
        problem,
        group_shapes={g: tuple(n + step for n in s) for g, s in problem.group_shapes.items()},
        letter_sizes={c: n + step for c, n in problem.letter_sizes.items()})


@settings(max_examples=60, deadline=None)
@given(grouped_problems(max_terms=4), st.integers(1, 3), st.integers(1, 3))
def test_every_tier_computes_the_contraction(problem, step_a, step_b):
    first, second = _resized(problem, step_a), _resized(problem, step_b)
    info = identifiability(problem.subscripts)
    supplements = tuple(sorted((k[4:], v) for k, v in needed_supplements(problem, info).items()))
    plans = [make_plan(p.subscripts, tuple(p.operand_shapes()), supplements) for p in (first, second)]
    exp = plans[0].expansion
    rng = np.random.default_rng(0)
    arrays = [[rng.standard_normal(s) for s in p.operand_shapes()] for p in (first, second)]
    wants = [np.einsum(hand_expand(p), *a) for p, a in zip((first, second), arrays)]
    candidates = lower_candidates(exp.inputs, exp.output, plans[0].shapes, strategy="pairwise",
                                  extents_by_label=plans[0].extents)
    full = min(candidates, key=lambda s: s.cost_ns)
    quick = lower_candidates(exp.inputs, exp.output, plans[0].shapes, strategy="pairwise",
                             extents_by_label=plans[0].extents, tier="quick")
    assert len(quick) == 1 and quick[0].flops == min(s.flops for s in candidates)
    for schedule in (full, quick[0]):
        np.testing.assert_allclose(compile_schedule(schedule, NUMPY_OPS)(*arrays[0]), wants[0],
                                   rtol=1e-10, atol=1e-10)
        # followed at other extents (the same structure: no extent is 1 in either)
        followed = lower_candidates(exp.inputs, exp.output, plans[1].shapes, strategy="pairwise",
                                    extents_by_label=plans[1].extents, tier="reuse", follow=(schedule,))
        assert len(followed) == 1 and followed[0].path == schedule.path
        np.testing.assert_allclose(compile_schedule(followed[0], NUMPY_OPS)(*arrays[1]), wants[1],
                                   rtol=1e-10, atol=1e-10)
        # ... and run by the structure's program compiled once (shapes read at call time):
        # the same arithmetic as the re-extended schedule's, bit for bit, priced alike
        specs = extent_specs(schedule)
        assert specs is not None
        ext = plans[1].extents
        np.testing.assert_array_equal(compile_any_extents(schedule, specs, NUMPY_OPS)(ext)(*arrays[1]),
                                      compile_schedule(followed[0], NUMPY_OPS)(*arrays[1]))
        price = price_at(specs, ext)
        assert price.flops == followed[0].flops
        assert price.cost_ns == pytest.approx(followed[0].cost_ns, rel=1e-9)
        assert peak_at(schedule, ext) == followed[0].peak_extra
        assert followed[0].peak_extra <= 7 * price.steps_size + 2 * sum(map(np.prod, plans[1].shapes))
        # ... and followed at its own extents, it is itself (prices aside: no tie-breaks)
        itself = lower_candidates(exp.inputs, exp.output, plans[0].shapes, strategy="pairwise",
                                  extents_by_label=plans[0].extents, tier="reuse", follow=(schedule,))[0]
        assert [dataclasses.replace(s, cost_ns=0.0, layout=None) for s in itself.steps] == [
            dataclasses.replace(s, cost_ns=0.0, layout=None) for s in schedule.steps]
        assert itself.peak_extra == schedule.peak_extra


def test_a_gpu_model_plans_every_first_call_fully(search_is_dear):
    from contractions.model.gpu_prices import CUPY_MODEL, TORCH_CUDA_MODEL

    plan = make_plan(STRING, MID, ())
    assert tiers.first_schedule(plan, memory_limit="default").tier == "quick"   # numpy's prices
    for model in (CUPY_MODEL, TORCH_CUDA_MODEL):
        first = tiers.first_schedule(plan, use_einsum=True, memory_limit=None, cost_model=model)
        assert first.tier == "full" and first.upgrade_after == 0
        assert first.schedule == make_schedule(plan, memory_limit=None, cost_model=model)


# ------------------------------------------------------------------------------ 'first' tier
# A small structure whose work is past one einsum call's threshold (8 * 3 * 6 * 7 * 8 > 4096):
# its first call runs one einsum per pair along the path of fewest FLOPs, nothing planned.
SMALL = ((8, 3, 6), (3, 6, 7, 8), (8, 3, 7))
SMALL_OTHER = ((8, 3, 5), (3, 5, 7, 9), (8, 3, 7))


def test_a_structures_first_call_runs_along_the_path_of_fewest_flops_unplanned(search_is_dear):
    plan = make_plan(STRING, SMALL, ())
    exp = plan.expansion
    first = tiers.first_schedule(plan, memory_limit="default", along_path=True)
    assert first.tier == "first" and first.upgrade_after == 2
    schedule = first.schedule
    assert schedule.strategy == "direct" and schedule.along_path and not schedule.steps
    quick = lower_candidates(exp.inputs, exp.output, plan.shapes, extents_by_label=plan.extents,
                             tier="quick")[0]
    assert schedule.path == quick.path                       # the path of fewest FLOPs
    assert schedule.cost_ns <= tiers.quick_ns(3)              # planning could not pay on this call
    key = remembered.structure_key(plan, None, True, NUMPY_MODEL)
    assert set(remembered.templates_of(key)) == {"first"}          # nothing to follow: not a template
    # the structure has had its first call: its next shape (or this one again) plans quick
    again = tiers.first_schedule(make_plan(STRING, SMALL_OTHER, ()), memory_limit="default",
                                 along_path=True)
    assert again.tier == "quick" and again.schedule.strategy == "pairwise"


def test_the_first_tier_needs_a_backend_that_runs_einsum_along_a_path_and_small_work(search_is_dear):
    assert tiers.first_schedule(make_plan(STRING, SMALL, ()), memory_limit="default").tier == "quick"
    remembered.clear_templates()
    # MID's work (priced as einsum's loop) is past what planning the quick tier costs
    mid = tiers.first_schedule(make_plan(STRING, MID, ()), memory_limit="default", along_path=True)
    assert mid.tier == "quick" and mid.schedule.strategy == "pairwise"
    remembered.clear_templates()
    # intermediates past the memory limit: the quick tier (which keeps to it) plans the call
    tight = tiers.first_schedule(make_plan(STRING, SMALL, ()), memory_limit=10, along_path=True)
    assert tight.tier != "first"
    remembered.clear_templates()
    assert tiers.first_schedule(make_plan(STRING, SMALL, ()), optimize="greedy",
                                memory_limit="default", along_path=True).tier == "full"


def test_contract_runs_the_first_tier_then_plans_the_shapes_second_call(search_is_dear):
    ops = operands(SMALL)
    want = np.einsum(HAND, *ops)
    np.testing.assert_allclose(contract(STRING, *ops), want, rtol=1e-10, atol=1e-12)
    key = (STRING, *SMALL)
    first = runners.HOT[key]
    assert type(first) is runners.Provisional and first.upgrade_after == 2
    planned = runners._COMPILED.cache_info().misses
    np.testing.assert_allclose(contract(STRING, *ops), want, rtol=1e-10, atol=1e-12)
    quick = runners.HOT[key]                        # the quick tier's runner, planned on call 2
    assert type(quick) is runners.Provisional and quick is not first and quick.upgrade_after > 2
    assert (runners.HOT, key) in quick.homes        # (its own upgrade replaces it in the hot dict)
    assert runners._COMPILED.cache_info().misses == planned   # (re-planned past the runner cache)
    # the structure now has its template: a new shape runs the structure's program unplanned
    other = operands(SMALL_OTHER, seed=1)
    np.testing.assert_allclose(contract(STRING, *other), np.einsum(HAND, *other), rtol=1e-10,
                               atol=1e-12)
    assert runners._COMPILED.cache_info().misses == planned


def test_explain_reports_the_first_tier(search_is_dear):
    text = str(explanation(STRING, *SMALL))
    assert "first call      first tier (the structure's first call: one einsum per pair" in text
    assert explanation(STRING, *SMALL).first_call.tier == "first"


@settings(max_examples=60, deadline=None)
@given(grouped_problems(max_terms=5), st.sampled_from(["float64", "float16", "complex128",
                                                        "int64", "object"]))
def test_the_first_tiers_einsum_along_the_path_computes_the_contraction(problem, dtype):
    from contractions.backends.numpy_backend import compile as numpy_compile
    from contractions.schedule.lowering import _along_path, _einsum_string

    info = identifiability(problem.subscripts)
    supplements = tuple(sorted((k[4:], v) for k, v in needed_supplements(problem, info).items()))
    plan = make_plan(problem.subscripts, tuple(problem.operand_shapes()), supplements)
    exp = plan.expansion
    extents = dict(enumerate(plan.extents))
    schedule = _along_path(exp.inputs, exp.output, plan.shapes, plan.output_shape, extents,
                           _einsum_string(exp.inputs, exp.output), 0)
    if schedule is None:
        assert len(exp.inputs) < 2
        return
    rng = np.random.default_rng(3)
    values = [rng.integers(-3, 4, size=s) for s in plan.shapes]
    arrays = [v.astype(dtype) for v in values]
    want = np.einsum(hand_expand(problem), *(v.astype(np.float64) for v in values))
    got = numpy_compile(plan, schedule, runners._DEFAULT_OPTIONS)(*arrays)
    assert np.shape(got) == want.shape
    if dtype != "object":
        assert np.result_type(got) == np.result_type(*arrays)
    if not want.shape:
        assert not isinstance(got, np.ndarray) or dtype == "object"   # a numpy scalar, as np.einsum
    np.testing.assert_allclose(np.asarray(got, dtype=np.complex128), want,
                               rtol=1e-3 if dtype == "float16" else 1e-12, atol=1e-3)


# ---------------------------------------------------------------------- blocked structures
BLOCKING_LIMIT = 20_000   # elements: MID's fastest order needs 4x that unblocked


def test_a_blocked_structures_other_shapes_follow_its_cut(search_is_dear):
    first = tiers.first_schedule(make_plan(STRING, MID, ()), memory_limit=BLOCKING_LIMIT)
    assert first.tier == "full" and first.schedule.blocking is not None   # blocks: searched
    assert first.schedule.blocking.base is not None
    reused = tiers.first_schedule(make_plan(STRING, MID_OTHER, ()), memory_limit=BLOCKING_LIMIT)
    assert reused.tier == "reuse" and reused.upgrade_after > 1
    blocking = reused.schedule.blocking
    assert blocking is not None and blocking.purpose == "memory"
    assert set(blocking.labels) <= set(first.schedule.blocking.labels)
    assert reused.schedule.peak_extra <= BLOCKING_LIMIT
    assert reused.schedule.path == first.schedule.path
    report = explanation(STRING, *MID_OTHER, memory_limit=BLOCKING_LIMIT)
    assert report.first_call.tier == "reuse" and report.first_call.blocks == blocking.n_blocks
    assert f"in {blocking.n_blocks} blocks along the labels its search cut" in str(report)
    # the blocks take the structure's decisions: the kernels and result orders of its blocks
    # (lowered for block shapes) or of the schedule they cut
    def decisions(schedule):
        return [(s.kernel, s.result, s.swap) for s in schedule.steps]

    searched = [decisions(inner) for _, inner in first.schedule.blocking.inner]
    searched.append(decisions(first.schedule.blocking.base))
    assert all(decisions(inner) in searched for _, inner in blocking.inner)
    assert blocking.counts == first.schedule.blocking.counts   # (nearby extents: the same cut)
    ops = operands(MID_OTHER)
    np.testing.assert_allclose(compile_schedule(reused.schedule, NUMPY_OPS)(*ops), np.einsum(HAND, *ops),
                               rtol=1e-10, atol=1e-12)


def test_the_search_for_blocks_is_priced_into_when_the_full_search_runs(search_is_dear, monkeypatch):
    monkeypatch.setattr(tiers, "search_ns", lambda n, model=None: 0.0)
    plan = make_plan(STRING, MID, ())
    tiers.first_schedule(plan, memory_limit=BLOCKING_LIMIT)
    reused = tiers.first_schedule(make_plan(STRING, MID_OTHER, ()), memory_limit=BLOCKING_LIMIT)
    assert reused.tier == "reuse" and reused.search_ns == tiers.blocks_search_ns()
    # (paths priced at nothing, blocks searched at nothing: the full search runs at once)
    monkeypatch.setattr(tiers, "blocks_search_ns", lambda model=None: 0.0)
    again = tiers.first_schedule(make_plan(STRING, MID_OTHER, ()), memory_limit=BLOCKING_LIMIT)
    assert again.tier == "full" and again.schedule.peak_extra <= BLOCKING_LIMIT


def test_an_unblocked_structure_that_breaks_the_limit_at_new_extents_is_searched(search_is_dear):
    limit = 200_000
    small = tiers.first_schedule(make_plan(STRING, MID, ()), memory_limit=limit)
    assert small.schedule.blocking is None and small.schedule.peak_extra <= limit
    big = ((400, 2, 120), (2, 120, 50, 60), (400, 2, 50))
    first = tiers.first_schedule(make_plan(STRING, big, ()), memory_limit=limit)
    assert first.tier == "full" and first.schedule.peak_extra <= limit


def test_contract_follows_a_blocked_structure_then_upgrades(monkeypatch):
    monkeypatch.setattr(tiers, "search_ns", lambda n, model=None: 0.0)
    monkeypatch.setattr(tiers, "blocks_search_ns", lambda model=None: 1e15)
    # (a new structure beyond the limit is searched at once, however dear the search)
    contract(STRING, *operands(MID), memory_limit=BLOCKING_LIMIT)
    first = tiers.first_schedule(make_plan(STRING, MID_OTHER, ()), memory_limit=BLOCKING_LIMIT,
                                 remember=False)
    assert first.tier == "reuse"
    # the search priced so that it takes over on this shape's second call
    monkeypatch.setattr(tiers, "blocks_search_ns",
                        lambda model=None: 1.5 * tiers.SEARCH_FRACTION * first.schedule.cost_ns)
    assert explanation(STRING, *MID_OTHER, memory_limit=BLOCKING_LIMIT).first_call.upgrade_after == 2
    ops = operands(MID_OTHER, seed=3)
    want = np.einsum(HAND, *ops)
    followed = contract(STRING, *ops, memory_limit=BLOCKING_LIMIT)
    np.testing.assert_allclose(followed, want, rtol=1e-10, atol=1e-12)
    upgraded = contract(STRING, *ops, memory_limit=BLOCKING_LIMIT)   # the full search runs
    np.testing.assert_allclose(upgraded, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(
        upgraded, contract_expression(STRING, *MID_OTHER, memory_limit=BLOCKING_LIMIT)(*ops))


# (small problems would be one einsum call: this model plans every problem pairwise)
PAIRWISE_MODEL = NUMPY_MODEL.with_prices(direct_max_naive=0, direct_max_naive_many_labels=0)
FOLLOWED_BLOCKS: list[int] = []


@settings(max_examples=40, deadline=None)
@given(grouped_problems(max_terms=4), st.integers(1, 3), st.integers(1, 3), st.sampled_from([2, 3, 8]))
def test_blocks_that_follow_a_structure_compute_the_contraction(problem, step_a, step_b, share):
    first, second = _resized(problem, step_a), _resized(problem, step_b)
    info = identifiability(problem.subscripts)
    supplements = tuple(sorted((k[4:], v) for k, v in needed_supplements(problem, info).items()))
    plans = [make_plan(p.subscripts, tuple(p.operand_shapes()), supplements) for p in (first, second)]
    unbounded = make_schedule(plans[0], cost_model=PAIRWISE_MODEL)
    if unbounded.strategy != "pairwise" or unbounded.peak_extra < 2 * share:
        return   # nothing to cut
    limit = unbounded.peak_extra // share
    remembered.clear_templates()
    try:
        searched = tiers.first_schedule(plans[0], memory_limit=limit, cost_model=PAIRWISE_MODEL)
    except ContractionError:
        return   # (no blocks within MAX_BLOCKS: the limit is refused, the structure unknown)
    try:
        followed = tiers.first_schedule(plans[1], memory_limit=limit, cost_model=PAIRWISE_MODEL)
    except ContractionError:
        return   # (the larger shape cannot keep the limit in MAX_BLOCKS blocks: refused)
    if searched.schedule.blocking is not None and followed.tier == "reuse":
        assert followed.schedule.peak_extra <= limit
        if followed.schedule.blocking is not None:
            FOLLOWED_BLOCKS.append(followed.schedule.blocking.n_blocks)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in second.operand_shapes()]
    np.testing.assert_allclose(compile_schedule(followed.schedule, NUMPY_OPS)(*arrays),
                               np.einsum(hand_expand(second), *arrays), rtol=1e-9, atol=1e-9)


def test_the_property_test_above_ran_blocks_that_follow_a_structure():
    # (hypothesis runs it first in file order: a structure followed in blocks at least once)
    if not FOLLOWED_BLOCKS:
        test_blocks_that_follow_a_structure_compute_the_contraction()
    assert FOLLOWED_BLOCKS


def test_torch_follows_a_blocked_structure_under_an_explicit_limit(search_is_dear):
    torch = pytest.importorskip("torch")
    contract(STRING, *(torch.from_numpy(a) for a in operands(MID)), memory_limit=BLOCKING_LIMIT)
    ops = operands(MID_OTHER, seed=4)
    tensors = [torch.from_numpy(a) for a in ops]
    report = explanation(STRING, *tensors, memory_limit=BLOCKING_LIMIT)
    assert report.first_call.tier == "reuse" and report.first_call.blocks > 1
    got = contract(STRING, *tensors, memory_limit=BLOCKING_LIMIT)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), np.einsum(HAND, *ops), rtol=1e-10, atol=1e-12)


def test_blocks_that_follow_the_base_alone_keep_an_axis_cut_to_one():
    # (no block of the template's structure to follow: every block takes the base's decisions,
    # a label cut to chunks of 1 staying an axis of 1 in each block)
    from contractions.schedule.blocking import block_like
    from contractions.schedule.ir import Blocking

    plan = make_plan(STRING, MID_OTHER, ())
    base = make_schedule(plan)
    assert base.strategy == "pairwise" and base.blocking is None
    c_label = 1   # C's one axis, extent 2: every step batches over it
    cut = Blocking(labels=(0, c_label), chunks=(40, 1), counts=(1, 2), accumulate=False,
                   operand_axes=(), storage=(), storage_axes=(), inner=())
    blocked = block_like(base, cut, base.peak_extra // 2)
    assert blocked is not None and blocked.blocking is not None
    assert blocked.peak_extra <= base.peak_extra // 2
    chunks = dict(zip(blocked.blocking.labels, blocked.blocking.chunks))
    assert chunks[c_label] == 1
    for _, inner in blocked.blocking.inner:
        assert [s.kernel for s in inner.steps] == [s.kernel for s in base.steps]
    ops = operands(MID_OTHER, seed=5)
    np.testing.assert_allclose(compile_schedule(blocked, NUMPY_OPS)(*ops), np.einsum(HAND, *ops),
                               rtol=1e-10, atol=1e-12)
    # ... and where the base squeezes an axis of 1 away, the block keeps its cut axis of 1
    shapes = ((40, 1, 2, 31), (2, 31, 50, 61), (40, 1, 2, 50))     # W of two axes, one of 1
    base = make_schedule(make_plan(STRING, shapes, ()))
    assert base.preparations[0].squeeze == (40, 2, 31)
    c_label = 2
    cut = Blocking(labels=(c_label,), chunks=(1,), counts=(2,), accumulate=False,
                   operand_axes=(), storage=(), storage_axes=(), inner=())
    blocked = block_like(base, cut, int(base.peak_extra * 0.6))
    assert blocked is not None and blocked.blocking.chunks == (1,)
    assert [p.squeeze for p in blocked.blocking.inner[0][1].preparations] == [(40, 1, 31), None, (40, 1, 50)]
    ops = operands(shapes, seed=6)
    np.testing.assert_allclose(compile_schedule(blocked, NUMPY_OPS)(*ops),
                               np.einsum("wxca,caib,wxci->wxcb", *ops), rtol=1e-10, atol=1e-12)
