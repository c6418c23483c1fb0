"""New shapes of a known structure (contractions/calls/structures.py): which calls run on the
structure's program without planning, which the checked route still takes, and that the
results are the contraction's (np.einsum on hand-expanded strings) and bit-identical to what
the reuse tier's schedule computes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import SizeMismatchError, contract, contract_expression, make_plan
from contractions.backends.compile import compile_schedule
from contractions.backends.numpy_backend import NUMPY_OPS
from contractions.calls import remembered, runners, tiers
from contractions.calls.structures import DECLINED, clear_structures, known_structure, structure_key_of
from contractions.model.numpy_prices import NUMPY_MODEL

STRING = "WCa,Caib,WCi->WCb"
HAND = "wca,caib,wci->wcb"
MID = ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50))
MID_OTHER = ((41, 2, 31), (2, 31, 52, 61), (41, 2, 52))


pytestmark = pytest.mark.usefixtures("nothing_planned")   # (and search_is_dear: conftest.py)


def operands(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def planned():
    return runners._COMPILED.cache_info().misses


def test_a_new_shape_of_a_known_structure_is_not_planned(search_is_dear):
    contract(STRING, *operands(MID))
    before = planned()
    ops = operands(MID_OTHER, seed=1)
    got = contract(STRING, *ops)
    assert planned() == before                      # no plan, no schedule, no compile
    np.testing.assert_allclose(got, np.einsum(HAND, *ops), rtol=1e-10, atol=1e-10)
    run = runners.HOT[(STRING, *MID_OTHER)]
    assert type(run) is runners.Provisional and run.calls == 1 and run.upgrade_after > 1
    # the reuse tier's schedule for this shape computes the same bits
    plan = make_plan(STRING, MID_OTHER, ())
    reused = tiers.first_schedule(plan, memory_limit="default", remember=False)
    assert reused.tier == "reuse"
    np.testing.assert_array_equal(got, compile_schedule(reused.schedule, NUMPY_OPS)(*ops))


def test_its_upgrade_call_runs_the_full_search(search_is_dear):
    contract(STRING, *operands(MID))
    ops = operands(MID_OTHER, seed=1)
    contract(STRING, *ops)
    run = runners.HOT[(STRING, *MID_OTHER)]
    run.upgrade_after = 3                             # (priced so, the real count is huge)
    contract(STRING, *ops)
    assert runners.HOT[(STRING, *MID_OTHER)] is run
    upgraded = contract(STRING, *ops)
    assert type(runners.HOT[(STRING, *MID_OTHER)]) is not runners.Provisional
    np.testing.assert_array_equal(upgraded, contract_expression(STRING, *MID_OTHER)(*ops))


def test_one_einsum_call_serves_every_small_shape():
    small, other = ((2, 2, 3), (2, 3, 2, 3), (2, 2, 2)), ((3, 2, 2), (2, 2, 4, 3), (3, 2, 4))
    contract(STRING, *operands(small))
    before = planned()
    ops = operands(other, seed=2)
    got = contract(STRING, *ops)
    assert planned() == before
    first, again = runners.HOT[(STRING, *small)], runners.HOT[(STRING, *other)]
    assert again.func is first.func and again.args == first.args == ("abc,bcde,abd->abe",)
    np.testing.assert_allclose(got, np.einsum(HAND, *ops), rtol=1e-12)


def test_a_size_mismatch_is_still_reported_by_the_checked_route():
    contract(STRING, *operands(MID))
    bad = operands(((40, 2, 30), (2, 31, 50, 60), (40, 2, 50)))
    with pytest.raises(SizeMismatchError, match="group 'C' sub-axis 1|letter 'a'"):
        contract(STRING, *bad)


def test_zero_extents_large_work_and_other_strategies_go_to_the_checked_route(search_is_dear):
    contract(STRING, *operands(MID))
    structure = known_structure(structure_key_of(STRING, operands(MID), ()))
    assert structure is not None
    assert structure.runner(((40, 2, 0), (2, 0, 50, 60), (40, 2, 50))) is DECLINED
    # a small shape takes one einsum call, which this structure has not planned yet
    assert structure.runner(((2, 2, 3), (2, 3, 2, 3), (2, 2, 2))) is DECLINED
    ops = operands(((40, 2, 0), (2, 0, 50, 60), (40, 2, 50)))
    np.testing.assert_array_equal(contract(STRING, *ops), np.zeros((40, 2, 60)))


def test_large_work_is_planned_fully_at_once():
    contract(STRING, *operands(MID))
    big = ((400, 2, 120), (2, 120, 50, 60), (400, 2, 50))
    structure = known_structure(structure_key_of(STRING, operands(MID), ()))
    assert structure is not None and structure.runner(big) is DECLINED
    ops = operands(big)
    got = contract(STRING, *ops)
    assert type(runners.HOT[(STRING, *big)]) is not runners.Provisional
    np.testing.assert_array_equal(got, contract_expression(STRING, *big)(*ops))


def test_a_shape_whose_peak_breaks_the_limit_is_declined(search_is_dear):
    contract(STRING, *operands(MID))
    plan = make_plan(STRING, MID_OTHER, ())
    reused = tiers.first_schedule(plan, memory_limit=None, remember=False).schedule
    assert reused.peak_extra > 0
    tight = runners.structure_for(runners._NUMPY, make_plan(STRING, MID, ()), "auto",
                                  reused.peak_extra - 1, None)
    loose = runners.structure_for(runners._NUMPY, make_plan(STRING, MID, ()), "auto",
                                  reused.peak_extra, None)
    assert tight.runner(MID_OTHER) is DECLINED
    assert loose.runner(MID_OTHER) is not DECLINED


def test_other_layouts_and_dtypes_are_other_structures(search_is_dear):
    contract(STRING, *operands(MID))
    x, cores, z = operands(MID_OTHER, seed=3)
    fortran = np.asfortranarray(cores)
    strided = np.swapaxes(np.swapaxes(cores, 1, 3).copy(), 1, 3)   # the same values, not C
    for variant in (fortran, strided, cores.astype(np.float32)):
        got = contract(STRING, x, variant, z)
        np.testing.assert_allclose(got, np.einsum(HAND, x, cores, z), rtol=1e-5, atol=1e-5)
    keys = {structure_key_of(STRING, (x, v, z), ()) for v in (cores, fortran, strided)}
    assert len(keys) == 3


def _regrown(hand, shapes, growth):
    """``shapes`` with each letter of ``hand`` (one axis each) grown by its own amount; axes of
    1 stay 1 (the structure)."""
    letters = sorted(set(hand) - set(",->"))
    base = {ch: n for term, shape in zip(hand.split("->")[0].split(","), shapes)
            for ch, n in zip(term, shape)}
    new = {ch: base[ch] if base[ch] == 1 else base[ch] + growth[k] for k, ch in enumerate(letters)}
    return tuple(tuple(1 if n == 1 else new[ch] for ch, n in zip(term, shape))
                 for term, shape in zip(hand.split("->")[0].split(","), shapes))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([
    ("WCa,Caib,WCi->WCb", "wca,caib,wci->wcb", ((6, 2, 5), (2, 5, 4, 7), (6, 2, 4))),
    ("GFa,Gaib,GFb->GFi", "gfxa,gaib,gfxb->gfxi", ((2, 3, 4, 5), (2, 5, 6, 7), (2, 3, 4, 7))),
    ("Gio,Fo->GFi", "gio,fxo->gfxi", ((2, 5, 3), (4, 1, 3))),
    ("Wa,Wab,Wb->W", "wa,wab,wb->w", ((3, 4), (3, 4, 5), (3, 5))),
    ("Cab,Cbc,Ccd->Cad", "zab,zbc,zcd->zad", ((2, 8, 9), (2, 9, 10), (2, 10, 11))),
    ("ii,Wi->W", "ii,wi->w", ((4, 4), (3, 4))),
]), st.lists(st.integers(0, 9), min_size=12, max_size=12),
    st.booleans(), st.booleans())
def test_every_new_shape_computes_the_contraction(case, grow, fortran, steps):
    subscripts, hand, shapes = case
    remembered.clear_templates()
    clear_structures()
    runners.HOT.clear()
    runners._COMPILED.cache_clear()
    len_items = {"len_F": 2} if "F" in subscripts else {}
    other = _regrown(hand, shapes, grow)
    ops = operands(other, seed=4)
    if fortran:
        ops[0] = np.asfortranarray(ops[0])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tiers, "search_ns", lambda n, model=None: 1e15)
        if steps:   # no call is small enough for one einsum call: the steps' program runs
            patch.setattr(type(NUMPY_MODEL), "direct_max_naive_cost", lambda self, labels: 0)
        first = [np.asfortranarray(a) if fortran and k == 0 else a
                 for k, a in enumerate(operands(shapes))]
        # (a small structure's first call runs unplanned, the 'first' tier; the shape's second
        # call plans the schedule that later shapes follow)
        contract(subscripts, *first, **len_items)
        contract(subscripts, *first, **len_items)
        before = planned()
        got = contract(subscripts, *ops, **len_items)
        if steps and other != shapes:
            assert planned() == before      # the structure's program ran it
    want = np.einsum(hand, *ops)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


TT_TORCH, TT_TORCH_HAND = "GFa,Gaib,GFi->GFb", "gpfa,gaib,gpfi->gpfb"


def _tt_tensors(torch, seed):
    """``tensors(f, a, i, b)``: random float64 operands of `TT_TORCH` (G = (2,), F = (3, f))."""
    rng = np.random.default_rng(seed)

    def tensors(f, a, i, b):
        shapes = ((2, 3, f, a), (2, a, i, b), (2, 3, f, i))
        return [torch.from_numpy(rng.standard_normal(s)) for s in shapes]

    return tensors


def test_torch_new_shapes_run_the_structures_one_einsum_call(search_is_dear):
    torch = pytest.importorskip("torch")
    string, hand, tensors = TT_TORCH, TT_TORCH_HAND, _tt_tensors(torch, seed=5)

    first = tensors(4, 5, 6, 7)
    contract(string, *first, len_F=2)   # the structure's first call: one einsum along a path
    contract(string, *first, len_F=2)   # its second: planned
    before = planned()
    for size in ((5, 6, 7, 8), (6, 7, 8, 9)):
        ops = tensors(*size)
        got = contract(string, *ops, len_F=2)
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        torch.testing.assert_close(got, torch.einsum(hand, *ops), rtol=1e-10, atol=1e-10)
    assert planned() == before


def test_torch_past_one_einsum_calls_threshold_runs_the_one_call_until_its_full_search(search_is_dear):
    torch = pytest.importorskip("torch")
    string, hand, tensors = TT_TORCH, TT_TORCH_HAND, _tt_tensors(torch, seed=6)

    small = tensors(2, 2, 2, 2)
    contract(string, *small, len_F=2)              # one einsum call: the only template
    structure = known_structure(structure_key_of(string, small, (("len_F", 2),)))
    assert structure is not None and structure.one_call_for_steps
    big = tensors(6, 7, 8, 9)
    assert 2 * 3 * 6 * 7 * 8 * 9 > structure.direct_limit      # past the threshold
    before = planned()
    got = contract(string, *big, len_F=2)
    assert planned() == before
    torch.testing.assert_close(got, torch.einsum(hand, *big), rtol=1e-10, atol=1e-10)
    run = runners.HOT[(string, *((torch.Tensor, t.shape, False) for t in big), ("len_F", 2))]
    assert type(run) is runners.Provisional and run.upgrade_after > 1
    run.upgrade_after = 2
    again = contract(string, *big, len_F=2)            # the full search runs now
    assert planned() == before + 1
    torch.testing.assert_close(again, got, rtol=1e-10, atol=1e-10)


def test_numpy_never_runs_one_call_past_its_threshold(search_is_dear):
    small = operands(((2, 2, 3), (2, 3, 2, 3), (2, 2, 2)))
    contract(STRING, *small)
    structure = known_structure(structure_key_of(STRING, small, ()))
    assert structure is not None and not structure.one_call_for_steps
    assert structure.runner(MID) is DECLINED     # the steps need their own template


def test_a_blocked_structure_serves_the_shapes_that_fit_and_blocks_the_others(search_is_dear):
    # (W and C of one axis each; the default limit is 2**20 elements)
    big = ((256, 16, 34), (16, 34, 34, 34), (256, 16, 34))        # W C i b: 4.7M, beyond it
    contract(STRING, *operands(big))
    template = remembered.templates_of(remembered.structure_key(make_plan(STRING, big, ()), None, True, NUMPY_MODEL))
    assert template["pairwise"][0].blocking is not None             # the full search cut it
    beyond = ((256, 16, 32), (16, 32, 34, 34), (256, 16, 34))
    contract(STRING, *operands(beyond))
    structure = known_structure(structure_key_of(STRING, operands(beyond), ()))
    assert structure is not None and not structure.programs   # declined before compiling
    small = ((16, 16, 34), (16, 34, 34, 34), (16, 16, 34))         # 0.3M: fits
    before = planned()
    ops = operands(small, seed=1)
    got = contract(STRING, *ops)
    assert planned() == before                # the structure's program: the blocks' base
    np.testing.assert_allclose(got, np.einsum(HAND, *ops), rtol=1e-10, atol=1e-10)
    other = ((256, 16, 33), (16, 33, 34, 34), (256, 16, 34))       # beyond it again
    ops = operands(other, seed=2)
    got = contract(STRING, *ops)
    assert planned() == before + 1            # the checked route: blocks that follow the cut
    assert tiers.first_schedule(make_plan(STRING, other, ()), memory_limit="default",
                                remember=False).tier == "reuse"
    np.testing.assert_allclose(got, np.einsum(HAND, *ops), rtol=1e-10, atol=1e-10)
