"""Steps with nothing to sum: which kernel runs them (`_broadcast_kernel` in lowering).

An outer product (each operand holds labels the other lacks) runs as one einsum loop on numpy,
where the model prices it lower than np.multiply of broadcast views; an elementwise product or
a scaling stays np.multiply; backends without einsum, and torch, keep np.multiply's kernel.
The step's cost is the broadcast price either way, so the kernel never moves the path.
"""

from __future__ import annotations

import numpy as np
import pytest

from contractions import contract, explain
from contractions.model.numpy_prices import NumpyCostModel
from contractions.model.profile import Profile
from contractions.plan import make_plan
from contractions.schedule import make_schedule

rng = np.random.default_rng(7)

#: The built-in prices: the kernel and order choices below are the model's, so the tests state
#: the prices they are made with (a calibrated profile of another machine may choose otherwise;
#: the results are checked under whatever profile is active).
REFERENCE = NumpyCostModel(Profile())


def _steps(subscripts: str, shapes, cost_model=REFERENCE, **kwargs):
    plan = make_plan(subscripts, tuple(map(tuple, shapes)), ())
    return make_schedule(plan, memory_limit=None, cost_model=cost_model, **kwargs).steps


@pytest.mark.parametrize("subscripts, shapes", [
    ("bi,bj->bij", [(300, 40), (300, 40)]),
    ("bi,bj->bji", [(300, 40), (300, 40)]),
    ("i,j->ij", [(500,), (400,)]),
    ("abi,cj->acbij", [(6, 5, 12), (7, 9)]),
])
def test_an_outer_product_runs_as_one_einsum_loop_and_matches_numpy(subscripts, shapes):
    (step,) = _steps(subscripts, shapes)
    assert step.kernel == "einsum" and step.contract == ()
    x, y = (rng.standard_normal(s) for s in shapes)
    got = contract(subscripts, x, y)
    np.testing.assert_allclose(got, np.einsum(subscripts, x, y), rtol=1e-12)
    assert got.shape == np.einsum(subscripts, x, y).shape and got.dtype == np.float64


@pytest.mark.parametrize("subscripts, shapes", [
    ("bi,bi->bi", [(300, 40), (300, 40)]),     # elementwise
    ("bi,b->bi", [(300, 40), (300,)]),         # a scaling
    ("bj,bij->bij", [(30, 40), (30, 20, 40)]),  # one side within the other
])
def test_a_product_with_one_side_within_the_other_stays_np_multiply(subscripts, shapes):
    (step,) = _steps(subscripts, shapes)
    assert step.kernel == "multiply"
    x, y = (rng.standard_normal(s) for s in shapes)
    np.testing.assert_allclose(contract(subscripts, x, y), np.einsum(subscripts, x, y), rtol=1e-12)


def test_without_einsum_or_when_multiply_prices_lower_an_outer_product_stays_multiply():
    shapes = [(300, 40), (300, 40)]
    (step,) = _steps("bi,bj->bij", shapes, use_einsum=False)
    assert step.kernel == "multiply"
    never = REFERENCE.with_prices(ns_per_outer_einsum_element=1e9)
    (step,) = _steps("bi,bj->bij", shapes, cost_model=never)
    assert step.kernel == "multiply"


def test_the_kernel_does_not_change_the_price_the_path_is_chosen_with():
    shapes = [(300, 40), (300, 40)]
    never = REFERENCE.with_prices(ns_per_outer_einsum_element=1e9)
    (as_einsum,) = _steps("bi,bj->bij", shapes)
    (as_multiply,) = _steps("bi,bj->bij", shapes, cost_model=never)
    assert as_einsum.cost_ns == as_multiply.cost_ns > 0


def test_the_numpy_model_prices_einsum_below_multiply_for_outer_products():
    prices = REFERENCE.outer_product_ns(1 << 20, 40)
    assert set(prices) == {"einsum", "multiply"} and prices["einsum"] < prices["multiply"]


def test_outer_product_steps_inside_a_blocked_schedule_match_numpy():
    # a chain whose outer-product intermediate is cut into blocks by a small limit
    x, y, z = rng.standard_normal((64, 20)), rng.standard_normal((64, 30)), rng.standard_normal((30, 5))
    want = np.einsum("bi,bj,jk->bik", x, y, z)
    report = explain("bi,bj,jk->bik", x, y, z, memory_limit=4096, optimize=[(0, 1), (0, 1)])
    assert "blocks: 32" in report and "einsum 'ab,ac->acb'" in report   # sliced outer product
    got = contract("bi,bj,jk->bik", x, y, z, memory_limit=4096, optimize=[(0, 1), (0, 1)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_float16_and_integer_outer_products_keep_numpy_dtypes():
    a, b = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(8, dtype=np.int32).reshape(2, 4)
    got = contract("bi,bj->bij", a, b)
    assert got.dtype == np.einsum("bi,bj->bij", a, b).dtype
    np.testing.assert_array_equal(got, np.einsum("bi,bj->bij", a, b))
    h = rng.standard_normal((8, 5)).astype(np.float16)
    got16 = contract("bi,bj->bij", h, h)
    assert got16.dtype == np.float16
    np.testing.assert_allclose(got16, np.einsum("bi,bj->bij", h, h), rtol=2e-3)


def test_torch_keeps_its_one_broadcast_kernel():
    torch_model = pytest.importorskip("contractions.model.torch_prices")
    prices = torch_model.TORCH_MODEL.outer_product_ns(1 << 20, 40)
    assert set(prices) == {"multiply"}


def test_strided_inputs_of_an_outer_product_are_copied_and_the_copy_is_counted():
    from contractions.schedule.ir import STRIDED

    plan = make_plan("bi,bj->bij", ((300, 40), (300, 40)), ())
    plain = make_schedule(plan, memory_limit=None)
    strided = make_schedule(plan, memory_limit=None, layouts=(STRIDED, 0))
    (step,) = strided.steps
    assert step.x_view is not None and step.x_view.contiguous_first
    # a strided first operand is copied whole before the loop: its 12,000 elements count
    assert strided.peak_extra == plain.peak_extra + 300 * 40
    x = rng.standard_normal((40, 300)).T           # a transposed view (Fortran order)
    wide = rng.standard_normal((300, 80))[:, ::2]  # strided columns
    np.testing.assert_allclose(contract("bi,bj->bij", x, wide), np.einsum("bi,bj->bij", x, wide), rtol=1e-12)


def test_the_calls_outer_product_is_written_in_long_runs_and_returned_permuted():
    # 'pqa,rsb->pqrsab' in output order writes runs of b (39 elements); in the operands' own
    # orders, runs of a whole operand: the model prices the loop restarts, so the long runs
    # win and the result is that buffer permuted (a view, as a matmul's result is)
    subscripts, shapes = "pqa,rsb->pqrsab", [(16, 8, 12), (4, 8, 39)]
    (step,) = _steps(subscripts, shapes)
    assert step.result != (0, 1, 3, 4, 2, 5) and set(step.result[-3:]) in ({0, 1, 2}, {3, 4, 5})
    x, y = (rng.standard_normal(s) for s in shapes)
    got = contract(subscripts, x, y)
    np.testing.assert_array_equal(got, np.einsum(subscripts, x, y))
    assert got.shape == (16, 8, 4, 8, 12, 39) and not np.shares_memory(got, x)
    # where the output order already writes long runs it stays: another order must be
    # modelled a tenth faster (a permuted result costs its caller later)
    (kept,) = _steps("pa,rb->prab", [(4, 3000), (5, 3000)])
    assert kept.result == (0, 2, 1, 3)
