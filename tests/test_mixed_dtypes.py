"""Mixed dtypes and the promises a differential fuzz found broken, each pinned on its own.

Every step computes in the result's dtype (numpy's rule for one einsum call: the operands are
cast to the result type), so two bool operands contracted first count their products rather
than or-ing them, and a float32 pair under a float64 result rounds at float64.  Calls whose
operands share a dtype keep it (bool in, bool out: an any over the products).  References are
``np.einsum`` on strings expanded by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from contractions import MemoryLimitError, contract, contract_expression

pytestmark = pytest.mark.usefixtures("nothing_planned")


def _close_at(result, want, dtype) -> None:
    assert result.dtype == dtype
    eps = np.finfo(dtype).eps
    scale = max(1.0, float(np.max(np.abs(want))))
    assert np.max(np.abs(result - want)) <= 16 * eps * scale


def test_two_bool_operands_contracted_first_count_their_products():
    # a and c are bool, b float64: the first pair is (a, b)'s or (a, c)'s; either way the sums
    # over W and Y are counts, as np.einsum computes them, not a logical or.
    rng = np.random.default_rng(49)
    a = rng.random((6, 3, 6, 5, 3)) < 0.5
    b = rng.random((6, 2, 6, 5, 3, 3))
    c = rng.random((3, 1, 3, 5, 6)) < 0.5
    want = np.einsum("ABwdh,Apwdih,iABdw->hwdi", a, b, c)
    for _ in range(3):   # the first call (unplanned), and the calls planned after it
        _close_at(contract("WYwdh,Wpwdih,iWYdw->hwdi", a, b, c), want, np.float64)


def test_a_float32_pair_under_a_float64_result_rounds_at_float64():
    rng = np.random.default_rng(3)
    x = (rng.random((2, 3, 4, 5, 6)) * 10).astype(np.float32)        # Y=(2, 3), s, f, H
    m = rng.random((5, 4, 6, 2, 3, 7)) < 0.7                          # f, s, H, Y, u
    z = rng.random((6, 5)) * 10                                       # H, f
    want = np.einsum("ABsfH,fsHABu,Hf->u", x, m, z)
    for _ in range(3):
        _close_at(contract("YsfH,fsHYu,Hf->u", x, m, z, len_H=1, len_Y=2), want, np.float64)


@pytest.mark.parametrize("narrow, wide", [(np.int8, np.int64), (np.float16, np.float32),
                                          (np.uint8, np.int16), (np.bool_, np.int8)])
def test_a_narrow_pair_computes_in_the_wider_result_type(narrow, wide):
    # The two narrow operands make the cheapest first pair, whose sum over j would overflow in
    # their own type (int8, uint8: 3 * 100 * 100; float16: 3 * 300 * 300) or saturate (bool).
    rng = np.random.default_rng(7)
    value = 300 if np.dtype(narrow).kind == "f" else 100
    x = np.full((20, 3), value).astype(narrow)
    y = np.full((3, 2), value).astype(narrow)
    if np.dtype(narrow).kind == "b":
        x, y = rng.random((20, 3)) < 0.8, rng.random((3, 2)) < 0.8
    z = np.ones((2, 40), wide)
    want = np.einsum("ij,jk,kl->il", x, y, z)
    for _ in range(3):
        got = contract("Ij,jK,Kl->Il", x, y, z, len_I=1, len_K=1)
        assert got.dtype == want.dtype
        if want.dtype.kind == "f":
            _close_at(got, want, want.dtype)
        else:
            assert np.array_equal(got, want)


def test_bool_operands_keep_numpys_bool_meaning():
    rng = np.random.default_rng(5)
    a, b, c = (rng.random(s) < 0.3 for s in ((4, 5, 6), (6, 7), (7, 4)))
    want = np.einsum("abc,cd,da->b", a, b, c)
    for optimize in ("auto", "greedy", False):
        got = contract("Abc,cd,dA->b", a, b, c, len_A=1, optimize=optimize)
        assert got.dtype == np.bool_ and np.array_equal(got, want)


OPTIMIZE = ["auto", "greedy", "optimal", "dp", "auto-hq", "branch-2", True, False]


@pytest.mark.parametrize("optimize", OPTIMIZE)
def test_the_memory_limit_advised_works_when_passed_back(optimize):
    # A single operand summed (no pairwise step): its smallest peak cannot be cut by blocks,
    # though the block search's estimate said it could.
    x = np.random.default_rng(0).random((40, 1, 2))
    want = np.einsum("abc->ba", x)
    try:
        got = contract("ZCH->CZ", x, len_Z=1, len_C=1, memory_limit=3, optimize=optimize)
    except MemoryLimitError as err:
        assert f"pass memory_limit={err.smallest_limit} or more" in str(err)
        got = contract("ZCH->CZ", x, len_Z=1, len_C=1, memory_limit=err.smallest_limit, optimize=optimize)
        expr = contract_expression("ZCH->CZ", x.shape, len_Z=1, len_C=1, optimize=optimize,
                                   memory_limit=err.smallest_limit)
        assert np.allclose(expr(x), want)
        with pytest.raises(MemoryLimitError) as again:
            contract_expression("ZCH->CZ", x.shape, len_Z=1, len_C=1, optimize=optimize, memory_limit=3)
        assert again.value.smallest_limit == err.smallest_limit
    assert np.allclose(got, want)


def test_torch_tensors_mix_with_numpy_arrays_read_backwards():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    t1, t3 = torch.rand(3, dtype=torch.float64), torch.rand(2, 3, 2, dtype=torch.float64)
    a = rng.random(4)
    for backwards in (a[::-1], rng.random((1, 3))[::-1, ::-1]):
        got = contract("u,Hh,ozl", t1, backwards, t3, len_H=backwards.ndim - 1)
        want = np.einsum("u,h,ozl" if backwards.ndim == 1 else "u,Xh,ozl",
                         t1.numpy(), backwards, t3.numpy())
        assert isinstance(got, torch.Tensor) and np.allclose(got.numpy(), want)


@pytest.mark.parametrize("subscripts, shapes, supplements", [
    ("...Cy,...C->...", ((2, 3, 4, 5), (2, 3, 4)), {"len_C": 2}),
    ("Wij,Wjk->Wik", ((2, 3, 4), (2, 4, 5)), {}),
    ("Wij->W", ((2, 3, 4),), {}),
    ("ab,bc,cd->ad", ((3, 4), (4, 5), (5, 6)), {}),
])
def test_torch_bool_operands_give_numpys_bool_result(subscripts, shapes, supplements):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    tensors = [torch.rand(s, generator=gen) < 0.3 for s in shapes]
    want = contract(subscripts, *(t.numpy() for t in tensors), **supplements)
    for optimize in ("auto", "greedy"):
        got = contract(subscripts, *tensors, optimize=optimize, **supplements)
        assert got.dtype == torch.bool
        assert np.array_equal(got.numpy(), want)
    expr = contract_expression(subscripts, *shapes, **supplements)
    assert np.array_equal(expr(*tensors).numpy(), want)


def test_array_api_bool_operands_give_numpys_bool_result():
    xp = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(2)
    a, b = rng.random((3, 4)) < 0.3, rng.random((4, 5)) < 0.3
    for subscripts, expanded, ops in (("Wa,ab->Wb", "xa,ab->xb", (a, b)), ("Wa->W", "xa->x", (a,))):
        got = contract(subscripts, *(xp.asarray(op) for op in ops))
        assert got.dtype == xp.bool
        assert np.array_equal(np.asarray(got), np.einsum(expanded, *ops))
